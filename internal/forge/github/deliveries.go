package github

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"
)

// GitHub's delivery log is the inbox of a service that was down or refused deliveries: GitHub
// records every attempt to deliver an App's webhook, does not deliver a failed one again by
// itself, and redelivers one when the App asks, as a new attempt of the same event (same GUID,
// same payload). The log keeps the past 3 days on GitHub.com and the past 7 on GitHub Enterprise
// Server.
// https://docs.github.com/webhooks/using-webhooks/handling-failed-webhook-deliveries,
// https://docs.github.com/webhooks/testing-and-troubleshooting-webhooks/redelivering-webhooks

// How long GitHub keeps an App's webhook deliveries, and so how far back they can be redelivered.
const (
	// DeliveryRetentionGitHub: GitHub.com (and GitHub Enterprise Cloud), "the past 3 days".
	DeliveryRetentionGitHub = 3 * 24 * time.Hour
	// DeliveryRetentionEnterprise: GitHub Enterprise Server, "the past 7 days".
	DeliveryRetentionEnterprise = 7 * 24 * time.Hour
)

// Bounds of one pass over the delivery log.
const (
	// DefaultMaxRedeliveries is how many redeliveries one pass asks for at most.
	DefaultMaxRedeliveries = 100
	// deliveryPageSize is GitHub's largest page of the delivery log.
	deliveryPageSize = 100
	// maxDeliveryPages bounds the pages one pass reads (10,000 attempts, newest first).
	maxDeliveryPages = 100
)

// Delivery is one attempt GitHub made to deliver an event to the App's webhook, as the App's
// delivery log lists it.
type Delivery struct {
	// ID is the attempt's id: what a redelivery is asked for by. GUID is the event's, the
	// X-GitHub-Delivery header of every attempt to deliver it (a redelivery keeps it).
	ID   int64
	GUID string
	// Event and Action name the event ("push"; "opened", "" when it has none).
	Event, Action string
	// InstallationID and RepositoryID are the event's (0 when it has none).
	InstallationID, RepositoryID int64
	// DeliveredAt is when GitHub made the attempt.
	DeliveredAt time.Time
	// StatusCode is the answer's status (0 when there was none); Status GitHub's words for
	// the outcome, "OK" for a success.
	StatusCode int
	Status     string
	// Redelivery is true for an attempt made because someone asked for it.
	Redelivery bool
}

// OK reports whether the attempt succeeded: GitHub says "OK" of a 2xx answer; "The data for a
// failed delivery will have a status value that is not OK."
func (d Delivery) OK() bool {
	return d.StatusCode >= 200 && d.StatusCode <= 299 && strings.EqualFold(d.Status, "OK")
}

// RedeliveryQuery says which of the delivery log's failed deliveries to ask GitHub to redeliver.
type RedeliveryQuery struct {
	// Since leaves alone the attempts made before it (an earlier pass saw them); zero: as far
	// back as GitHub keeps them.
	Since time.Time
	// Now is the time of the pass (zero: the App's clock, in RedeliverFailed).
	Now time.Time
	// Retention is how long GitHub keeps deliveries (zero: App.DeliveryRetention, in
	// RedeliverFailed): an attempt older than Now-Retention can no longer be redelivered.
	Retention time.Duration
	// Handled reports whether the service already handled the event of a GUID (a delivery it
	// acknowledged while GitHub recorded a failure, one it handled through another replica,
	// one it asked to redeliver whose new attempt is not in the log yet); nil: none.
	Handled func(guid string) bool
	// Max bounds how many deliveries one pass redelivers (0: DefaultMaxRedeliveries).
	Max int
}

// Redeliveries picks, from attempts of the delivery log, the events to redeliver: one per GUID
// (an event delivered twice has an attempt per delivery), whose latest attempt failed (so no
// later one succeeded), made within the window (since q.Since, and not older than the
// retention), and not handled; the latest failed attempt of each, oldest event first (the
// closest to falling out of GitHub's log), at most q.Max. It is a function of its arguments
// only.
func Redeliveries(attempts []Delivery, q RedeliveryQuery) []Delivery {
	limit := q.Max
	if limit <= 0 {
		limit = DefaultMaxRedeliveries
	}
	from := q.Since
	if q.Retention > 0 && !q.Now.IsZero() {
		if oldest := q.Now.Add(-q.Retention); oldest.After(from) {
			from = oldest
		}
	}
	latest := map[string]Delivery{}
	for _, d := range attempts {
		if d.GUID == "" {
			continue
		}
		if l, ok := latest[d.GUID]; !ok || later(d, l) {
			latest[d.GUID] = d
		}
	}
	var out []Delivery
	for guid, d := range latest {
		if d.OK() || d.DeliveredAt.Before(from) || q.Handled != nil && q.Handled(guid) {
			continue
		}
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Delivery) int {
		if c := a.DeliveredAt.Compare(b.DeliveredAt); c != 0 {
			return c
		}
		return strings.Compare(a.GUID, b.GUID)
	})
	return out[:min(len(out), limit)]
}

// later reports whether attempt a was made after b (the log's ids grow with time: they break a
// tie of the same second).
func later(a, b Delivery) bool {
	if c := a.DeliveredAt.Compare(b.DeliveredAt); c != 0 {
		return c > 0
	}
	return a.ID > b.ID
}

