package serve_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// targetRequests splits the fake's log into requests to target repos (by repo) and
// org-level ones, leaving out the control repo and the App's own authentication (GET /app
// with the JWT, minting an installation token), which a process does once.
func targetRequests(reqs []githubtest.Request) (byRepo map[string]int, org []string, reads int) {
	byRepo = map[string]int{}
	for _, r := range reqs {
		if strings.HasPrefix(r.Route, "POST /app/") || r.Route == "GET /app" || strings.HasPrefix(r.Route, "GET /orgs/{org}/installation") ||
			r.Path == "/api/v3/repos/acme/control" || strings.HasPrefix(r.Path, "/api/v3/repos/acme/control/") {
			continue
		}
		if r.Class == githubtest.Read {
			reads++
		}
		if repo, ok := strings.CutPrefix(r.Repo, "acme/"); ok {
			byRepo[repo]++ // a REST path's repo, or the one a GraphQL mutation (updateRefs) wrote
			continue
		}
		org = append(org, r.Route)
	}
	return byRepo, org, reads
}

// withoutDeliveryLog splits the reads of the App's webhook delivery log (serve's pass at start,
// App-level, not the org's) from the org-level routes.
func withoutDeliveryLog(routes []string) (org []string, log int) {
	for _, r := range routes {
		if r == "GET /app/hook/deliveries" {
			log++
			continue
		}
		org = append(org, r)
	}
	return org, log
}

// TestServeIsWarmAcrossRestarts: serve keeps its snapshot cache and its baseline in the state
// directory. After a restart (a new installation token), the startup resync of an unchanged
// fleet costs a couple of org-level requests and no write; a push of one cluster's change then
// reads and writes that cluster's repo only; and a deleted or corrupt cache only costs a full
// read.
func TestServeIsWarmAcrossRestarts(t *testing.T) {
	t.Parallel()
	cache := t.TempDir()
	first := startServe(t, serveOptions{cacheDir: cache})
	first.waitMetric(appliedOK, 1)
	first.idle()
	first.stop()
	baseline := filepath.Join(cache, ".baseline-serve-acme_control.json")
	require.FileExists(t, baseline)

	first.gh.ResetLog()
	second := startServe(t, serveOptions{reuse: first, cacheDir: cache})
	second.waitMetric(appliedOK, 1)
	second.idle()
	byRepo, org, reads := targetRequests(second.gh.Requests())
	t.Logf("startup resync after a restart: %d target-repo requests %v, org-level %v", len(byRepo), byRepo, org)
	assert.Empty(t, byRepo, "no target repo is read one by one")
	org, inbox := withoutDeliveryLog(org)
	assert.LessOrEqual(t, len(org), 2, "org-level: the teams and one scan: %v", org)
	assert.Equal(t, 1, inbox, "and one page of the App's delivery log (nothing failed: nothing redelivered)")
	assert.LessOrEqual(t, reads, 2+inbox)

	second.gh.ResetLog()
	sha := second.gh.Commit("acme", "control", "main", "edge-1: new range", edge1("10.9.0.0/28"))
	push := fmt.Sprintf(`{"ref":"refs/heads/main","after":%q,"repository":{"full_name":"acme/control","name":"control","default_branch":"main","owner":{"login":"acme"}},"sender":{"login":"octocat"}}`, sha)
	require.Equal(t, 202, second.deliver("push", "push-1", []byte(push), serveSecret))
	second.waitMetric(appliedOK, 2)
	second.idle()
	s, _ := second.gh.File("acme", "cluster-edge-1", "fleetbot/sync", "platform/metallb/metallb.yaml")
	assert.Contains(t, s, "10.9.0.0/28")
	byRepo, org, reads = targetRequests(second.gh.Requests())
	assert.Equal(t, []string{"cluster-edge-1"}, keys(byRepo), "a push of one cluster's change touches that repo only")
	assert.LessOrEqual(t, len(org), 2, "org-level requests once per run: %v", org)
	assert.LessOrEqual(t, reads, len(byRepo)+2, "reads ≤ touched repos + 2")
	second.stop()

	// The state directory is only a cache: deleted or corrupt, the next start reads in full.
	require.NoError(t, os.WriteFile(baseline, []byte("{"), 0o600))
	second.gh.ResetLog()
	third := startServe(t, serveOptions{reuse: second, cacheDir: cache})
	third.waitMetric(appliedOK, 1)
	third.idle()
	require.NoError(t, os.RemoveAll(cache))
	third.stop()
	fourth := startServe(t, serveOptions{reuse: third, cacheDir: cache})
	fourth.waitMetric(appliedOK, 1)
	fourth.idle()
	assert.Equal(t, 0, len(writesTo(fourth.gh.Requests())), "nothing to write: %v", writesTo(fourth.gh.Requests()))
}

func keys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
