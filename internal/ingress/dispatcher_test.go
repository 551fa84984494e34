package ingress

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

const testSecret = "topsecret"

type post struct {
	event, delivery, body, signature string
}

func (p post) do(t *testing.T, h http.Handler) (int, string) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(p.body))
	if p.event != "" {
		req.Header.Set("X-GitHub-Event", p.event)
	}
	req.Header.Set("X-GitHub-Delivery", p.delivery)
	sig := p.signature
	if sig == "" {
		sig = sign(testSecret, p.body)
	} else if sig == "-" {
		sig = ""
	}
	req.Header.Set(SignatureHeader, sig)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	var out struct{ Outcome string }
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return w.Code, out.Outcome
}

func newTestDispatcher(t *testing.T, q *webhook.Queue, maxBody int64) *Dispatcher {
	t.Helper()
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), MaxBody: maxBody, DedupeSize: 3, Metrics: metrics.New()},
		Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q})...)
	require.NoError(t, err)
	return d
}

func pushBody(repo, ref, sender string) string {
	return `{"ref":"` + ref + `","after":"` + strings.Repeat("a", 40) + `","repository":{"full_name":"` + repo +
		`","default_branch":"main"},"sender":{"login":"` + sender + `"}}`
}

func TestDispatcherRefusesBeforeParsing(t *testing.T) {
	t.Parallel()
	q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
	d := newTestDispatcher(t, q, 1024)
	body := pushBody("acme/control", "refs/heads/main", "alice")

	code, outcome := post{event: "push", delivery: "1", body: body, signature: "-"}.do(t, d)
	assert.Equal(t, http.StatusUnauthorized, code, "missing signature")
	assert.Equal(t, metrics.OutcomeBadSignature, outcome)
	code, _ = post{event: "push", delivery: "2", body: body, signature: sign("wrong", body)}.do(t, d)
	assert.Equal(t, http.StatusUnauthorized, code, "wrong secret")
	code, _ = post{event: "push", delivery: "3", body: "{not json", signature: sign("wrong", "{not json")}.do(t, d)
	assert.Equal(t, http.StatusUnauthorized, code, "the signature is checked before the JSON")
	code, outcome = post{event: "push", delivery: "4", body: body + strings.Repeat(" ", 1024)}.do(t, d)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Equal(t, metrics.OutcomeTooLarge, outcome)
	assert.Zero(t, q.Len(), "nothing queued")

	code, _ = post{event: "push", delivery: "5", body: "{not json"}.do(t, d)
	assert.Equal(t, http.StatusBadRequest, code, "signed garbage")
	code, _ = post{delivery: "6", body: body}.do(t, d)
	assert.Equal(t, http.StatusBadRequest, code, "no event header")
}

func TestDispatcherRoutesDedupesAndAccepts(t *testing.T) {
	t.Parallel()
	q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
	d := newTestDispatcher(t, q, 0)
	body := pushBody("acme/control", "refs/heads/main", "alice")

	code, outcome := post{event: "push", delivery: "d1", body: body}.do(t, d)
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, metrics.OutcomeQueued, outcome)
	code, outcome = post{event: "push", delivery: "d1", body: body}.do(t, d)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, metrics.OutcomeDuplicate, outcome)
	_, outcome = post{event: "push", delivery: "d2", body: body}.do(t, d)
	assert.Equal(t, metrics.OutcomeCoalesced, outcome)
	code, outcome = post{event: "star", delivery: "d3", body: `{}`}.do(t, d)
	assert.Equal(t, http.StatusAccepted, code, "events nobody handles are accepted")
	assert.Equal(t, metrics.OutcomeUnhandled, outcome)
	code, _ = post{event: "ping", delivery: "d4", body: `{"zen":"hi"}`}.do(t, d)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, 1, q.Len())
}

func TestDispatcherQueueFullIs503AndRedeliverable(t *testing.T) {
	t.Parallel()
	q := webhook.NewQueue(jobqueue.Config{Capacity: 1})
	d := newTestDispatcher(t, q, 0)
	_, _ = post{event: "installation", delivery: "a", body: `{"action":"created","installation":{"account":{"login":"acme"}}}`}.do(t, d)
	drift := pushBody("acme/cluster-a", "refs/heads/main", "alice")
	code, outcome := post{event: "push", delivery: "b", body: drift}.do(t, d)
	assert.Equal(t, http.StatusAccepted, code, "a drift behind a waiting full apply is covered by it")
	assert.Equal(t, metrics.OutcomeCoalesced, outcome)

	j := next(t, q) // the apply runs; drifts now queue on their own
	code, outcome = post{event: "push", delivery: "c", body: drift}.do(t, d)
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, metrics.OutcomeQueued, outcome)
	code, outcome = post{event: "push", delivery: "e", body: pushBody("acme/cluster-b", "refs/heads/main", "alice")}.do(t, d)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, metrics.OutcomeQueueFull, outcome)
	q.Done(j.Key())
	_ = next(t, q)
	code, _ = post{event: "push", delivery: "e", body: pushBody("acme/cluster-b", "refs/heads/main", "alice")}.do(t, d)
	assert.Equal(t, http.StatusAccepted, code, "a refused delivery is not remembered as seen")
}

