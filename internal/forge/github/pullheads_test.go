package github_test

import (
	"context"
	"fmt"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// TestOpenPullHeadsAndLatestCheckRunsInBatchesOf100: a resync's read of the open pull requests
// of 150 repos costs two GraphQL requests, and of the check runs on their heads one more; the
// newest run of the name from the App is returned (a re-run replaces the run before it; another
// App's run of the same name does not count), a head without one is absent, and so are the
// pull requests of a repo that does not exist.
func TestOpenPullHeadsAndLatestCheckRunsInBatchesOf100(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	ctx := context.Background()
	api := srv.Client()
	open := func(repo, branch string) (int, string) {
		if srv.Repo("acme", repo) == nil {
			srv.CreateRepo("acme", repo, nil)
			srv.Commit("acme", repo, "main", "init", map[string]string{"README.md": "x"})
		}
		_, _, err := api.Git.CreateRef(ctx, "acme", repo, &gh.Reference{Ref: gh.String("refs/heads/" + branch), Object: &gh.GitObject{SHA: gh.String(srv.Branch("acme", repo, "main"))}})
		require.NoError(t, err)
		head := srv.Commit("acme", repo, branch, "change", map[string]string{"apps/x.yaml": branch})
		p, _, err := api.PullRequests.Create(ctx, "acme", repo, &gh.NewPullRequest{Title: gh.String(branch), Head: gh.String(branch), Base: gh.String("main")})
		require.NoError(t, err)
		return p.GetNumber(), head
	}
	const app, other = 1, 15368
	n1, h1 := open("cluster-a", "fix")
	n2, h2 := open("cluster-a", "more")
	n3, h3 := open("team-b", "app")
	_, err := srv.AddCheckRun(app, "acme", "cluster-a", h1, "fleetbot tenant", "failure")
	require.NoError(t, err)
	rerun, err := srv.AddCheckRun(app, "acme", "cluster-a", h1, "fleetbot tenant", "success")
	require.NoError(t, err)
	_, err = srv.AddCheckRun(other, "acme", "cluster-a", h2, "fleetbot tenant", "success")
	require.NoError(t, err)
	_, err = srv.AddCheckRun(app, "acme", "team-b", h3, "lint", "success")
	require.NoError(t, err)

	names := []string{"cluster-a", "team-b"}
	for i := range 148 {
		names = append(names, fmt.Sprintf("cluster-gone-%03d", i))
	}
	f := ghforge.NewForge(newTokenClient(t, srv), ghforge.ForgeOptions{})
	srv.ResetLog()
	heads, err := f.OpenPullHeads(ctx, "acme", names)
	require.NoError(t, err)
	assert.ElementsMatch(t, []ghforge.PullHead{{Repo: "cluster-a", Number: n1, Head: h1}, {Repo: "cluster-a", Number: n2, Head: h2}, {Repo: "team-b", Number: n3, Head: h3}}, heads)
	runs, err := f.LatestCheckRuns(ctx, "acme", heads, "fleetbot tenant", app)
	require.NoError(t, err)
	routes := map[string]int{}
	for _, r := range srv.Requests() {
		routes[r.Route]++
	}
	assert.Equal(t, map[string]int{"POST /api/graphql": 3}, routes, "150 repos: two queries of 100; 3 heads: one")

	require.Len(t, runs, 1, "only cluster-a's first head has the App's run of that name")
	got := runs[ghforge.PullHead{Repo: "cluster-a", Number: n1, Head: h1}]
	assert.Equal(t, rerun, got.ID, "the newest run")
	assert.Equal(t, "completed", got.Status)
	assert.False(t, got.StartedAt.IsZero())

	anyApp, err := f.LatestCheckRuns(ctx, "acme", heads, "fleetbot tenant", 0)
	require.NoError(t, err)
	assert.Len(t, anyApp, 2, "without an App, another App's run counts")
}