// DeliveryRetention is how long GitHub keeps this App's deliveries: DeliveryRetentionEnterprise
// on GitHub Enterprise Server (a REST root ending in /api/v3), else DeliveryRetentionGitHub.
func (a *App) DeliveryRetention() time.Duration {
	if strings.HasSuffix(strings.TrimSuffix(a.baseURL, "/"), "/api/v3") {
		return DeliveryRetentionEnterprise
	}
	return DeliveryRetentionGitHub
}

// Deliveries reads the App's delivery log, newest first, 100 attempts a page, following the
// cursor until an attempt older than since (zero: the whole log) or the end, at most 100 pages;
// complete is false when that bound stopped it. It authenticates as the App (its JWT), as
// GitHub requires: an installation token may not read it.
//
// GitHub API docs: https://docs.github.com/rest/apps/webhooks#list-deliveries-for-an-app-webhook
func (a *App) Deliveries(ctx context.Context, since time.Time) (ds []Delivery, complete bool, err error) {
	opts := &gh.ListCursorOptions{PerPage: deliveryPageSize}
	for range maxDeliveryPages {
		page, resp, err := a.api.Apps.ListHookDeliveries(ctx, opts)
		if err != nil {
			return ds, false, Wrap(err, "listing the webhook deliveries of GitHub App", strconv.FormatInt(a.id, 10))
		}
		for _, d := range page {
			if d.GetDeliveredAt().Before(since) {
				return ds, true, nil
			}
			ds = append(ds, fromHookDelivery(d))
		}
		if resp.Cursor == "" || len(page) == 0 {
			return ds, true, nil
		}
		opts.Cursor = resp.Cursor
	}
	return ds, false, nil
}

func fromHookDelivery(d *gh.HookDelivery) Delivery {
	return Delivery{
		ID: d.GetID(), GUID: d.GetGUID(), Event: d.GetEvent(), Action: d.GetAction(),
		InstallationID: d.GetInstallationID(), RepositoryID: d.GetRepositoryID(),
		DeliveredAt: d.GetDeliveredAt().Time, StatusCode: d.GetStatusCode(), Status: d.GetStatus(),
		Redelivery: d.GetRedelivery(),
	}
}

// ErrDeliveryGone is returned (wrapped) by Redeliver for an attempt GitHub no longer keeps.
var ErrDeliveryGone = errors.New("the delivery is no longer in GitHub's delivery log")

// Redeliver asks GitHub to deliver the event of attempt id again (GitHub answers 202 and
// delivers it as a new attempt, with the same GUID and payload). An attempt GitHub no longer
// keeps is ErrDeliveryGone.
//
// GitHub API docs: https://docs.github.com/rest/apps/webhooks#redeliver-a-delivery-for-an-app-webhook
func (a *App) Redeliver(ctx context.Context, id int64) error {
	_, _, err := a.api.Apps.RedeliverHookDelivery(ctx, id)
	var accepted *gh.AcceptedError
	switch {
	case err == nil, errors.As(err, &accepted):
		return nil
	case IsNotFound(err):
		return fmt.Errorf("redelivering webhook delivery %d of GitHub App %d: %w", id, a.id, ErrDeliveryGone)
	}
	return Wrap(err, fmt.Sprintf("redelivering webhook delivery %d of GitHub App", id), strconv.FormatInt(a.id, 10))
}

// RedeliveryPass is what one RedeliverFailed did.
type RedeliveryPass struct {
	// Listed is how many attempts of the log it read; Complete is false when it stopped at its
	// page bound before reaching the window's start (the oldest were not seen).
	Listed   int
	Complete bool
	// Asked are the deliveries it asked GitHub to redeliver (the latest failed attempt of each
	// event); Gone those GitHub no longer kept when asked.
	Asked []Delivery
	Gone  []Delivery
}

// RedeliverFailed is one pass over the delivery log: it reads the attempts of q's window
// (Deliveries), picks the events to redeliver (Redeliveries) and asks GitHub to redeliver each,
// in that order, stopping at the first error (the pass so far is returned with it). Add the
// GUIDs it asked for to q.Handled of the next pass until their new attempts are in the log, so
// that an event is not asked for twice.
func (a *App) RedeliverFailed(ctx context.Context, q RedeliveryQuery) (RedeliveryPass, error) {
	if q.Now.IsZero() {
		q.Now = a.clock.Now()
	}
	if q.Retention == 0 {
		q.Retention = a.DeliveryRetention()
	}
	since := q.Since
	if oldest := q.Now.Add(-q.Retention); oldest.After(since) {
		since = oldest
	}
	ds, complete, err := a.Deliveries(ctx, since)
	pass := RedeliveryPass{Listed: len(ds), Complete: complete}
	if err != nil {
		return pass, err
	}
	for _, d := range Redeliveries(ds, q) {
		err := a.Redeliver(ctx, d.ID)
		switch {
		case errors.Is(err, ErrDeliveryGone):
			pass.Gone = append(pass.Gone, d)
			continue
		case err != nil:
			return pass, err
		}
		a.log.Info("asked GitHub to redeliver a failed webhook delivery", "delivery", d.GUID, "event", d.Event,
			"attempt", d.ID, "delivered_at", d.DeliveredAt, "status", d.StatusCode)
		pass.Asked = append(pass.Asked, d)
	}
	return pass, nil
}
