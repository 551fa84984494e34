package webhook

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/fleetbot-io/fleetbot/internal/metrics"
)

// FuzzWebhookPayload posts a delivery with any event header, delivery id and body, signed or
// not, through the dispatcher and its handlers. Invariants: no panic; the answer is one of the
// documented statuses and never 500 (a payload a handler cannot decode is 400); an unsigned
// delivery is 401 and queues nothing; an event nobody handles queues nothing; the log line is
// bounded whatever the headers and body; the event label of the metrics is one of a fixed
// set.
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
		q := NewQueue(100)
		d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), MaxBody: 1 << 20, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: m},
			Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q})...)
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
