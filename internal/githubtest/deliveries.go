package githubtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// GitHub keeps a log of the deliveries of an App's webhook: every attempt, with its outcome. It
// does not redeliver a failed one by itself; the App may list its recent deliveries and ask for
// one to be delivered again, the same event with the same GUID (X-GitHub-Delivery) as a new
// attempt with a new id. The log keeps 3 days on GitHub.com and 7 days on GitHub Enterprise
// Server (WithEnterpriseServer).
// https://docs.github.com/webhooks/using-webhooks/handling-failed-webhook-deliveries,
// https://docs.github.com/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks,
// https://docs.github.com/rest/apps/webhooks

// Delivery retention of the delivery log.
const (
	DeliveryRetention     = 3 * 24 * time.Hour // GitHub.com: "deliveries from the past 3 days"
	DeliveryRetentionGHES = 7 * 24 * time.Hour // GitHub Enterprise Server: "the past 7 days"
)

// maxDeliveryResponse bounds the response body a delivery records.
const maxDeliveryResponse = 64 << 10

// maxDeliveriesKept bounds the delivery log in memory (a benchmark delivers tens of thousands):
// at twice as many, the oldest are dropped down to it, as GitHub drops those past its retention.
const maxDeliveriesKept = 20000

// HookDelivery is one attempt to deliver a webhook, as the fake's delivery log records it.
type HookDelivery struct {
	// ID is the attempt's id (a redelivery has a new one); GUID the event's, the value of
	// X-GitHub-Delivery (a redelivery keeps it).
	ID   int64
	GUID string
	// Event and Action are the event's name and its payload's action ("" when none).
	Event, Action string
	// InstallationID and RepositoryID are the payload's (0 when it has none).
	InstallationID, RepositoryID int64
	// URL is where it was sent.
	URL string
	// DeliveredAt is the fake time it was sent, Duration how long the answer took (fake time).
	DeliveredAt time.Time
	Duration    time.Duration
	// StatusCode is the answer's status (0 when there was none); Status says it in words, "OK"
	// for a 2xx.
	StatusCode int
	Status     string
	// Redelivery is true for an attempt asked for through the redelivery endpoint.
	Redelivery bool

	body            []byte
	secret          string
	requestHeaders  http.Header
	responseHeaders http.Header
	responseBody    string
}

// Deliveries returns the delivery attempts the fake made (retained or not; at least the latest
// 20,000), oldest first.
func (s *Server) Deliveries() []HookDelivery {
	s.hookMu.Lock()
	defer s.hookMu.Unlock()
	out := make([]HookDelivery, len(s.deliveries))
	for i, d := range s.deliveries {
		out[i] = *d
	}
	return out
}

// retention is how long this server's delivery log keeps a delivery.
func (s *Server) retention() time.Duration {
	if s.cfg.ghes {
		return DeliveryRetentionGHES
	}
	return DeliveryRetention
}

