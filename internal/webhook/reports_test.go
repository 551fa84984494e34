package webhook

import (
	"context"
	"io/fs"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// TestServiceKeepsTheLastReportOfEachRepo: the status page's state. A full apply records
// every repo; a drift apply replaces only its repo's result; the next full apply replaces them
// all (a removed cluster's last word is its removal PR).
func TestServiceKeepsTheLastReportOfEachRepo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f, err := local.Open(t.TempDir(), local.Options{Now: func() time.Time { return time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	ctl := &memControl{commits: map[string]fs.FS{}}
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		Runner:  app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return f, nil }),
	})
	require.NoError(t, err)
	assert.Empty(t, svc.Reports().Repos, "nothing before the first apply")

	files := edit(t, readControl(t), "clusters/edge-2.yaml", "", "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge-2\n  labels: {env: prod}\n")
	first := ctl.push(files)
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"}, nil))
	reps := svc.Reports()
	assert.Equal(t, first, reps.Source)
	require.NotNil(t, reps.Control)
	require.Len(t, reps.Repos, 7)
	for _, r := range reps.Repos {
		assert.Equal(t, pr.ActionCreate, r.Result.Action, r.Result.Repo)
		assert.Equal(t, first, r.Source)
	}

	require.NoError(t, svc.Execute(ctx, Job{Kind: KindDrift, Repo: "acme/cluster-edge-1", Reason: "push"}, nil))
	byRepo := map[string]app.RepoReport{}
	for _, r := range svc.Reports().Repos {
		byRepo[r.Result.Repo] = r
	}
	assert.Len(t, byRepo, 7, "a drift apply replaces its repo's result only")
	assert.Equal(t, pr.ActionNoop, byRepo["acme/cluster-edge-1"].Result.Action, "the PR carries the desired tree")
	assert.Equal(t, pr.ActionCreate, byRepo["acme/cluster-prod-eu-1"].Result.Action)

	second := ctl.push(edit(t, files, "clusters/edge-2.yaml", "", ""))
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"}, nil))
	reps = svc.Reports()
	assert.Equal(t, second, reps.Source)
	var names []string
	for _, r := range reps.Repos {
		names = append(names, r.Result.Repo)
		if r.Result.Repo == "acme/cluster-edge-2" {
			assert.Equal(t, pr.ActionRemove, r.Result.Action, "its removal PR is the last word on it")
		}
	}
	assert.Len(t, names, 7)
}
