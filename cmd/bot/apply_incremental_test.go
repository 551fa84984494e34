package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// TestApplyGitHubIsIncrementalAndWarmAcrossRuns: apply on GitHub keeps, in its snapshot cache,
// what its last converged run left every repo at. The next process, with another token (an
// installation token rotates every hour), costs a handful of requests for a full no-op; a run
// with nothing changed costs none; a changed cluster file costs requests to that cluster's
// repo and at most two org-level ones; --full plans every repo; a corrupt baseline is
// ignored with a log line.
func TestApplyGitHubIsIncrementalAndWarmAcrossRuns(t *testing.T) {
	srv := fakeFleet(t)
	t.Setenv("GITHUB_API_URL", srv.APIURL())
	t.Setenv("GITHUB_TOKEN", githubtest.DefaultToken)
	t.Setenv("FLEETBOT_APP_ID", "")
	ctl := copyControl(t)
	cache := t.TempDir()
	args := []string{"apply", "--control", ctl, "--forge", "github", "--github-cache", cache, "--mutation-interval", "0"}
	code, out, errOut := cli(t, args...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Scope: full: no baseline")
	baseline := filepath.Join(cache, ".baseline-acme.json")
	require.FileExists(t, baseline)

	// A new process with a rotated token, every repo planned: the batched scan and the cached
	// snapshots and access make it a few requests, none a write.
	srv.AddToken(githubtest.DefaultUser, "ghp_rotatedtokenofthesameuser")
	t.Setenv("GITHUB_TOKEN", "ghp_rotatedtokenofthesameuser")
	srv.ResetLog()
	code, out, errOut = cli(t, append(args, "--full")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Scope: full: full run asked for")
	assert.LessOrEqual(t, len(srv.Requests()), 3, "a full no-op of 6 repos after a restart and a token rotation: %v", routesOf(srv.Requests()))
	assert.Equal(t, 0, srv.Counts().Writes)

	srv.ResetLog()
	code, out, errOut = cli(t, args...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Scope: incremental: 0 of 6 target repos changed")
	assert.Empty(t, srv.Requests(), "nothing changed: no request at all")

	cluster := filepath.Join(ctl, "clusters", "edge-1.yaml")
	b, err := os.ReadFile(cluster)
	require.NoError(t, err)
	require.Contains(t, string(b), "192.168.50.0/28")
	require.NoError(t, os.WriteFile(cluster, []byte(strings.Replace(string(b), "192.168.50.0/28", "192.168.60.0/28", 1)), 0o644))
	srv.ResetLog()
	code, out, errOut = cli(t, args...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Scope: incremental: 1 of 6 target repos changed")
	org, reads := 0, 0
	touched := map[string]bool{}
	for _, r := range srv.Requests() {
		// A git push (the default content transport) starts with the ref advertisement, a GET
		// of the repo's refs that is the first half of the write, not a read for the plan.
		if r.Class == githubtest.Read && r.Route != "GET /{owner}/{repo}/info/refs" {
			reads++
		}
		repo, ok := strings.CutPrefix(r.Repo, "acme/") // a REST path's, or a GraphQL mutation's (updateRefs)
		if !ok {
			if r.Route != "GET /user" { // who the token belongs to: once per process, not per run
				org++
			}
			continue
		}
		touched[repo] = true
	}
	assert.Equal(t, map[string]bool{"cluster-edge-1": true}, touched, "only the changed cluster's repo: %v", routesOf(srv.Requests()))
	assert.LessOrEqual(t, org, 2, "org-level requests once per run: %v", routesOf(srv.Requests()))
	assert.LessOrEqual(t, reads, len(touched)+2, "reads ≤ touched repos + 2: %v", routesOf(srv.Requests()))

	require.NoError(t, os.WriteFile(baseline, []byte("{not json"), 0o600))
	srv.ResetLog()
	code, out, errOut = cli(t, args...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "Scope: full: no baseline")
	assert.Contains(t, errOut, "ignoring a corrupt reconcile baseline")
	assert.Equal(t, 0, srv.Counts().Writes)

	// The snapshot cache is as safe to damage: a corrupt file and one of another version are
	// ignored (the corrupt one with a warning), those repos are read from GitHub again, and
	// the files are written anew.
	corrupt, old := filepath.Join(cache, "acme", "cluster-edge-1.json"), filepath.Join(cache, "acme", "cluster-prod-eu-1.json")
	require.FileExists(t, corrupt)
	require.NoError(t, os.WriteFile(corrupt, []byte("{\"version\": 1, \"branches\": {"), 0o600))
	require.NoError(t, os.WriteFile(old, []byte(`{"version": 0}`), 0o600))
	srv.ResetLog()
	code, out, errOut = cli(t, append(args, "--full")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "6 repos: 6 noop")
	assert.Contains(t, errOut, "ignoring a corrupt snapshot cache file")
	assert.Equal(t, 0, srv.Counts().Writes)
	for _, f := range []string{corrupt, old} {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Contains(t, string(b), `"version":1`, "%s is written anew", f)
	}
}