// send POSTs one delivery attempt of an event (body, already encoded) to url as GitHub does,
// and records it in the delivery log. A response outside 2xx, or none, is an error.
func (s *Server) send(ctx context.Context, url, secret, event, guid string, body []byte, redelivery bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building %s webhook: %w", event, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-GitHub-Hook-ID", "1")
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	req.Header.Set("X-GitHub-Hook-Installation-Target-ID", fmt.Sprint(s.cfg.appID))
	if secret != "" {
		req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
		req.Header.Set("X-Hub-Signature", SignSHA1(secret, body))
	}
	d := &HookDelivery{GUID: guid, Event: event, URL: url, DeliveredAt: s.clock.Now(), Redelivery: redelivery,
		body: body, secret: secret, requestHeaders: req.Header.Clone()}
	var about struct {
		Action       string `json:"action"`
		Installation *struct {
			ID int64 `json:"id"`
		} `json:"installation"`
		Repository *struct {
			ID int64 `json:"id"`
		} `json:"repository"`
	}
	if json.Unmarshal(body, &about) == nil {
		d.Action = about.Action
		if about.Installation != nil {
			d.InstallationID = about.Installation.ID
		}
		if about.Repository != nil {
			d.RepositoryID = about.Repository.ID
		}
	}
	resp, err := http.DefaultClient.Do(req)
	d.Duration = s.clock.Now().Sub(d.DeliveredAt)
	switch {
	case err != nil && (errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err)):
		d.Status = "timed out" // wording not documented
	case err != nil:
		d.Status = "failed to connect to host" // wording not documented
	default:
		d.StatusCode, d.responseHeaders = resp.StatusCode, resp.Header.Clone()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxDeliveryResponse))
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		d.responseBody = string(b)
		d.Status = "OK"
		if resp.StatusCode < 200 || resp.StatusCode > 299 {
			d.Status = "Invalid HTTP Response: " + strconv.Itoa(resp.StatusCode) // wording not documented
		}
	}
	s.hookMu.Lock()
	s.nextDelivery++
	d.ID = s.nextDelivery
	s.deliveries = append(s.deliveries, d)
	if len(s.deliveries) >= 2*maxDeliveriesKept {
		s.deliveries = append(s.deliveries[:0:0], s.deliveries[len(s.deliveries)-maxDeliveriesKept:]...)
	}
	s.hookMu.Unlock()
	s.changes.notify()
	switch {
	case err != nil:
		return fmt.Errorf("delivering %s webhook: %w", event, err)
	case d.Status != "OK":
		return fmt.Errorf("delivering %s webhook to %s: status %d", event, url, d.StatusCode)
	}
	return nil
}

// retainedLocked returns the deliveries still in the log (hookMu held), newest first.
func (s *Server) retainedLocked() []*HookDelivery {
	since := s.clock.Now().Add(-s.retention())
	var out []*HookDelivery
	for i := len(s.deliveries) - 1; i >= 0; i-- {
		if d := s.deliveries[i]; !d.DeliveredAt.Before(since) {
			out = append(out, d)
		}
	}
	return out
}

// deliveryItem is a delivery as the list answers it (hook-delivery-item).
func deliveryItem(d *HookDelivery) map[string]any {
	return map[string]any{
		"id": d.ID, "guid": d.GUID, "delivered_at": d.DeliveredAt.UTC().Format(time.RFC3339),
		"redelivery": d.Redelivery, "duration": d.Duration.Seconds(), "status": d.Status, "status_code": d.StatusCode,
		"event": d.Event, "action": nilIfEmpty(d.Action), "installation_id": nilIfZero(d.InstallationID),
		"repository_id": nilIfZero(d.RepositoryID), "throttled_at": nil,
	}
}

func nilIfZero(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

// handleListDeliveries is "List deliveries for an app webhook": the retained deliveries, newest
// first, per_page at a time (at most 100), with a cursor in the Link header for the next page;
// status=success keeps those with a status_code of 200-399, status=failure 400-599 (so a
// delivery that got no answer at all is in neither).
// https://docs.github.com/rest/apps/webhooks#list-deliveries-for-an-app-webhook
func (s *Server) handleListDeliveries(w http.ResponseWriter, r *http.Request) {
	q, err := deliveryQueryOf(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	s.hookMu.Lock()
	var items []map[string]any
	more, last := false, int64(0)
	for _, d := range s.retainedLocked() {
		if !q.keeps(d) {
			continue
		}
		if len(items) == q.per {
			more = true
			break
		}
		items = append(items, deliveryItem(d))
		last = d.ID
	}
	s.hookMu.Unlock()
	if items == nil {
		items = []map[string]any{}
	}
	if more {
		q2 := r.URL.Query()
		q2.Set("per_page", strconv.Itoa(q.per))
		q2.Set("cursor", "v1_"+strconv.FormatInt(last, 10))
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		w.Header().Set("Link", fmt.Sprintf(`<%s://%s%s?%s>; rel="next"`, scheme, r.Host, r.URL.EscapedPath(), q2.Encode()))
	}
	writeJSON(w, http.StatusOK, items)
}

// deliveryQuery is a list request's page size, cursor (the last id of the previous page; -1
// for the first page) and status filter.
type deliveryQuery struct {
	per    int
	after  int64
	status string
}

func deliveryQueryOf(r *http.Request) (deliveryQuery, error) {
	q := r.URL.Query()
	dq := deliveryQuery{per: DefaultPerPage, after: -1, status: q.Get("status")}
	if per, err := strconv.Atoi(q.Get("per_page")); err == nil && per > 0 {
		dq.per = min(per, MaxPerPage)
	}
	if c := q.Get("cursor"); c != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(c, "v1_"), 10, 64)
		if err != nil || !strings.HasPrefix(c, "v1_") {
			return dq, validationFailed("HookDelivery", "cursor", "invalid") // wording not documented
		}
		dq.after = n
	}
	if dq.status != "" && dq.status != "success" && dq.status != "failure" {
		return dq, validationFailed("HookDelivery", "status", "invalid")
	}
	return dq, nil
}

