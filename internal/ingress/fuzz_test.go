package ingress

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// FuzzWebhookPayload posts a delivery with any event header, delivery id and body, signed or
// not, through the dispatcher and its handlers. Invariants: no panic; the answer is one of the
// documented statuses and never 500 (a payload a handler cannot decode is 400); an unsigned
// delivery is 401 and queues nothing; an event nobody handles queues nothing; the log line is
// bounded whatever the headers and body; the event label of the metrics is one of a fixed
// set; a tenant check job (tenant checks on, as serve's default) names a full commit SHA and a
// repo other than the control repo.
func FuzzWebhookPayload(f *testing.F) {
	for _, s := range []struct {
		event, delivery, body string
		signed                bool
	}{
		{"push", "d1", pushBody("acme/control", "refs/heads/main", "alice"), true},
		{"push", "d2", pushBody("acme/cluster-a", "refs/heads/main", "alice"), true},
		{"pull_request", "d3", `{"action":"opened","number":1,"pull_request":{"number":1,"head":{"sha":"` + "abc" + `"}},"repository":{"full_name":"acme/control"}}`, true},
		{"check_run", "d4", `{"action":"rerequested","check_run":{"head_sha":"abc","pull_requests":[{"number":1}]},"repository":{"full_name":"acme/control"}}`, true},
		{"installation", "d5", `{"action":"created","installation":{"id":1}}`, true},
		{"branch_protection_rule", "d6", `{"action":"edited","repository":{"full_name":"acme/cluster-a"}}`, true},
		{"push", "d7", `{"ref":`, true},
		{"push", "d8", `[]`, true},
		{"ping", "d9", `{}`, true},
		{"evil\nevent", "id\n" + "x", "{}", false},
		{"pull_request", "d10", `{"action":"synchronize","number":2,"pull_request":{"head":{"sha":"` + strings.Repeat("a", 40) + `"}},"repository":{"full_name":"acme/workspace-x"},"sender":{"login":"fleetbot[bot]"}}`, true},
		{"check_run", "d11", `{"action":"rerequested","check_run":{"head_sha":"` + strings.Repeat("b", 40) + `","app":{"id":1}},"repository":{"full_name":"acme/cluster-a"}}`, true},
	} {
		f.Add(s.event, s.delivery, []byte(s.body), s.signed)
	}
	documented := map[int]bool{http.StatusOK: true, http.StatusAccepted: true, http.StatusBadRequest: true,
		http.StatusUnauthorized: true, http.StatusRequestEntityTooLarge: true, http.StatusServiceUnavailable: true}
	events := map[string]bool{"none": true, "other": true}
	for _, e := range []string{"push", "pull_request", "check_run", "check_suite", "installation", "installation_repositories",
		"repository", "member", "membership", "team", "team_add", "branch_protection_rule", "ping"} {
		events[e] = true
	}

	f.Fuzz(func(t *testing.T, event, delivery string, body []byte, signed bool) {
		var logs bytes.Buffer
		m := metrics.New()
		q := webhook.NewQueue(jobqueue.Config{Capacity: 100})
		d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), MaxBody: 1 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: m},
			Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q, TenantChecks: true})...)
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/webhook", bytes.NewReader(body))
		req.Header["X-Github-Event"] = []string{event}
		req.Header["X-Github-Delivery"] = []string{delivery}
		if signed {
			req.Header.Set(SignatureHeader, sign(testSecret, string(body)))
		}
		w := httptest.NewRecorder()
		d.ServeHTTP(w, req)

		if !documented[w.Code] {
			t.Fatalf("status %d for event %q: %s", w.Code, event, w.Body)
		}
		if !signed && (w.Code != http.StatusUnauthorized || q.Len() != 0) {
			t.Fatalf("an unsigned delivery got %d and queued %d jobs", w.Code, q.Len())
		}
		if _, handled := d.handlers[event]; !handled && q.Len() != 0 {
			t.Fatalf("event %q nobody handles queued %d jobs", event, q.Len())
		}
		for _, j := range q.Drain() {
			if j.Kind == webhook.KindTenant && (!isSHA(j.SHA) || strings.EqualFold(j.Repo, "acme/control")) {
				t.Fatalf("tenant job on %q at %q", j.Repo, j.SHA)
			}
		}
		if logs.Len() > 2048 {
			t.Fatalf("log of one delivery is %d bytes:\n%.300s", logs.Len(), logs.String())
		}
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, fam := range families {
			for _, mt := range fam.GetMetric() {
				for _, l := range mt.GetLabel() {
					if l.GetName() == "event" && !events[l.GetValue()] {
						t.Fatalf("event label %q is not in the fixed set", l.GetValue())
					}
				}
			}
		}
	})
}

