package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	"github.com/fleetbot-io/fleetbot/internal/report"
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

// TestControlProblems: a front end tells an invalid control repo by its class (invalid input)
// and shows its problems at file:line; an unreadable directory, a forge's rejection (invalid
// input without problems) and a plain error are reported as they are.
func TestControlProblems(t *testing.T) {
	t.Parallel()
	is := control.Issues{{Pos: control.Position{File: "platform.yaml", Line: 3}, Message: "team x not found", Hint: "create it"}}
	assert.Equal(t, report.Outcome{Class: report.ClassInvalidInput, Reason: report.ReasonInvalidControlRepo}, report.ClassOf(is),
		"control repo problems carry their class")

	got, ok := ControlProblems(fmt.Errorf("loading: %w", is))
	require.True(t, ok)
	assert.Equal(t, is, got)
	teams := report.Classify(is, report.Outcome{Class: report.ClassInvalidInput, Reason: report.ReasonTeamNotFound})
	got, ok = ControlProblems(teams)
	require.True(t, ok, "a team the org lacks: the run's own reason, the same problems")
	assert.Equal(t, is, got)

	for name, err := range map[string]error{
		"nil":                      nil,
		"unreadable":               fmt.Errorf("%w: no platform.yaml", control.ErrUnreadable),
		"rejected":                 report.Classify(errors.New("422"), report.Outcome{Class: report.ClassInvalidInput, Reason: report.ReasonRejected}),
		"wrapped but reclassified": report.Classify(is, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonError}),
	} {
		_, ok := ControlProblems(err)
		assert.False(t, ok, name)
	}
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
