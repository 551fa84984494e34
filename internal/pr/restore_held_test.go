package pr_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// TestHeldRestoreGetsAutoMergeInPlace: a restore opened while fleetbot may not merge (held) is
// set to auto-merge, once it may, on the very pull request that is open: one EnableAutoMerge
// pinned to the rollback commit and one body update dropping the held mark; nothing is
// committed, no branch moves, nothing is closed or opened. The next run writes nothing. A
// head that moved since is refused by the forge (compare-and-swap), with nothing written.
func TestHeldRestoreGetsAutoMergeInPlace(t *testing.T) {
	ctx := context.Background()
	f := newForge(t)
	tg := clusterTarget()
	_, first := step(t, f, tg, opts, pr.ActionCreate)
	require.NoError(t, f.Merge(ctx, "acme", "cluster-a", first.Number, local.MergeSquash))
	step(t, f, tg, opts, pr.ActionCleanup)
	s, err := f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)
	healthy := s.Base.Tree

	bad := opts
	bad.Source = "2222222222222222222222222222222222222222"
	tg.Files["platform/m.yaml"] = []byte(configMap + "  b: \"2\"\n")
	_, second := step(t, f, tg, bad, pr.ActionOpen)
	require.NoError(t, f.Merge(ctx, "acme", "cluster-a", second.Number, local.MergeSquash))
	step(t, f, tg, bad, pr.ActionCleanup)
	s, err = f.Snapshot(ctx, "acme", "cluster-a", "main", "fleetbot/sync")
	require.NoError(t, err)

	req := pr.RestoreRequest{Target: tg, Branch: opts.Branch, Failed: bad.Source, FailedTree: s.Base.Tree, To: opts.Source, Tree: healthy, Why: "c01 failed", Held: true}
	res, err := pr.Restore(ctx, f, req)
	require.NoError(t, err)
	assert.Equal(t, "opened", res.Done)
	held := res.Number
	p := prNumbered(t, f, held)
	assert.Contains(t, p.Body, `"held":true`)
	f.take()

	req.Held, req.AutoMerge = false, true
	res, err = pr.Restore(ctx, f, req)
	require.NoError(t, err)
	assert.Equal(t, "auto-merge enabled", res.Done)
	assert.Equal(t, held, res.Number, "the same pull request")
	assert.Equal(t, map[string]int{"EnableAutoMerge": 1, "UpdatePR": 1}, f.take(), "no commit, branch move, close or open")
	got := prNumbered(t, f, held)
	assert.Equal(t, pr.StateOpen, got.State)
	assert.Equal(t, p.HeadSHA, got.HeadSHA, "the same commit")
	assert.NotContains(t, got.Body, `"held":true`, "held mark dropped")
	assert.Contains(t, got.Body, "c01 failed")
	ps, err := f.PullRequests("acme", "cluster-a")
	require.NoError(t, err)
	assert.Len(t, ps, 3, "two merged changes and the one restore")

	res, err = pr.Restore(ctx, f, req)
	require.NoError(t, err)
	assert.Equal(t, "already open", res.Done)
	assert.Empty(t, f.take(), "the next run writes nothing")

	_, err = f.EnableAutoMerge(ctx, "acme", "cluster-a", held, pr.AutoMergeRequest{Head: opts.Branch, Base: "main", HeadSHA: s.Base.SHA})
	require.ErrorIs(t, err, pr.ErrRefMoved, "a head other than the one named is refused")
	for _, want := range []string{"acme/cluster-a", "#", "fleetbot/sync", "by hand"} {
		assert.Contains(t, err.Error(), want)
	}
	_, err = f.EnableAutoMerge(ctx, "acme", "cluster-a", first.Number, pr.AutoMergeRequest{Head: opts.Branch, Base: "main", HeadSHA: p.HeadSHA})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "merged pull request")
}

func prNumbered(t *testing.T, f *counting, n int) *pr.PullRequest {
	t.Helper()
	ps, err := f.PullRequests("acme", "cluster-a")
	require.NoError(t, err)
	for _, p := range ps {
		if p.Number == n {
			return p
		}
	}
	require.Failf(t, "no such pull request", "#%d", n)
	return nil
}