// FuzzFrontBatch posts any body to the job process's batch endpoint (serve --job-process),
// signed with the batch key or not. Invariants: no panic; without the batch signature the
// answer is 401 and nothing is queued or counted; a signed batch is answered 200 with one
// answer per delivery, or 400, never 500; a delivery whose own GitHub signature is wrong is
// 401 and queues nothing; the metrics' labels stay in their fixed sets.
func FuzzFrontBatch(f *testing.F) {
	good := driftBody("acme/cluster-a", 1)
	for _, s := range []struct {
		batch  string
		signed bool
	}{
		{fmt.Sprintf(`{"deliveries":[{"id":"a","event":"pull_request","signature":%q,"body":%q,"ack_nanos":1000}],"buffered":3}`, sign(testSecret, good), base64(good)), true},
		{fmt.Sprintf(`{"deliveries":[{"id":"a","event":"pull_request","signature":%q,"body":%q}]}`, sign("wrong", good), base64(good)), true},
		{`{"refused":[{"event":"push","outcome":"bad_signature","ack_nanos":-5},{"event":"evil\nlabel","outcome":"made-up","ack_nanos":9223372036854775807}]}`, true},
		{`{"deliveries":[{"body":"!!"}]}`, true},
		{`{"deliveries":null,"buffered":-1}`, true},
		{good, false},
	} {
		f.Add([]byte(s.batch), s.signed)
	}
	key := BatchKey([]byte(testSecret))
	outcomes := map[string]bool{"other": true, "error": true, metrics.OutcomeQueued: true, metrics.OutcomeCoalesced: true, metrics.OutcomeIgnored: true,
		metrics.OutcomeUnhandled: true, metrics.OutcomeDuplicate: true, metrics.OutcomeBadSignature: true, metrics.OutcomeTooLarge: true,
		metrics.OutcomeBusy: true, metrics.OutcomeBadRequest: true, metrics.OutcomeQueueFull: true, metrics.OutcomeNotReady: true}
	f.Fuzz(func(t *testing.T, body []byte, signed bool) {
		m := metrics.New()
		q := webhook.NewQueue(jobqueue.Config{Capacity: 100})
		d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), MaxBody: 1 << 20, Metrics: m},
			Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q})...)
		if err != nil {
			t.Fatal(err)
		}
		srv := NewServer(m)
		srv.AcceptBatches()
		srv.SetDispatcher(d)
		req := httptest.NewRequest(http.MethodPost, BatchPath, bytes.NewReader(body))
		if signed {
			req.Header.Set(BatchSignatureHeader, signBatch(key, body))
		}
		w := httptest.NewRecorder()
		srv.Handler().ServeHTTP(w, req)
		fams, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		counted := 0.0
		for _, fam := range fams {
			if fam.GetName() != "fleetbot_webhook_deliveries_total" {
				continue
			}
			for _, mm := range fam.GetMetric() {
				counted += mm.GetCounter().GetValue()
				for _, l := range mm.GetLabel() {
					if l.GetName() == "outcome" && !outcomes[l.GetValue()] {
						t.Fatalf("outcome label %q", l.GetValue())
					}
					if l.GetName() == "event" && l.GetValue() != metrics.EventLabel(l.GetValue()) {
						t.Fatalf("event label %q", l.GetValue())
					}
				}
			}
		}
		if !signed {
			if w.Code != http.StatusUnauthorized || q.Len() != 0 || counted != 0 {
				t.Fatalf("unsigned batch: %d, %d queued, %v counted", w.Code, q.Len(), counted)
			}
			return
		}
		switch w.Code {
		case http.StatusBadRequest:
			if q.Len() != 0 {
				t.Fatalf("a refused batch queued %d", q.Len())
			}
			return
		case http.StatusOK:
		default:
			t.Fatalf("signed batch: status %d", w.Code)
		}
		var b Batch
		if err := json.Unmarshal(body, &b); err != nil {
			t.Fatalf("accepted a batch that does not decode: %v", err)
		}
		var answers []BatchAnswer
		if err := json.Unmarshal(w.Body.Bytes(), &answers); err != nil || len(answers) != len(b.Deliveries) {
			t.Fatalf("answers %s for %d deliveries", w.Body.Bytes(), len(b.Deliveries))
		}
		for i, a := range answers {
			if a.Status == http.StatusInternalServerError {
				t.Fatalf("delivery %d: 500", i)
			}
			if VerifySignature([]byte(testSecret), b.Deliveries[i].Body, b.Deliveries[i].Signature) != nil && a.Status != http.StatusUnauthorized {
				t.Fatalf("delivery %d with a wrong signature answered %d", i, a.Status)
			}
		}
	})
}
