package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// contentWrites counts the fake's writes to target repos (token minting aside) and, of them,
// the git pushes.
func contentWrites(srv *githubtest.Server) (all, pushes int) {
	for _, w := range targetWrites(srv) {
		all++
		if strings.Contains(w, "git-receive-pack") {
			pushes++
		}
	}
	return all, pushes
}

// TestApplyContentTransportGit: --content-transport git proposes the same pull request
// contents as the Git Data API, writing each commit with one git push.
func TestApplyContentTransportGit(t *testing.T) {
	repos := exampleRepos(t)
	run := func(transport string) (map[string]string, int, int) {
		srv := fakeFleet(t) // one fake per transport: --git-url keeps the rendered URLs equal
		t.Setenv("GITHUB_API_URL", srv.APIURL())
		t.Setenv("FLEETBOT_APP_ID", strconv.FormatInt(srv.AppID(), 10))
		t.Setenv("FLEETBOT_APP_KEY", string(srv.AppPrivateKeyPEM()))
		code, stdout, stderr := cli(t, "apply", "--control", copyControl(t), "--forge", "github", "--github-cache", "off",
			"--mutation-interval=0", "--content-transport", transport, "--git-url", "https://git.example.com")
		require.Equal(t, 0, code, stdout+stderr)
		all, pushes := contentWrites(srv)
		return botTrees(t, srv, repos), all, pushes
	}
	apiTrees, apiWrites, apiPushes := run("api")
	gitTrees, gitWrites, gitPushes := run("git")
	assert.Equal(t, apiTrees, gitTrees, "the same pull request contents either way")
	assert.Zero(t, apiPushes)
	assert.Equal(t, len(repos), gitPushes, "per new repo, one push of its default branch's first commit and the pull request's branch together")
	assert.Less(t, gitWrites, apiWrites, "git push writes fewer requests")
	t.Logf("writes to %d new target repos: api %d, git %d (%d pushes)", len(repos), apiWrites, gitWrites, gitPushes)
}
