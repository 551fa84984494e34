package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// TestLoadDirBuildsBesideTheLoad: LoadDir returns with the catalog's builds done by the
// renderer, so the render that follows builds nothing, and renders what a load then a cold
// render does. A failed load returns its issues, and the builds it started have ended.
func TestLoadDirBuildsBesideTheLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, fleetgen.WriteDir(dir, fleetgen.Options{Clusters: 30, Apps: 6, Seed: 2}))

	r := fanout.NewRenderer(fanout.Options{})
	repo, err := LoadDir(context.Background(), r, dir)
	require.NoError(t, err)
	assert.Equal(t, len(repo.Apps), r.Stats().Builds, "every app built during the load")
	targets, err := r.Render(repo)
	require.NoError(t, err)
	assert.Equal(t, len(repo.Apps), r.Stats().Builds, "the render built nothing more")

	plain, err := control.LoadDir(dir)
	require.NoError(t, err)
	want, err := fanout.NewRenderer(fanout.Options{}).Render(plain)
	require.NoError(t, err)
	require.Len(t, targets, len(want))
	for i := range want {
		assert.Equal(t, want[i].Files, targets[i].Files, want[i].Repo)
	}

	broken := filepath.Join(dir, "clusters", "broken.yaml")
	require.NoError(t, os.WriteFile(broken, []byte("kind: ["), 0o644))
	r = fanout.NewRenderer(fanout.Options{})
	repo, err = LoadDir(context.Background(), r, dir)
	assert.Nil(t, repo)
	var issues control.Issues
	require.True(t, errors.As(err, &issues), "%v", err)
	assert.Contains(t, err.Error(), "clusters/broken.yaml")

	// A context already done: the load still answers, the builds stop before the first.
	require.NoError(t, os.Remove(broken))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r = fanout.NewRenderer(fanout.Options{})
	repo, err = LoadDir(ctx, r, dir)
	require.NoError(t, err)
	assert.NotNil(t, repo)
	assert.Zero(t, r.Stats().Builds)
}

// TestRolloutReposIncludeWorkspaces: the repos serve watches while a rollout is in progress (a
// Flux status or a merge there applies the fleet, so the gate sees it now) are the cluster repos
// and the workspace repos, whose merges and health gate the waves of their clusters; not the
// control repo, and not a repo being removed.
func TestRolloutReposIncludeWorkspaces(t *testing.T) {
	t.Parallel()
	f, err := Config{}.Load(context.Background(), exampleControl)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"acme/cluster-edge-1", "acme/cluster-prod-eu-1", "acme/cluster-prod-us-1", "acme/cluster-staging-eu-1",
		"acme/workspace-payments", "acme/workspace-search"}, f.RolloutRepos())
	f.Targets[0].Removed = true
	assert.NotContains(t, f.RolloutRepos(), f.Targets[0].FullName())
}
