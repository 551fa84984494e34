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
// still paused leaves it as it is; resumed, fleetbot enables auto-merge on that same pull
// request (on the fake GitHub, whose protection asks nothing, it merges at once) and drops its
// held mark: nothing is closed, opened or committed, and nothing else opens.
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
	assert.Contains(t, p.GetBody(), `"held":true`, "marked held")
	head, _, err := r.human.Git.GetCommit(context.Background(), "acme", "cluster-c01", p.GetHead().GetSHA())
	require.NoError(t, err)
	assert.Equal(t, healthy, head.GetTree().GetSHA())
	assert.NotEqual(t, healthy, r.mainTree("cluster-c01"), "nothing merged")
	assert.Equal(t, []string{"cluster-c01"}, r.opened())

	rep = r.apply()
	s = restoreOf(t, rep)
	assert.Equal(t, p.GetNumber(), s.PR, "still paused: left as it is")
	assert.Contains(t, s.Reason, "rollout is paused")

	assertReleasedInPlace(t, r, p, healthy, func() { r.paused = nil })
	for _, n := range []string{"c02", "c03", "c04", "c05"} {
		assert.Nil(t, r.open("cluster-"+n), "no later wave opens")
	}
}

// assertReleasedInPlace lets fleetbot merge again (allow) and checks that the next run set the
// held restore p to auto-merge in place: the same pull request, on the same commit, auto-merge
// enabled (or merged at once, restoring healthy), its held mark gone, no other pull request
// opened or closed, and no comment.
func assertReleasedInPlace(t *testing.T, r *waveRig, p *gh.PullRequest, healthy string, allow func()) {
	t.Helper()
	closedUnmerged := func(pulls []*gh.PullRequest) (n int) {
		for _, q := range pulls {
			if q.GetState() == "closed" && !q.GetMerged() {
				n++
			}
		}
		return n
	}
	before := r.srv.Pulls("acme", "cluster-c01")
	allow()
	rep := r.apply()
	s := restoreOf(t, rep)
	assert.Equal(t, p.GetNumber(), s.PR, "the same pull request")
	assert.Empty(t, s.Reason)
	pulls := r.srv.Pulls("acme", "cluster-c01")
	assert.Len(t, pulls, len(before), "no pull request opened")
	assert.Equal(t, closedUnmerged(before), closedUnmerged(pulls), "no pull request closed")
	var released *gh.PullRequest
	for _, q := range pulls {
		if q.GetNumber() == p.GetNumber() {
			released = q
		}
	}
	require.NotNil(t, released)
	assert.Equal(t, p.GetHead().GetSHA(), released.GetHead().GetSHA(), "the same commit, nothing committed again")
	assert.Equal(t, p.GetHead().GetSHA(), r.srv.Branch("acme", "cluster-c01", p.GetHead().GetRef()), "the bot branch did not move")
	assert.Empty(t, r.srv.Comments("acme", "cluster-c01", p.GetNumber()), "no comment")
	if released.GetMerged() {
		assert.Equal(t, rollout.RestoreMerged, s.State)
		assert.Equal(t, healthy, r.mainTree("cluster-c01"), "restored")
	} else {
		assert.Equal(t, rollout.RestoreOpen, s.State)
		assert.NotNil(t, released.GetAutoMerge(), "set to auto-merge")
		assert.NotContains(t, released.GetBody(), `"held":true`, "held mark dropped")
	}
}

// TestRestoreOpensButDoesNotMergeInADenyWindow: the same rule for the change windows: inside a
// deny window (a freeze) the restore opens, is not set to auto-merge, and says until when
// nothing merges; once the windows are open the same restore pull request is set to
// auto-merge.
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

	assertReleasedInPlace(t, r, p, healthy, func() { r.windows = []control.ChangeWindow{{Kind: "allow", Start: "11:00", Duration: "4h"}} })
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
