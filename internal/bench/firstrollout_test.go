package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// TestFirstRolloutCosts measures the first rollout as make bench does (its row 8), on a small
// fleet: 3 content-creating requests per new repo, the org's teams read once for the run, and
// no team read per new repo (before: every new repo read each of its teams, 2,623 reads for 901
// repos; 89 for the 31 repos here, 185 reads in all where there are 96 now).
func TestFirstRolloutCosts(t *testing.T) {
	t.Parallel()
	fs := fleetgen.Generate(fleetgen.Options{Clusters: 30, Apps: 3, Seed: 1})
	repo, err := control.Load(fs)
	require.NoError(t, err)
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
	require.NoError(t, err)
	srv, stop, err := fakeGitHub(t.TempDir(), repo, githubtest.WithStartTime(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)))
	require.NoError(t, err)
	defer stop()
	ctx := context.Background()
	c, err := ghforge.New(ctx, ghforge.Config{APIURL: srv.APIURL(), Token: githubtest.DefaultToken,
		Budget: ghforge.BudgetConfig{PerMinute: 1 << 30, PerHour: 1 << 30, MinInterval: -1}})
	require.NoError(t, err)
	f := ghforge.NewForge(c, ghforge.ForgeOptions{CacheDir: t.TempDir(), ContentTransport: ghforge.DefaultContentTransport})
	srv.ResetLog()
	rep, err := reconcile.Apply(ctx, f, repo, targets, reconcile.Options{Concurrency: 8})
	require.NoError(t, err)
	cost := counts(srv)
	assert.Len(t, rep.Results, len(targets))
	assert.Equal(t, 3*len(targets), cost.ContentCreating, "3 content-creating requests per new repo: %v", cost.ContentRoutes)
	assert.Equal(t, 1, cost.Routes["GET /orgs/{org}/teams"], "the org's teams, once per run")
	assert.Zero(t, cost.Routes["GET /orgs/{org}/teams/{team_slug}"], "no team read per new repo")
	t.Logf("first rollout of %d repos: %d reads, %d writes, %d content-creating; routes %v", len(targets), cost.Reads, cost.Writes, cost.ContentCreating, cost.Routes)
}
