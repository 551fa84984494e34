package metrics

import (
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
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
	require.NoError(t, m.QueueDepth(func() int { return 3 }, func() int { return 7 }, func() int { return 1 }))
	require.Error(t, m.QueueDepth(func() int { return 3 }, func() int { return 7 }, func() int { return 1 }), "registered twice")
	m.GitHub(GitHubSource{Client: "write", Stats: func() GitHubStats {
		return GitHubStats{Reads: 10, NotModified: 4, Writes: 3, ContentWrites: 2, RateRemaining: 4990}
	}})
	m.GitHub(GitHubSource{Client: "app", Stats: func() GitHubStats { return GitHubStats{Reads: 1, RateRemaining: -1} }})

	out := scrape(t, m)
	for _, want := range []string{
		`fleetbot_webhook_deliveries_total{event="push",outcome="queued"} 2`,
		`fleetbot_queue_depth_max 7`,
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
	assert.NoError(t, m.QueueDepth(nil, nil, nil))
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	assert.Equal(t, 404, w.Code)
}

// TestBucketsAreReadableSeconds: every histogram is in seconds with buckets a person reads at a
// glance in a le="..." label: 1, 2, 2.5 or 5 times a power of ten, or a whole number of seconds
// (30, 60, 120, 300, 900) — not exponential series such as 0.016 or 0.064.
func TestBucketsAreReadableSeconds(t *testing.T) {
	m := New()
	m.Ack(time.Millisecond)
	m.JobStarted("apply", time.Second)
	m.JobDone("apply", "ok", time.Second)
	readable := func(b float64) bool {
		if b >= 1 && b == math.Trunc(b) {
			return true
		}
		e := math.Pow(10, math.Floor(math.Log10(b)))
		m := math.Round(b/e*100) / 100
		return m == 1 || m == 2 || m == 2.5 || m == 5
	}
	names := map[string]bool{}
	for _, l := range regexp.MustCompile(`(?m)^(fleetbot_\w+)_bucket\{(?:[^}]*,)?le="([^"]+)"`).FindAllStringSubmatch(scrape(t, m), -1) {
		names[l[1]] = true
		assert.True(t, strings.HasSuffix(l[1], "_seconds"), "%s: in seconds", l[1])
		if l[2] == "+Inf" {
			continue
		}
		assert.NotContains(t, l[2], "e", "%s: le=%q reads without an exponent", l[1], l[2])
		ub, err := strconv.ParseFloat(l[2], 64)
		require.NoError(t, err)
		assert.True(t, readable(ub), "%s: bucket %v", l[1], ub)
	}
	seen := len(names)
	assert.Equal(t, 3, seen, "ack, job wait and job duration")
}

// TestNoPerRepoLabels: reconciling 10,000 different repos adds no series — outcomes are counted
// per outcome only; which repo is in the logs and the status page.
func TestNoPerRepoLabels(t *testing.T) {
	m := New()
	m.Reconciled("noop")
	before := seriesCount(t, m)
	for range 10000 { // a repo name has nowhere to go: Reconciled takes only the outcome
		m.Reconciled("noop")
	}
	assert.Equal(t, before, seriesCount(t, m))
	for _, l := range regexp.MustCompile(`(?m)^fleetbot_\w+\{([^}]*)\}`).FindAllStringSubmatch(scrape(t, m), -1) {
		for _, name := range []string{"repo", "repository", "name", "cluster", "workspace", "delivery"} {
			assert.NotContains(t, l[1], name+`="`, "a per-repo (unbounded) label: %s", l[0])
		}
	}
}

func seriesCount(t *testing.T, m *Metrics) int {
	t.Helper()
	return len(regexp.MustCompile(`(?m)^fleetbot_`).FindAllString(scrape(t, m), -1))
}

// TestEventLabelCoversTheAppsEvents: every event the App subscribes to (app.yml's
// default_events, the events serve acts on) is counted under its own name, not as "other" (a
// Flux commit status on a cluster repo, the `status` event, was "other").
func TestEventLabelCoversTheAppsEvents(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "app.yml"))
	require.NoError(t, err)
	var manifest struct {
		DefaultEvents []string `json:"default_events"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &manifest))
	require.NotEmpty(t, manifest.DefaultEvents, "app.yml lists no default_events")
	for _, e := range append(manifest.DefaultEvents, "installation", "installation_repositories") {
		assert.Equal(t, e, EventLabel(e), "event %s of app.yml", e)
	}
	m := New()
	m.Delivery("status", OutcomeIgnored)
	assert.Contains(t, scrape(t, m), `fleetbot_webhook_deliveries_total{event="status",outcome="ignored"} 1`)
}
