package reconcile

import (
	"context"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// failCanary rolls v2 out to the canary (merge: auto) and has Flux fail it there: the next
// apply rolls back. It returns the tree of c01's last healthy merge.
func failCanary(t *testing.T, r *waveRig) string {
	t.Helper()
	for _, n := range r.fl.names() {
		require.NoError(t, postStatuses(r, "cluster-"+n, "success"), "v1 is healthy everywhere")
	}
	healthy := r.mainTree("cluster-c01")
	r.change("v2")
	r.apply()
	require.Equal(t, []string{"cluster-c01"}, r.opened())
	r.mergeAndReport("cluster-c01", "failure")
	return healthy
}

// restoreOf is the one restore of a run that rolled back.
func restoreOf(t *testing.T, rep *Report) rollout.RestoreStatus {
	t.Helper()
	require.NotNil(t, rep.Rollout.Rollback, "the run rolls back")
	require.Len(t, rep.Rollout.Rollback.Restores, 1, "%+v", rep.Rollout.Rollback)
	return rep.Rollout.Rollback.Restores[0]
}

// TestRestoreOpensButDoesNotMergeWhilePaused: a rollback is a remedy, so its restore pull
// request opens while the rollout is paused, for a human to see and merge; but a pause stops
// every merge fleetbot would make (Status.MergesAllowed, the gate's one rule), so it is not set
// to auto-merge although its wave merges automatically, and the restore says so. A later run
// still paused leaves it as it is; resumed, the held restore is replaced by one of the same
// commit set to auto-merge (on the fake GitHub, whose protection asks nothing, it merges at
// once), and nothing else opens.
func TestRestoreOpensButDoesNotMergeWhilePaused(t *testing.T) {
	t.Parallel()
	r := newWaveRigWith(t, func(r *waveRig) { r.onFailure, r.autoCanary = control.OnFailureRollback, true })
	healthy := failCanary(t, r)

	r.paused = &control.Pause{Reason: "investigating"}
	rep := r.apply()
	s := restoreOf(t, rep)
	assert.Equal(t, rollout.RestoreOpen, s.State)
	assert.Contains(t, s.Reason, "rollout is paused: investigating")
	assert.Contains(t, s.Reason, "merge it by hand")
	p := r.open("cluster-c01")
	require.NotNil(t, p, "the restore opens while paused")
	assert.Equal(t, s.PR, p.GetNumber())
	assert.Nil(t, p.GetAutoMerge(), "no auto-merge while paused")
	head, _, err := r.human.Git.GetCommit(context.Background(), "acme", "cluster-c01", p.GetHead().GetSHA())
	require.NoError(t, err)
	assert.Equal(t, healthy, head.GetTree().GetSHA())
	assert.NotEqual(t, healthy, r.mainTree("cluster-c01"), "nothing merged")
	assert.Equal(t, []string{"cluster-c01"}, r.opened())

	rep = r.apply()
	s = restoreOf(t, rep)
	assert.Equal(t, p.GetNumber(), s.PR, "still paused: left as it is")
	assert.Contains(t, s.Reason, "rollout is paused")

	r.paused = nil
	rep = r.apply()
	s = restoreOf(t, rep)
	assert.NotEqual(t, p.GetNumber(), s.PR, "replaced")
	assert.Empty(t, s.Reason)
	var held, released *gh.PullRequest
	for _, q := range r.srv.Pulls("acme", "cluster-c01") {
		switch q.GetNumber() {
		case p.GetNumber():
			held = q
		case s.PR:
			released = q
		}
	}
	require.NotNil(t, held)
	require.NotNil(t, released)
	assert.Equal(t, "closed", held.GetState())
	assert.False(t, held.GetMerged())
	assert.Equal(t, p.GetHead().GetSHA(), released.GetHead().GetSHA(), "the same commit")
	assert.True(t, released.GetAutoMerge() != nil || released.GetMerged(), "set to auto-merge (or merged at once)")
	if released.GetMerged() {
		assert.Equal(t, healthy, r.mainTree("cluster-c01"), "restored")
	}
	for _, n := range []string{"c02", "c03", "c04", "c05"} {
		assert.Nil(t, r.open("cluster-"+n), "no later wave opens")
	}
}

// TestRestoreOpensButDoesNotMergeInADenyWindow: the same rule for the change windows: inside a
// deny window (a freeze) the restore opens, is not set to auto-merge, and says until when
// nothing merges; once the windows are open the restore of the next rollback auto-merges.
func TestRestoreOpensButDoesNotMergeInADenyWindow(t *testing.T) {
	t.Parallel()
	r := newWaveRigWith(t, func(r *waveRig) { r.onFailure, r.autoCanary = control.OnFailureRollback, true })
	healthy := failCanary(t, r)

	// The rig's clock is 12:00 UTC: a freeze from 11:00 for 4h covers it.
	r.windows = []control.ChangeWindow{{Kind: "deny", Start: "11:00", Duration: "4h"}}
	rep := r.apply()
	s := restoreOf(t, rep)
	assert.Equal(t, rollout.RestoreOpen, s.State)
	assert.Contains(t, s.Reason, "change windows")
	p := r.open("cluster-c01")
	require.NotNil(t, p, "the restore opens inside a deny window")
	assert.Nil(t, p.GetAutoMerge(), "no auto-merge inside a deny window")
	assert.NotEqual(t, healthy, r.mainTree("cluster-c01"), "nothing merged")
}

// TestRestoreAutoMergesWhenMergesAreAllowed: outside any pause or window, a restore of a wave
// that merges automatically is set to auto-merge (on the fake GitHub, whose protection asks
// nothing, it merges at once).
func TestRestoreAutoMergesWhenMergesAreAllowed(t *testing.T) {
	t.Parallel()
	r := newWaveRigWith(t, func(r *waveRig) { r.onFailure, r.autoCanary = control.OnFailureRollback, true })
	healthy := failCanary(t, r)
	r.windows = []control.ChangeWindow{{Kind: "allow", Start: "11:00", Duration: "4h"}}
	rep := r.apply()
	s := restoreOf(t, rep)
	assert.Empty(t, s.Reason)
	var restore *gh.PullRequest
	for _, p := range r.srv.Pulls("acme", "cluster-c01") {
		if p.GetNumber() == s.PR {
			restore = p
		}
	}
	require.NotNil(t, restore)
	assert.True(t, restore.GetAutoMerge() != nil || restore.GetMerged(), "set to auto-merge (or merged at once)")
	if restore.GetMerged() {
		assert.Equal(t, healthy, r.mainTree("cluster-c01"))
	}
}

// TestClosedRollbackIsLeftToAHuman: a human closes the rollback pull request without merging
// it. fleetbot respects that: the next runs (a restart included) neither reopen it nor open a
// new one, the failed revision stays halted (no later wave starts, nothing new opens), and the
// restore is reported closed, needing a human, with what to do. A newer control-repo commit is
// a new rollout.
func TestClosedRollbackIsLeftToAHuman(t *testing.T) {
	t.Parallel()
	r := newWaveRigWith(t, func(r *waveRig) { r.onFailure = control.OnFailureRollback })
	failCanary(t, r)
	rep := r.apply()
	s := restoreOf(t, rep)
	require.Equal(t, rollout.RestoreOpen, s.State)
	assert.Equal(t, "c01: Flux reported a failure for the merge of #2 (failing there: Kustomization apps (the cluster's apps), Kustomization platform)",
		rep.Rollout.Rollback.Reason, "the rollback names what failed")
	_, _, err := r.human.PullRequests.Edit(context.Background(), "acme", "cluster-c01", s.PR, &gh.PullRequest{State: gh.String("closed")})
	require.NoError(t, err)
	pulls, closed := len(r.srv.Pulls("acme", "cluster-c01")), s.PR

	for _, restart := range []bool{false, true} {
		if restart {
			r.restart()
		}
		rep = r.apply()
		require.NotNil(t, rep.Rollout.Halted)
		assert.True(t, rep.Rollout.Halted.Rollback || rep.Rollout.Halted.RolledBack, "the failed revision stays halted: %+v", rep.Rollout.Halted)
		s = restoreOf(t, rep)
		assert.Equal(t, rollout.RestoreClosed, s.State)
		assert.Equal(t, closed, s.PR, "the closed pull request is named")
		assert.Contains(t, s.Reason, "closed without merging")
		assert.Contains(t, s.Reason, "revert or fix")
		assert.Empty(t, r.opened(), "neither reopened nor recreated, and no later wave opens")
		assert.Len(t, r.srv.Pulls("acme", "cluster-c01"), pulls, "no new pull request")
		assert.False(t, rep.Rollout.Rollback.Restored())
		cr := rollout.New(r.control(true), r.opts().Now).CheckRun(rep.Rollout)
		assert.Contains(t, cr.Summary, "closed")
	}

	r.change("v3")
	r.apply()
	assert.Equal(t, []string{"cluster-c01"}, r.opened(), "a newer revision is a new rollout")
	assert.NotContains(t, r.open("cluster-c01").GetTitle(), "roll back")
}
