package serve_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/browsertest"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/serve"
)

// metric reads one unlabelled gauge or counter of serve's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	_, body := get(t, base+"/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	v, err := strconv.ParseFloat(m[1], 64)
	require.NoError(t, err)
	return v
}

// rowState is the state of repo's row on /status ("" when it has none).
func rowState(t *testing.T, base, repo string) string {
	t.Helper()
	_, page := get(t, base+"/status")
	m := regexp.MustCompile(`<tr data-repo="` + regexp.QuoteMeta(repo) + `" data-state="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

// fleetbotRequests counts the requests fleetbot made of the fake GitHub (the test's own, as
// DefaultUser, aside).
func fleetbotRequests(g *githubtest.Server) int {
	n := 0
	for _, r := range g.Requests() {
		if r.Principal != githubtest.DefaultUser {
			n++
		}
	}
	return n
}

// TestLiveEventsUpdateOneRow: serve without rollout waves, the fake GitHub delivering its
// webhooks, signed. Once a cluster repo's pull request is merged (its drift reconcile sees the
// new head), Flux's failure status on that head turns its /status row unhealthy — the failing
// Kustomization, Flux's message and the status's link — and a human's commit on another repo's
// bot branch turns that row blocked (human edit), as soon as the deliveries are answered: no
// job runs and fleetbot makes no GitHub request. The page, loaded in headless Chromium at
// 1,400 px and 420 px, shows both and overflows at neither.
func TestLiveEventsUpdateOneRow(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	g := fakeGitHub(t, githubtest.WithWebhook(base+"/webhook", secret))
	ready := make(chan struct{})
	finished := newJobs()
	srv, err := serve.New(serve.Config{
		Listener: ln, Control: "acme/control", Secret: []byte(secret),
		App: app.Config{Forge: app.ForgeGitHub, GitURL: g.URL, CacheDir: t.TempDir(), Version: "test", Concurrency: 4,
			GitHub: ghforge.Config{APIURL: g.APIURL(), AppID: g.AppID(), PrivateKey: g.AppPrivateKeyPEM(),
				Budget: ghforge.BudgetConfig{PerMinute: 100000, PerHour: 1000000, MinInterval: -1}}},
		Resync: time.Hour, Workers: 2, QueueSize: 100, MaxBody: ingress.DefaultMaxBody, Grace: 5 * time.Second,
		CheckName: checkrun.DefaultCheckName, Status: serve.StatusPages{Enabled: true, Insecure: true},
		OnReady: func() { close(ready) }, Logger: slog.New(finished),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		assert.NoError(t, <-done, "Run returned")
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run stopped before ready: %v", err)
	}
	idle := func() bool {
		return metric(t, base, "fleetbot_queue_depth") == 0 && metric(t, base, "fleetbot_jobs_in_flight") == 0
	}
	finished.waitFor(t, "the startup apply", func() bool { return finished.applies.Load() >= 1 && idle() })
	g.WaitWebhooks()
	finished.waitFor(t, "fleetbot's own events handled", idle)
	assert.Equal(t, "pr-open", rowState(t, base, "acme/cluster-prod-eu-1"))

	// A platform admin merges prod-eu-1's pull request: the delivered merge reconciles the repo.
	api := g.Client()
	_, _, err = api.PullRequests.Merge(ctx, "acme", "cluster-prod-eu-1", 1, "", &gh.PullRequestOptions{MergeMethod: "merge"})
	require.NoError(t, err)
	g.WaitWebhooks()
	finished.waitFor(t, "the merge reconciled", func() bool { return idle() && rowState(t, base, "acme/cluster-prod-eu-1") == "in-sync" })

	before := fleetbotRequests(g)
	jobsBefore := metric(t, base, "fleetbot_jobs_in_flight")
	// Flux fails on the merged head; a human commits on edge-1's bot branch.
	head := g.Branch("acme", "cluster-prod-eu-1", "main")
	_, _, err = api.Repositories.CreateStatus(ctx, "acme", "cluster-prod-eu-1", head, &gh.RepoStatus{State: gh.String("failure"),
		Context:     gh.String("kustomization/platform-metallb/0c1d2e3f"),
		Description: gh.String(`IPAddressPool/metallb-system/pool dry-run failed: no matches for kind "IPAddressPool"`),
		TargetURL:   gh.String("https://grafana.example.com/d/flux?var-name=platform-metallb")})
	require.NoError(t, err)
	g.Commit("acme", "cluster-edge-1", "fleetbot/sync", "hand edit", map[string]string{"apps/mine.yaml": "kind: ConfigMap\n"})
	g.WaitWebhooks() // answered: the handlers ran

	assert.Equal(t, "unhealthy", rowState(t, base, "acme/cluster-prod-eu-1"), "Flux's failure shows at once")
	assert.Equal(t, "blocked", rowState(t, base, "acme/cluster-edge-1"), "the human's commit shows at once")
	assert.Equal(t, before, fleetbotRequests(g), "no GitHub request for either")
	assert.Zero(t, metric(t, base, "fleetbot_queue_depth"), "no job queued")
	assert.Equal(t, jobsBefore, metric(t, base, "fleetbot_jobs_in_flight"))
	_, metrics := get(t, base+"/metrics")
	for _, line := range []string{`fleetbot_webhook_deliveries_total{event="status",outcome="observed"} 1`,
		`fleetbot_webhook_deliveries_total{event="push",outcome="observed"} 1`} {
		assert.True(t, strings.Contains(metrics, line), "/metrics has %s", line)
	}

	code, page := get(t, base+"/status")
	require.Equal(t, http.StatusOK, code)
	dom := browsertest.Fits(t, browsertest.Chromium(t), "status-live", page)
	assert.Regexp(t, `<tbody>\s*<tr data-repo="acme/cluster-prod-eu-1" data-state="unhealthy"`, dom, "the health failure first")
	assert.Contains(t, dom, `Flux failure: Kustomization/platform-metallb: IPAddressPool/metallb-system/pool dry-run failed: no matches for kind "IPAddressPool"`)
	assert.Contains(t, dom, `<a class="flux-link" href="https://grafana.example.com/d/flux?var-name=platform-metallb">Flux ↗</a>`)
	assert.Regexp(t, `data-repo="acme/cluster-edge-1" data-state="blocked"[\s\S]*?<td data-label="waiting">human edit</td>`, dom)
	_, detail := get(t, base+"/status/repo/cluster-edge-1")
	assert.Contains(t, detail, "was not made by fleetbot (pushed by "+githubtest.DefaultUser+")")
	assert.True(t, strings.Contains(page, "1 unhealthy") && strings.Contains(page, "1 blocked"), "the summary counts them")
}
