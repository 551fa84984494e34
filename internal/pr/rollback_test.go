package pr

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecideLeavesARollbackAlone: while the desired tree is the very tree a rollback took away
// (its pull request open or merged), Decide writes nothing: the rollback pull request is neither
// updated nor closed, and no pull request reproposes the failed content. A desired tree that
// differs is a new rollout, decided as usual; a closed rollback pull request no longer counts.
func TestDecideLeavesARollbackAlone(t *testing.T) {
	stale := with(synced(), "platform/m.yaml", "kind: Old\n")
	failed := syncedTree(t)
	for _, state := range []string{StateOpen, StateMerged} {
		s := snapshot(t, stale)
		s.Bot = &Commit{SHA: botSHA, Tree: hashOf(t, listingOf(stale)), Parents: []string{baseSHA}}
		s.PR = openPR(marker{Head: botSHA, Base: baseSHA, Source: "good", Rollback: "bad", Failed: failed})
		s.PR.State = state
		d, err := Decide(s, target(), Options{Source: "bad"})
		require.NoError(t, err)
		assert.Equal(t, ActionRolledBack, d.Action, state)
		assert.False(t, d.Writes(), state)
		assert.False(t, d.Action.Writes(), "%s: counts as no change", state)
		assert.Contains(t, d.Reason, "revision bad failed", state)
	}
	s := snapshot(t, stale)
	s.PR = openPR(marker{Head: botSHA, Base: baseSHA, Source: "good", Rollback: "bad", Failed: "another-tree"})
	s.PR.State = StateMerged
	d, err := Decide(s, target(), Options{Source: "fix"})
	require.NoError(t, err)
	assert.Equal(t, ActionOpen, d.Action, "a control-repo change renders another tree: a new rollout")

	s.PR = openPR(marker{Head: botSHA, Base: baseSHA, Source: "good", Rollback: "bad", Failed: failed})
	s.PR.State = StateClosed
	d, err = Decide(s, target(), Options{Source: "bad"})
	require.NoError(t, err)
	assert.Equal(t, ActionOpen, d.Action, "a closed rollback pull request no longer keeps the content out")

	rev, tree := RollbackOf(openPR(marker{Rollback: "bad", Failed: failed}).Body)
	assert.Equal(t, "bad", rev)
	assert.Equal(t, failed, tree)
	rev, _ = RollbackOf("no marker")
	assert.Empty(t, rev)
}
