package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// TestApplyNoopAfterRestartWithAFreshInstallationToken: a converged fleet of 100 clusters (102
// repos), applied again in full by a new process as the GitHub App (a freshly minted
// installation token: ETags of the previous token are worthless) on the snapshot cache the
// previous process left, costs the token, the teams and one GraphQL scan per 100 repos: no
// request per repo, no write. At 1,000 repos that is 14 requests (target: ≤ 20).
func TestApplyNoopAfterRestartWithAFreshInstallationToken(t *testing.T) {
	if testing.Short() {
		t.Skip("creates 102 repos on the fake GitHub")
	}
	t.Parallel() // credentials and the API URL by flag, not environment: other tests run beside it
	// Past 100 repos, so the scan reads two pages (GitHub's largest page is 100 repos). One app
	// per cluster: what is counted is requests per repo, not files.
	ctl := filepath.Join(t.TempDir(), "control")
	require.NoError(t, fleetgen.WriteDir(ctl, fleetgen.Options{Clusters: 100, Apps: 1, Seed: 1}))
	repo, err := control.LoadDir(ctl)
	require.NoError(t, err)
	srv := githubtest.NewServer(t)
	owner := repo.Platform.Spec.Owner
	for _, ref := range repo.TeamRefs() {
		srv.CreateTeam(owner, ref.Slug)
	}
	key := filepath.Join(t.TempDir(), "app.pem")
	writeFile(t, key, string(srv.AppPrivateKeyPEM()))
	cache := t.TempDir()
	args := []string{"apply", "--control", ctl, "--forge", "github", "--github-url", srv.APIURL(), "--github-cache", cache,
		"--app-id", fmt.Sprint(srv.AppID()), "--app-key", key, "--concurrency", "8",
		"--content-per-minute", "100000", "--content-per-hour", "1000000", // the fake enforces no content limit here
		"--mutation-interval", "0"} // nor GitHub's second between mutations: 102 repos' writes would take minutes
	// Both runs are processes of the built binary (installedBinary: without the race detector,
	// which makes rendering and applying 100 clusters in this process cost ten times the CPU).
	bin := installedBinary(t)
	fleetbot := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GITHUB_TOKEN=", "FLEETBOT_APP_KEY=", "FLEETBOT_APP_KEY_FILE=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		require.NoError(t, cmd.Run(), "fleetbot %s: %s", strings.Join(args, " "), stderr.String())
		return stdout.String()
	}
	fleetbot(args...)

	// A new process: a new App client, a freshly minted installation token.
	srv.ResetLog()
	out := fleetbot(append(args, "--full")...)
	const repos = 102 // the 100 clusters and the 2 other target repos fleetgen writes for them
	assert.Contains(t, out, fmt.Sprintf("\n%d repos: %d noop\n", repos, repos))
	var routes []string
	for _, r := range srv.Requests() {
		routes = append(routes, r.Route)
	}
	t.Logf("full no-op of %d repos, new process, new installation token: %d requests: %s", repos, len(routes), strings.Join(routes, ", "))
	pages := (repos + 99) / 100
	// The installation, GET /app and the token (once per process), the teams, the scan.
	assert.LessOrEqual(t, len(routes), 4+pages, "no request per repo")
	assert.Equal(t, 0, srv.Counts().Writes-countRoute(routes, mintToken), "no write")
}

func countRoute(routes []string, route string) int {
	n := 0
	for _, r := range routes {
		if r == route {
			n++
		}
	}
	return n
}
