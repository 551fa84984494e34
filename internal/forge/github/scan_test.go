package github_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// TestScanReadsAFleetInPagesOf100: an owner of 205 repos is read with the team list and three
// GraphQL pages, whatever the number of repos; archived repos and the managed ones (by topic)
// come out as the REST listing gave them; a run limited to some repos reads only those (and
// tolerates one that does not exist).
func TestScanReadsAFleetInPagesOf100(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	srv.CreateTeam("acme", "platform")
	ctx := context.Background()
	api := srv.Client()
	for i := range 205 {
		srv.CreateRepo("acme", fmt.Sprintf("cluster-%03d", i), nil)
	}
	srv.Commit("acme", "cluster-007", "main", "init", map[string]string{"README.md": "x"})
	bot := srv.Commit("acme", "cluster-007", "fleetbot/sync", "change", map[string]string{"README.md": "y"})
	_, _, err := api.Repositories.ReplaceAllTopics(ctx, "acme", "cluster-007", []string{ghforge.ManagedTopic, "fleetbot-cluster"})
	require.NoError(t, err)
	_, _, err = api.Repositories.Edit(ctx, "acme", "cluster-100", &gh.Repository{Archived: gh.Bool(true)})
	require.NoError(t, err)

	f := ghforge.NewForge(newTokenClient(t, srv), ghforge.ForgeOptions{})
	srv.ResetLog()
	org, managed, err := f.Scan(ctx, "acme", "main", "fleetbot/sync", nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"platform"}, org.Teams)
	assert.Equal(t, []string{"cluster-100"}, org.Archived)
	assert.Equal(t, []pr.ManagedRepo{{Kind: "cluster", Name: "007", Repo: "cluster-007"}}, managed)
	routes := map[string]int{}
	for _, r := range srv.Requests() {
		routes[r.Route]++
	}
	assert.Equal(t, 3, routes["POST /api/graphql"], "205 repos: three pages of 100: %v", srv.Requests())
	assert.Equal(t, 1, routes["GET /orgs/{org}/teams"])
	assert.Len(t, srv.Requests(), 5, "and the identity: %v", routes)

	srv.ResetLog()
	only := []string{"cluster-007", "cluster-gone"}
	org, managed, err = f.Scan(ctx, "acme", "main", "fleetbot/sync", only)
	require.NoError(t, err)
	assert.Nil(t, managed, "a limited run lists no managed repos")
	assert.Empty(t, org.Archived)
	n := 0
	for _, r := range srv.Requests() {
		if r.Route == "POST /api/graphql" {
			n++
		}
	}
	assert.Equal(t, 1, n, "two named repos: one query")

	// The scan's heads answer the snapshot of a repo the forge has never seen with the
	// usual reads; the state then stands for the next scan.
	s, err := f.Snapshot(ctx, "acme", "cluster-007", "main", "fleetbot/sync")
	require.NoError(t, err)
	require.NotNil(t, s.Bot)
	assert.Equal(t, bot, s.Bot.SHA)
	_, _, err = f.Scan(ctx, "acme", "main", "fleetbot/sync", only)
	require.NoError(t, err)
	srv.ResetLog()
	again, err := f.Snapshot(ctx, "acme", "cluster-007", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, s, again)
	assert.Empty(t, srv.Requests(), "unchanged heads: the snapshot costs nothing")

	// A push moves the bot branch: the next scan says so and the snapshot reads again.
	moved := srv.Commit("acme", "cluster-007", "fleetbot/sync", "human", map[string]string{"README.md": "z"})
	_, _, err = f.Scan(ctx, "acme", "main", "fleetbot/sync", only)
	require.NoError(t, err)
	s, err = f.Snapshot(ctx, "acme", "cluster-007", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, moved, s.Bot.SHA)
}

// newTokenClient is a forge client on the fake with the default user's token.
func newTokenClient(t *testing.T, srv *githubtest.Server) *ghforge.Client {
	t.Helper()
	c, err := ghforge.New(context.Background(), ghforge.Config{APIURL: srv.APIURL(), Token: githubtest.DefaultToken})
	require.NoError(t, err)
	return c
}

// TestScanQueriesAreGitHubs: the queries the scan sends validate against GitHub's published
// GraphQL schema (the fake checks every query against it too when it is installed).
func TestScanQueriesAreGitHubs(t *testing.T) {
	t.Parallel()
	schema := githubtest.RequireGraphQLSchema(t)
	for name, q := range ghforge.ScanQueries(3) {
		assert.Empty(t, githubtest.ValidateGraphQL(schema, q), name)
	}
}

