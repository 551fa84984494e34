package githubapi

import (
	"context"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// TestPendingChecksReadsOpenPullsAndTheAppsNewestCheck: against the fake GitHub (its requests
// checked against GitHub's REST description), the open pull requests of the control repo come
// with head, base and author; a head's state is the newest check run of fleetbot's name from
// fleetbot's App (another App's run of the same name does not count); a head with none is not
// found.
func TestPendingChecksReadsOpenPullsAndTheAppsNewestCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "control", map[string]string{"README.md": "control\n"})
	api := srv.Client()
	main := srv.Branch("acme", "control", "main")
	_, _, err := api.Git.CreateRef(ctx, "acme", "control", &gh.Reference{Ref: gh.String("refs/heads/change"), Object: &gh.GitObject{SHA: gh.String(main)}})
	require.NoError(t, err)
	head := srv.Commit("acme", "control", "change", "a change", map[string]string{"README.md": "changed\n"})
	_, _, err = api.PullRequests.Create(ctx, "acme", "control", &gh.NewPullRequest{Title: gh.String("change"), Head: gh.String("change"), Base: gh.String("main")})
	require.NoError(t, err)

	app := srv.ClientWithToken(srv.InstallationToken("acme"))
	p, err := NewPendingChecks(app, "acme/control", "", srv.AppID())
	require.NoError(t, err)
	pulls, err := p.OpenPullRequests(ctx)
	require.NoError(t, err)
	require.Len(t, pulls, 1)
	assert.Equal(t, checkrun.OpenPullRequest{Number: pulls[0].Number, Head: head, Base: main, Author: githubtest.DefaultUser}, pulls[0])

	_, found, err := p.LatestCheck(ctx, head)
	require.NoError(t, err)
	assert.False(t, found, "no check run yet")

	_, err = srv.AddCheckRun(srv.AppID()+1, "acme", "control", head, checkrun.DefaultCheckName, "success")
	require.NoError(t, err)
	_, found, err = p.LatestCheck(ctx, head)
	require.NoError(t, err)
	assert.False(t, found, "another App's run of the same name is not fleetbot's")

	checks, err := NewGitHubChecks(app, "acme/control", "")
	require.NoError(t, err)
	first, err := checks.Start(ctx, head)
	require.NoError(t, err)
	require.NoError(t, checks.Finish(ctx, first, checkrun.Result{Conclusion: checkrun.ConclusionSuccess, Title: "t", Summary: "s"}))
	second, err := checks.Start(ctx, head)
	require.NoError(t, err)
	st, found, err := p.LatestCheck(ctx, head)
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, second, st.ID, "the newest run")
	assert.Equal(t, "in_progress", st.Status)
	assert.False(t, st.StartedAt.IsZero())
}