// keeps reports whether d is on the pages the query reads: after its cursor, and of its status
// (success: a status code of 200-399, failure: 400-599).
func (q deliveryQuery) keeps(d *HookDelivery) bool {
	switch {
	case q.after >= 0 && d.ID >= q.after:
		return false
	case q.status == "success":
		return d.StatusCode >= 200 && d.StatusCode <= 399
	case q.status == "failure":
		return d.StatusCode >= 400 && d.StatusCode <= 599
	}
	return true
}

// deliveryByID finds a retained delivery (hookMu held); nil when there is none.
func (s *Server) deliveryByIDLocked(r *http.Request) *HookDelivery {
	id, err := strconv.ParseInt(r.PathValue("delivery_id"), 10, 64)
	if err != nil {
		return nil
	}
	for _, d := range s.retainedLocked() {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// handleGetDelivery is "Get a delivery for an app webhook": the attempt with its request and
// response.
// https://docs.github.com/rest/apps/webhooks#get-a-delivery-for-an-app-webhook
func (s *Server) handleGetDelivery(w http.ResponseWriter, r *http.Request) {
	s.hookMu.Lock()
	d := s.deliveryByIDLocked(r)
	var out map[string]any
	if d != nil {
		out = deliveryItem(d)
		var payload any
		_ = json.Unmarshal(d.body, &payload)
		headers := func(h http.Header) map[string]any {
			if h == nil {
				return nil
			}
			m := map[string]any{}
			for k := range h {
				if k != "X-Hub-Signature-256" && k != "X-Hub-Signature" {
					m[k] = h.Get(k)
				}
			}
			return m
		}
		out["url"] = d.URL
		out["request"] = map[string]any{"headers": headers(d.requestHeaders), "payload": payload}
		out["response"] = map[string]any{"headers": headers(d.responseHeaders), "payload": d.responseBody}
	}
	s.hookMu.Unlock()
	if d == nil {
		writeErr(w, errNotFound)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// handleRedeliver is "Redeliver a delivery for an app webhook": 202, then the same payload with
// the same GUID is delivered again, as a new attempt (a new id, redelivery true), to the hook's
// URL now, signed with its secret. A delivery no longer in the log is 404.
// https://docs.github.com/rest/apps/webhooks#redeliver-a-delivery-for-an-app-webhook
func (s *Server) handleRedeliver(w http.ResponseWriter, r *http.Request) {
	s.hookMu.Lock()
	d := s.deliveryByIDLocked(r)
	var e pendingEvent
	if d != nil {
		e = pendingEvent{event: d.Event, guid: d.GUID, body: d.body, url: d.URL, secret: d.secret, redelivery: true}
	}
	s.hookMu.Unlock()
	if d == nil {
		writeErr(w, errNotFound)
		return
	}
	s.enqueue([]pendingEvent{e})
	writeJSON(w, http.StatusAccepted, map[string]any{})
}
