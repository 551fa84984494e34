package serve_test

import (
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/browsertest"
	"github.com/fleetbot-io/fleetbot/internal/serve"
	"github.com/fleetbot-io/fleetbot/internal/status"
)

// statusToken is the bearer token of the status pages in these tests.
const statusToken = "status-token-for-tests-0123456789"

// ScreenshotDirEnv names a directory the end-to-end test writes its screenshot of /status to
// (status.png); default: the test's artifact directory (go test -artifacts -outputdir DIR keeps
// it). `make screenshot` sets it to docs/.
const ScreenshotDirEnv = "FLEETBOT_STATUS_SCREENSHOT_DIR"

// authProxy stands for the authenticating ingress in front of /status: it adds the bearer
// token to every request it forwards (a browser cannot be told to send a header).
func authProxy(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		r.Out.Header.Set("Authorization", "Bearer "+statusToken)
	}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

func getWithToken(t *testing.T, target, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, target, nil)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestServeStatusPage starts serve against the fake GitHub with a fleet in mixed states (open
// PRs, one merged with Flux healthy, one blocked by a human commit, one whose Flux fails),
// then moves the control repo on to a rollout in two waves and a management cluster
// provisioning a new cluster, loads /status in headless Chromium and checks the rendered DOM
// (rows, the SVG bar of each wave, the management repo); loading the pages costs no GitHub
// request, and without the token they answer 401.
func TestServeStatusPage(t *testing.T) {
	t.Parallel()
	bin := browsertest.Chromium(t)
	first := startServe(t, serveOptions{})
	first.waitMetric(appliedOK, 1)
	first.idle()
	code, _ := getWithToken(t, first.url+"/status", statusToken)
	assert.Equal(t, http.StatusNotFound, code, "no /status unless --status")
	first.stop()
	var body string

	// The fleet moves on while fleetbot is down: a platform admin merges prod-eu-1's PR and
	// Flux reports it healthy; staging's Flux fails; a human pushes to edge-1's bot branch.
	ctx := context.Background()
	api := first.gh.Client()
	_, _, err := api.PullRequests.Merge(ctx, "acme", "cluster-prod-eu-1", 1, "", &gh.PullRequestOptions{MergeMethod: "merge"})
	require.NoError(t, err)
	for _, st := range []struct{ repo, state, object, description, url string }{
		{"cluster-prod-eu-1", "success", "flux-system", "Applied revision: main", ""},
		{"cluster-staging-eu-1", "failure", "platform-monitoring", "DaemonSet/monitoring/node-exporter dry-run failed: " +
			"spec.template.spec.containers[0].image: Required value", "https://grafana.example.com/d/flux?var-name=platform-monitoring"},
	} {
		s := &gh.RepoStatus{State: gh.String(st.state), Context: gh.String("kustomization/" + st.object + "/0c1d2e3f"), Description: gh.String(st.description)}
		if st.url != "" {
			s.TargetURL = gh.String(st.url)
		}
		_, _, err := api.Repositories.CreateStatus(ctx, "acme", st.repo, first.gh.Branch("acme", st.repo, "main"), s)
		require.NoError(t, err)
	}
	first.gh.Commit("acme", "cluster-edge-1", "fleetbot/sync", "hand edit", map[string]string{"apps/mine.yaml": "kind: ConfigMap\n"})
	// And the control repo moves on: a rollout in waves (staging first, then prod) and a
	// management cluster "hub" provisioning a new cluster, lab-1 (issue 20).
	platform, err := os.ReadFile(filepath.Join(exampleControl, "platform.yaml"))
	require.NoError(t, err)
	first.gh.Commit("acme", "control", "main", "waves and a management cluster", map[string]string{
		"platform.yaml": string(platform) + statusE2EPlatform, "clusters/lab-1.yaml": statusE2ELab})

	e := startServe(t, serveOptions{reuse: first, status: serve.StatusPages{Enabled: true, Token: []byte(statusToken), GroupBy: mustGroup(t, "label:env")}})
	e.waitMetric(appliedOK, 1)
	e.idle()

	before := len(e.gh.Requests())
	code, body = getWithToken(t, e.url+"/status", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	assert.NotContains(t, body, "cluster-", "nothing of the fleet without the token")
	code, _ = getWithToken(t, e.url+"/status", "wrong-token-wrong-token-wrong")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, _ = getWithToken(t, e.url+"/status/repo/cluster-edge-1", "")
	assert.Equal(t, http.StatusUnauthorized, code)
	code, detail := getWithToken(t, e.url+"/status/repo/cluster-edge-1", statusToken)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, detail, "human edit")
	assert.Contains(t, detail, "not made by fleetbot")
	code, _ = getWithToken(t, e.url+"/healthz", "")
	assert.Equal(t, http.StatusOK, code, "the other routes are untouched")

	proxy := authProxy(t, e.url)
	dom := browsertest.Browse(t, bin, proxy+"/status?sort=repo", "--dump-dom")
	byState := browsertest.Browse(t, bin, proxy+"/status", "--dump-dom")
	assert.Regexp(t, `<tbody>\s*<tr data-repo="acme/cluster-staging-eu-1" data-state="unhealthy"`, byState, "the health failure first")
	assert.Contains(t, byState, "Flux failure: Kustomization/platform-monitoring: DaemonSet/monitoring/node-exporter dry-run failed")
	assert.Contains(t, byState, `<a class="flux-link" href="https://grafana.example.com/d/flux?var-name=platform-monitoring">Flux ↗</a>`)
	// The screenshot is the test's artifact: kept under -outputdir with go test -artifacts
	// (.ci/run does), or written where make screenshot asks.
	// (Screenshots, a chromium run each, only when asked: they assert nothing.)
	shotDir := os.Getenv(ScreenshotDirEnv)
	if shotDir == "" && keepsArtifacts() {
		shotDir = t.ArtifactDir()
	}
	shot := ""
	if shotDir != "" {
		shot, err = filepath.Abs(filepath.Join(shotDir, "status.png"))
		require.NoError(t, err)
		browsertest.Browse(t, bin, proxy+"/status", "--screenshot="+shot, "--window-size=1400,900", "--hide-scrollbars")
		browsertest.Browse(t, bin, proxy+"/status/repo/cluster-staging-eu-1", "--screenshot="+filepath.Join(shotDir, "status-repo.png"),
			"--window-size=1280,900", "--hide-scrollbars")
	}
	// One repo's page, as a browser renders it: its last reconcile's report.
	repoDOM := browsertest.Browse(t, bin, proxy+"/status/repo/cluster-staging-eu-1", "--dump-dom")
	assert.Contains(t, repoDOM, "<h1>acme/cluster-staging-eu-1</h1>")
	assert.Regexp(t, `<dt>Flux health</dt><dd class="h-failure">failure</dd>`, repoDOM)
	assert.Contains(t, repoDOM, "Last reconcile")
	assert.Contains(t, repoDOM, "<code>platform/monitoring/monitoring.yaml</code>", "the report's files")
	assert.Contains(t, repoDOM, "review required", "GitHub's review decision in words")
	assert.Equal(t, before, len(e.gh.Requests()), "loading the status pages made no GitHub request")

	rows := map[string]string{}
	for _, m := range regexp.MustCompile(`<tr data-repo="([^"]+)" data-state="([^"]+)"`).FindAllStringSubmatch(dom, -1) {
		rows[m[1]] = m[2]
	}
	assert.Equal(t, map[string]string{
		"acme/cluster-edge-1": "blocked", "acme/cluster-prod-eu-1": "deferred", "acme/cluster-prod-us-1": "pr-open",
		"acme/cluster-staging-eu-1": "unhealthy", "acme/workspace-payments": "pr-open", "acme/workspace-search": "pr-open",
		"acme/cluster-lab-1": "deferred", "acme/mgmt-hub": "pr-open",
	}, rows, "one row per target repo, in its state: the waves hold prod-eu-1's new change and the new lab-1 until staging is done; Flux fails staging")
	assert.Contains(t, dom, "8 repos: 1 unhealthy, 1 blocked, 2 deferred, 4 pr-open (waiting on 4 review); Flux health: 1 failure, 1 success, 6 unknown")
	assert.Regexp(t, `data-repo="acme/cluster-prod-eu-1"[\s\S]*?<td data-label="waiting">rollout</td>`, dom, "held by the rollout")
	// The rollout picture: a bar per wave, its counts in the DOM and in the SVG's accessible name.
	for _, w := range []struct{ name, counts, label string }{
		{"staging", `data-total="1" data-healthy="0" data-done="0" data-open="0" data-pending="0" data-halted="1"`,
			"wave staging: 1 cluster: 0 healthy, 0 done, 0 open, 0 pending, 1 halted"},
		{"prod", `data-total="3" data-healthy="0" data-done="0" data-open="1" data-pending="1" data-halted="1"`,
			"wave prod: 3 clusters: 0 healthy, 0 done, 1 open, 1 pending, 1 halted"},
		{"(rest)", `data-total="1" data-healthy="0" data-done="0" data-open="0" data-pending="1" data-halted="0"`,
			"wave (rest): 1 cluster: 0 healthy, 0 done, 0 open, 1 pending, 0 halted"},
	} {
		assert.Contains(t, dom, `<div class="bar wave" data-wave="`+w.name+`" `+w.counts+`>`, "wave %s", w.name)
		assert.Regexp(t, `data-wave="`+regexp.QuoteMeta(w.name)+`"[\s\S]*?<svg [^>]*role="img" aria-label="`+regexp.QuoteMeta(w.label)+`"`, dom, "wave %s", w.name)
	}
	assert.Equal(t, 3, strings.Count(dom, `<div class="bar wave"`), "staging, prod and the clusters no wave matches")
	rollout, _, _ := strings.Cut(dom, `<section class="progress" id="progress">`)
	assert.Equal(t, 5, strings.Count(rollout, `<rect class="w-`), "one segment per non-empty count: staging 1, prod 3, the rest 1")
	// The management repo, with the cluster it provisions; the cluster links back to it.
	assert.Regexp(t, `data-repo="acme/mgmt-hub"[\s\S]*?<td data-label="kind">management</td>[\s\S]*?provisions 1: lab-1`, dom)
	assert.Regexp(t, `data-repo="acme/cluster-lab-1"[\s\S]*?provisioned by <a href="/status/repo/mgmt-hub">mgmt-hub</a>`, dom)
	assert.Regexp(t, `data-repo="acme/cluster-prod-eu-1"[\s\S]*?class="h-success">success<`, dom, "Flux health of the merged repo")
	assert.Regexp(t, `data-repo="acme/cluster-staging-eu-1"[\s\S]*?class="h-failure">failure<`, dom)
	assert.Regexp(t, `<a href="`+regexp.QuoteMeta(e.gh.URL)+`/acme/cluster-prod-us-1/pull/1">#1</a>`, dom, "links to the PR")
	assert.Contains(t, dom, `href="`+e.gh.URL+`/acme/cluster-edge-1"`, "links to the repo")
	assert.Contains(t, dom, `<div class="bar" data-group="env=prod">`, "a progress bar per label value")
	assert.Contains(t, dom, `<div class="bar" data-group="env unset">`, "workspaces carry no env label")
	for _, v := range []string{"10.10.0.0/24", "10.20.0.0/24", "192.168.50.0/28", statusToken} {
		assert.NotContains(t, dom, v, "never a value or a secret")
		assert.NotContains(t, detail, v)
	}
	if shot != "" {
		info, err := os.Stat(shot)
		require.NoError(t, err, "the screenshot was written")
		assert.Greater(t, info.Size(), int64(1000))
		t.Logf("screenshot: %s (%d bytes)", shot, info.Size())
	}
}

// statusE2EPlatform is appended to the example platform.yaml's spec by TestServeStatusPage.
const statusE2EPlatform = `  rollout:
    waves:
      - name: staging
        clusterSelector: {matchLabels: {env: staging}}
      - name: prod
        clusterSelector: {matchLabels: {env: prod}}
  managementClusters:
    - name: hub
  provisionProfiles:
    - name: metal
      chart:
        ociRepository: oci://ghcr.io/acme/charts/capi-metal
        version: 0.9.0
      required: [kubernetesVersion, nodePools]
`

// statusE2ELab is a cluster provisioned through the management cluster hub.
const statusE2ELab = `apiVersion: fleetbot.io/v1alpha1
kind: Cluster
metadata:
  name: lab-1
  labels: {env: lab}
spec:
  provision:
    managementCluster: hub
    profile: metal
    kubernetesVersion: v1.35.4
    nodePools:
      - {name: workers, count: 2}
`

func mustGroup(t *testing.T, s string) status.Grouper {
	t.Helper()
	g, err := status.ParseGroupBy(s)
	require.NoError(t, err)
	return g
}

// keepsArtifacts reports whether go test keeps the tests' artifacts (-artifacts).
func keepsArtifacts() bool {
	f := flag.Lookup("test.artifacts")
	return f != nil && f.Value.String() == "true"
}