func TestHandlersDecide(t *testing.T) {
	t.Parallel()
	sha := strings.Repeat("b", 40)
	for _, tc := range []struct {
		name, event, body string
		want              *webhook.Job // nil: ignored
	}{
		{"control push", "push", pushBody("acme/control", "refs/heads/main", "renovate[bot]"),
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", SHA: strings.Repeat("a", 40), Reason: "push", Incremental: true}},
		{"control push by fleetbot", "push", pushBody("acme/control", "refs/heads/main", "fleetbot[bot]"), nil},
		{"control push to a branch", "push", pushBody("acme/control", "refs/heads/feature", "alice"), nil},
		{"target push", "push", pushBody("acme/cluster-a", "refs/heads/main", "alice"),
			&webhook.Job{Kind: webhook.KindDrift, Repo: "acme/cluster-a", Reason: "push"}},
		{"target push by fleetbot", "push", pushBody("acme/cluster-a", "refs/heads/main", "fleetbot[bot]"), nil},
		{"control PR opened", "pull_request", `{"action":"opened","number":4,"pull_request":{"head":{"sha":"` + sha + `"}},"repository":{"full_name":"acme/control"},"sender":{"login":"alice"}}`,
			&webhook.Job{Kind: webhook.KindCheck, Repo: "acme/control", PR: 4, SHA: sha, Reason: "pull_request.opened"}},
		{"control PR closed", "pull_request", `{"action":"closed","number":4,"repository":{"full_name":"acme/control"},"sender":{"login":"alice"}}`, nil},
		{"target PR closed", "pull_request", `{"action":"closed","number":2,"repository":{"full_name":"acme/cluster-a"},"sender":{"login":"alice"}}`,
			&webhook.Job{Kind: webhook.KindDrift, Repo: "acme/cluster-a", Reason: "pull_request.closed"}},
		{"target PR closed by fleetbot", "pull_request", `{"action":"closed","number":2,"repository":{"full_name":"acme/cluster-a"},"sender":{"login":"Fleetbot[bot]"}}`, nil},
		{"target PR opened", "pull_request", `{"action":"opened","number":2,"repository":{"full_name":"acme/cluster-a"},"sender":{"login":"alice"}}`, nil},
		{"rerun", "check_run", `{"action":"rerequested","check_run":{"head_sha":"` + sha + `","app":{"id":1},"pull_requests":[{"number":9}]},"repository":{"full_name":"acme/control"},"sender":{"login":"alice"}}`,
			&webhook.Job{Kind: webhook.KindCheck, Repo: "acme/control", PR: 9, SHA: sha, Reason: "check_run.rerequested"}},
		{"rerun of another app", "check_run", `{"action":"rerequested","check_run":{"head_sha":"` + sha + `","app":{"id":2}},"repository":{"full_name":"acme/control"},"sender":{"login":"alice"}}`, nil},
		{"installed", "installation", `{"action":"created","installation":{"account":{"login":"acme"}}}`,
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: "installation.created"}},
		{"repos added", "installation_repositories", `{"action":"added","installation":{"account":{"login":"acme"}}}`,
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: "installation_repositories.added"}},
		{"uninstalled", "installation", `{"action":"deleted","installation":{"account":{"login":"acme"}}}`, nil},
		{"protection", "branch_protection_rule", `{"action":"deleted","repository":{"full_name":"acme/cluster-a"},"sender":{"login":"alice"}}`,
			&webhook.Job{Kind: webhook.KindDrift, Repo: "acme/cluster-a", Reason: "branch_protection_rule.deleted", Access: true}},
		{"collaborator by another bot", "member", `{"action":"added","repository":{"full_name":"acme/workspace-x"},"sender":{"login":"terraform[bot]"}}`,
			&webhook.Job{Kind: webhook.KindDrift, Repo: "acme/workspace-x", Reason: "member.added", Access: true}},
		{"team on a repo", "team", `{"action":"added_to_repository","repository":{"full_name":"acme/cluster-a"},"sender":{"login":"alice"}}`,
			&webhook.Job{Kind: webhook.KindDrift, Repo: "acme/cluster-a", Reason: "team.added_to_repository", Access: true}},
		{"team deleted", "team", `{"action":"deleted","sender":{"login":"alice"}}`,
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: "team.deleted"}},
		{"team created", "team", `{"action":"created","sender":{"login":"alice"}}`, nil},
		{"repository archived", "repository", `{"action":"archived","repository":{"full_name":"acme/cluster-a"},"sender":{"login":"alice"}}`,
			&webhook.Job{Kind: webhook.KindDrift, Repo: "acme/cluster-a", Reason: "repository.archived", Access: true}},
		{"control repo edited", "repository", `{"action":"edited","repository":{"full_name":"acme/control"},"sender":{"login":"alice"}}`, nil},
	} {
		q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
		d := newTestDispatcher(t, q, 0)
		code, outcome := post{event: tc.event, delivery: "x", body: tc.body}.do(t, d)
		require.Equal(t, http.StatusAccepted, code, tc.name)
		if tc.want == nil {
			assert.Equal(t, metrics.OutcomeIgnored, outcome, tc.name)
			assert.Zero(t, q.Len(), tc.name)
			continue
		}
		assert.Equal(t, metrics.OutcomeQueued, outcome, tc.name)
		got := q.Drain()
		require.Len(t, got, 1, tc.name)
		assert.Equal(t, "x", got[0].Delivery, tc.name)
		assert.False(t, got[0].Queued.IsZero(), tc.name)
		got[0].Delivery, got[0].Queued = "", time.Time{}
		assert.Equal(t, *tc.want, got[0], tc.name)
	}
}

// BenchmarkDispatcherPush is the ack path of one signed push to a target repo (a drift job,
// coalesced after the first) with serve's default logger: text, level warn.
func BenchmarkDispatcherPush(b *testing.B) {
	q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
	log := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Metrics: metrics.New(), Logger: log},
		Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q, Logger: log})...)
	require.NoError(b, err)
	body := pushBody("acme/cluster-a", "refs/heads/main", "alice")
	sig := sign(testSecret, body)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		req := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader(body))
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", strconv.Itoa(i))
		req.Header.Set(SignatureHeader, sig)
		w := httptest.NewRecorder()
		d.ServeHTTP(w, req)
		if w.Code != http.StatusAccepted {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
