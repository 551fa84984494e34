package reconcile

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// panickyForge is the local forge with a bug planted in one repo's
// snapshot and another repo's commit.
type panickyForge struct {
	*local.Forge
}

func (p panickyForge) Snapshot(ctx context.Context, owner, repo, def, bot string) (*pr.Snapshot, error) {
	if repo == "cluster-b" {
		panic("planted snapshot bug")
	}
	return p.Forge.Snapshot(ctx, owner, repo, def, bot)
}

func (p panickyForge) Commit(ctx context.Context, owner, repo string, c pr.NewCommit) (pr.Commit, error) {
	if repo == "cluster-c" {
		panic("planted commit bug")
	}
	return p.Forge.Commit(ctx, owner, repo, c)
}

// TestPanicFailsOnlyItsRepo: a bug hit while planning or applying one repo
// fails that repo with an error; the run, the other repos and (in serve)
// the process carry on.
func TestPanicFailsOnlyItsRepo(t *testing.T) {
	t.Parallel()
	f := panickyForge{openForge(t, t.TempDir())}
	fl := fleet{"a": "1", "b": "1", "c": "1"}
	rep, err := Apply(context.Background(), f, fl.repo(), fl.targets(), Options{Now: clock()})
	require.ErrorIs(t, err, ErrFailed)
	res := byRepo(rep)
	assert.NoError(t, res["cluster-a"].Err, "the healthy repo is reconciled")
	assert.Equal(t, pr.ActionCreate, res["cluster-a"].Action)
	require.Error(t, res["cluster-b"].Err)
	assert.Contains(t, res["cluster-b"].Err.Error(), "planted snapshot bug")
	require.Error(t, res["cluster-c"].Err)
	assert.Contains(t, res["cluster-c"].Err.Error(), "planted commit bug")
}
