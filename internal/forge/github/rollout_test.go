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
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// TestRolloutPRsInBatchesOf100: a wave check over 250 cluster repos costs three GraphQL
// requests and nothing else; it returns fleetbot's newest open or merged pull request per repo
// (a pull request without fleetbot's marker is not fleetbot's), with the merge commit's newest
// status per context, and the default branch's head and its statuses when it moved past the
// merge; a repo that does not exist is absent.
func TestRolloutPRsInBatchesOf100(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	ctx := context.Background()
	api := srv.Client()
	marker := func(src string) string {
		return "fleetbot PR\n\n<!-- fleetbot:state {\"source\":\"" + src + "\"} -->\n"
	}
	open := func(repo, body string) int {
		srv.CreateRepo("acme", repo, nil)
		base := srv.Commit("acme", repo, "main", "init", map[string]string{"README.md": "x"})
		_, _, err := api.Git.CreateRef(ctx, "acme", repo, &gh.Reference{Ref: gh.String("refs/heads/fleetbot/sync"), Object: &gh.GitObject{SHA: gh.String(base)}})
		require.NoError(t, err)
		srv.Commit("acme", repo, "fleetbot/sync", "change", map[string]string{"README.md": "y"})
		p, _, err := api.PullRequests.Create(ctx, "acme", repo, &gh.NewPullRequest{Title: gh.String("sync"), Head: gh.String("fleetbot/sync"), Base: gh.String("main"), Body: gh.String(body)})
		require.NoError(t, err)
		return p.GetNumber()
	}
	open("cluster-open", marker("r2"))
	n := open("cluster-merged", marker("r1"))
	_, _, err := api.PullRequests.Merge(ctx, "acme", "cluster-merged", n, "", &gh.PullRequestOptions{MergeMethod: "merge"})
	require.NoError(t, err)
	p, _, err := api.PullRequests.Get(ctx, "acme", "cluster-merged", n)
	require.NoError(t, err)
	sha := p.GetMergeCommitSHA()
	for _, st := range [][2]string{{"kustomization/platform/abc", "pending"}, {"kustomization/platform/abc", "success"}, {"ci/lint", "failure"}} {
		_, _, err := api.Repositories.CreateStatus(ctx, "acme", "cluster-merged", sha, &gh.RepoStatus{Context: gh.String(st[0]), State: gh.String(st[1])})
		require.NoError(t, err)
	}
	// A cluster admin's commit lands after the merge; Flux reports on it.
	head := srv.Commit("acme", "cluster-merged", "main", "apps", map[string]string{"apps/x.yaml": "x"})
	_, _, err = api.Repositories.CreateStatus(ctx, "acme", "cluster-merged", head, &gh.RepoStatus{Context: gh.String("kustomization/apps/abc"), State: gh.String("success")})
	require.NoError(t, err)
	open("cluster-human", "not fleetbot's")

	names := []string{"cluster-open", "cluster-merged", "cluster-human"}
	for i := range 247 {
		names = append(names, fmt.Sprintf("cluster-gone-%03d", i))
	}
	f := ghforge.NewForge(newTokenClient(t, srv), ghforge.ForgeOptions{})
	srv.ResetLog()
	got, err := f.RolloutPRs(ctx, "acme", names, "main", "fleetbot/sync")
	require.NoError(t, err)
	routes := map[string]int{}
	for _, r := range srv.Requests() {
		routes[r.Route]++
	}
	assert.Equal(t, map[string]int{"POST /api/graphql": 3}, routes, "250 repos: three queries of 100")

	require.Len(t, got, 2)
	assert.Equal(t, pr.RolloutPR{Number: 1, State: pr.StateOpen, Source: "r2"}, got["cluster-open"])
	m := got["cluster-merged"]
	assert.Equal(t, pr.StateMerged, m.State)
	assert.Equal(t, "r1", m.Source)
	assert.Equal(t, sha, m.MergeCommit)
	assert.False(t, m.MergedAt.IsZero())
	require.Len(t, m.Statuses, 2, "the newest status of each context")
	states := map[string]string{}
	for _, s := range m.Statuses {
		states[s.Context] = s.State
		assert.False(t, s.CreatedAt.IsZero())
	}
	assert.Equal(t, map[string]string{"kustomization/platform/abc": "success", "ci/lint": "failure"}, states)
	assert.Equal(t, head, m.Head, "the default branch moved past the merge commit")
	require.Len(t, m.HeadStatuses, 1)
	assert.Equal(t, "kustomization/apps/abc", m.HeadStatuses[0].Context)
}
