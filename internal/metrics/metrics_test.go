package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	b, err := io.ReadAll(w.Body)
	require.NoError(t, err)
	return string(b)
}

func TestSeries(t *testing.T) {
	m := New()
	m.Delivery("push", OutcomeQueued)
	m.Delivery("push", OutcomeQueued)
	m.Delivery("", OutcomeBadSignature)
	m.Ack(time.Millisecond)
	m.JobStarted("apply", time.Second)
	m.JobDone("apply", "ok", 2*time.Second)
	m.Reconciled("open")
	require.NoError(t, m.QueueDepth(func() int { return 3 }, func() int { return 1 }))
	require.Error(t, m.QueueDepth(func() int { return 3 }, func() int { return 1 }), "registered twice")
	m.GitHub(GitHubSource{Client: "write", Stats: func() GitHubStats {
		return GitHubStats{Reads: 10, NotModified: 4, Writes: 3, ContentWrites: 2, RateRemaining: 4990}
	}})
	m.GitHub(GitHubSource{Client: "app", Stats: func() GitHubStats { return GitHubStats{Reads: 1, RateRemaining: -1} }})

	out := scrape(t, m)
	for _, want := range []string{
		`fleetbot_webhook_deliveries_total{event="push",outcome="queued"} 2`,
		`fleetbot_webhook_deliveries_total{event="none",outcome="bad_signature"} 1`,
		`fleetbot_webhook_ack_seconds_count 1`,
		`fleetbot_job_wait_seconds_count{kind="apply"} 1`,
		`fleetbot_job_duration_seconds_count{kind="apply",outcome="ok"} 1`,
		`fleetbot_reconcile_outcomes_total{outcome="open"} 1`,
		`fleetbot_queue_depth 3`,
		`fleetbot_jobs_in_flight 1`,
		`fleetbot_github_requests_total{class="read",client="write"} 10`,
		`fleetbot_github_requests_total{class="content",client="write"} 2`,
		`fleetbot_github_requests_total{class="not_modified",client="write"} 4`,
		`fleetbot_github_rate_limit_remaining{client="write"} 4990`,
		`go_goroutines`,
	} {
		assert.Contains(t, out, want)
	}
	assert.NotContains(t, out, `fleetbot_github_rate_limit_remaining{client="app"}`, "unknown remaining is not exported")
}

// TestAttackEventHeaderCardinality: unauthenticated requests with made-up X-GitHub-Event
// values (526 MB in 6 s before this) leave the event label set fixed.
func TestAttackEventHeaderCardinality(t *testing.T) {
	m := New()
	for i := range 5000 {
		m.Delivery(fmt.Sprintf("evil-%d-%s", i, strings.Repeat("x", 200)), OutcomeBadSignature)
	}
	m.Delivery("push", OutcomeBadSignature)
	out := scrape(t, m)
	assert.Contains(t, out, `fleetbot_webhook_deliveries_total{event="other",outcome="bad_signature"} 5000`)
	assert.Contains(t, out, `fleetbot_webhook_deliveries_total{event="push",outcome="bad_signature"} 1`)
	assert.NotContains(t, out, "evil-")
}

func TestNilMetricsRecordNothing(t *testing.T) {
	var m *Metrics
	m.Delivery("push", OutcomeQueued)
	m.Ack(time.Second)
	m.JobStarted("apply", 0)
	m.JobDone("apply", "ok", 0)
	m.Reconciled("noop")
	m.GitHub(GitHubSource{})
	assert.NoError(t, m.QueueDepth(nil, nil))
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	assert.Equal(t, 404, w.Code)
}