// TestScanHintServesEveryRunUntilTheRepoChanges: two runs that scan and plan the same repo at
// once (a check's plan on a read-only view beside a drift reconcile on the forge) both answer
// their snapshots from the newest scan, whichever run made it; once the forge learns something
// newer of the repo (its own write) or the scan is too old, the snapshot reads the repo again.
func TestScanHintServesEveryRunUntilTheRepoChanges(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	ctx := context.Background()
	srv.CreateRepo("acme", "cluster-a", nil)
	srv.Commit("acme", "cluster-a", "main", "init", map[string]string{"README.md": "x"})
	srv.Commit("acme", "cluster-a", "fleetbot/sync", "change", map[string]string{"README.md": "y"})
	p, _, err := srv.Client().PullRequests.Create(ctx, "acme", "cluster-a", &gh.NewPullRequest{
		Title: gh.String("sync"), Head: gh.String("fleetbot/sync"), Base: gh.String("main"), Body: gh.String("first")})
	require.NoError(t, err)

	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	f := ghforge.NewForge(newTokenClient(t, srv), ghforge.ForgeOptions{Now: clock})
	ro, err := ghforge.New(ctx, ghforge.Config{APIURL: srv.APIURL(), Token: githubtest.DefaultToken, ReadOnly: true})
	require.NoError(t, err)
	view := f.View(ro, ghforge.ViewOptions{})
	only := []string{"cluster-a"}
	first, err := f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync") // the forge learns the repo
	require.NoError(t, err)

	_, _, err = f.Scan(ctx, "acme", "main", "fleetbot/sync", only)
	require.NoError(t, err)
	_, _, err = view.Scan(ctx, "acme", "main", "fleetbot/sync", only)
	require.NoError(t, err)
	srv.ResetLog()
	for i, fg := range []*ghforge.Forge{f, view, f} {
		s, err := fg.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
		require.NoError(t, err)
		assert.Equal(t, first.Bot.SHA, s.Bot.SHA)
		assert.Empty(t, srv.Requests(), "snapshot %d: the newest scan answers every run", i)
	}

	// fleetbot edits its pull request: the scan no longer describes what the forge knows.
	require.NoError(t, f.UpdatePR(ctx, "acme", "cluster-a", p.GetNumber(), "sync", "second"))
	srv.ResetLog()
	s, err := view.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, "second", s.PR.Body, "the view sees the forge's own write")
	assert.NotEmpty(t, srv.Requests(), "after a write the snapshot reads the repo")

	// A scan older than ten minutes answers nothing.
	_, _, err = f.Scan(ctx, "acme", "main", "fleetbot/sync", only)
	require.NoError(t, err)
	now = now.Add(11 * time.Minute)
	srv.ResetLog()
	_, err = f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.NotEmpty(t, srv.Requests(), "a stale scan is not used")
}

// TestScanOverTheGraphQLBudget: GitHub keeps a GraphQL budget in points apart from the REST one
// and answers a call over it 200 with an error of type RATE_LIMITED; the scan returns an
// ErrRateLimited carrying the reset (the work is deferred, not failed), and the REST budget the
// counters report is not the GraphQL one.
// https://docs.github.com/graphql/overview/rate-limits-and-query-limits-for-the-graphql-api
func TestScanOverTheGraphQLBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A page of the scan costs 2 points: 1 for the repositories, 100 x 2 nested connections
	// (topics, pull requests) make 201 requests, 2 points.
	srv := githubtest.NewServer(t, githubtest.WithGraphQLLimit(2))
	srv.CreateOrg("acme")
	srv.CreateTeam("acme", "platform")
	srv.CreateRepo("acme", "cluster-a", nil)
	c := newTokenClient(t, srv)
	f := ghforge.NewForge(c, ghforge.ForgeOptions{})
	_, _, err := f.Scan(ctx, "acme", "main", "fleetbot/sync", nil)
	require.NoError(t, err, "2 points")
	assert.Equal(t, int64(githubtest.DefaultPrimaryLimit-2), c.Stats().Requests.RateRemaining,
		"the REST budget after 2 REST requests (identity, teams): the GraphQL call's headers are its own budget's")

	_, _, err = f.Scan(ctx, "acme", "main", "fleetbot/sync", nil)
	require.Error(t, err)
	assert.ErrorIs(t, err, ghforge.ErrRateLimited)
	var rl *ghforge.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.True(t, rl.Reset.After(time.Now()), "the budget resets within the hour: %v", rl.Reset)
}

// TestScanReadsFailingHealth: the scan carries, for status views, the default branch head's
// failing commit statuses (Flux's failing Kustomization, its message and link) into the next
// snapshot, at no request of their own; a success stays out.
func TestScanReadsFailingHealth(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	ctx := context.Background()
	srv.CreateRepo("acme", "cluster-a", nil)
	head := srv.Commit("acme", "cluster-a", "main", "init", map[string]string{"README.md": "x"})
	api := srv.Client()
	for _, st := range []*gh.RepoStatus{
		{Context: gh.String("kustomization/flux-system/0c1d"), State: gh.String("success"), Description: gh.String("Applied revision: main@sha1:" + head)},
		{Context: gh.String("kustomization/platform-metallb/0c1d"), State: gh.String("failure"),
			Description: gh.String("IPAddressPool/metallb-system/pool dry-run failed: no matches for kind"), TargetURL: gh.String("https://flux.example.com/metallb")},
	} {
		_, _, err := api.Repositories.CreateStatus(ctx, "acme", "cluster-a", head, st)
		require.NoError(t, err)
	}
	f := ghforge.NewForge(newTokenClient(t, srv), ghforge.ForgeOptions{})
	_, _, err := f.Scan(ctx, "acme", "main", "fleetbot/sync", nil)
	require.NoError(t, err)
	srv.ResetLog()
	s, err := f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, "failure", s.Base.Status)
	assert.Equal(t, []pr.CommitStatus{{Context: "kustomization/platform-metallb/0c1d", State: "failure",
		Description: "IPAddressPool/metallb-system/pool dry-run failed: no matches for kind", TargetURL: "https://flux.example.com/metallb"}}, s.Base.Failing)
}
