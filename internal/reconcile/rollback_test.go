package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// mainTree is the tree of repo's default branch on the fake GitHub.
func (r *waveRig) mainTree(repo string) string {
	r.t.Helper()
	b, _, err := r.human.Repositories.GetBranch(context.Background(), "acme", repo, "main", 0)
	require.NoError(r.t, err)
	return b.GetCommit().GetCommit().GetTree().GetSHA()
}

// TestRolloutRollsBackOnTheFakeGitHub: with onFailure: rollback, Flux's failure on the canary
// halts the rollout and fleetbot opens a pull request restoring, on the canary's repo, the tree
// of its last healthy merge; later runs of the failed revision leave that pull request alone and
// open nothing; once it merged the repo holds the healthy tree again, the failed content is not
// proposed again, and the check run says what was rolled back and why. A newer control-repo
// commit is a new rollout.
func TestRolloutRollsBackOnTheFakeGitHub(t *testing.T) {
	t.Parallel()
	r := newWaveRigWith(t, func(r *waveRig) { r.onFailure = control.OnFailureRollback })
	for _, n := range r.fl.names() {
		require.NoError(t, postStatuses(r, "cluster-"+n, "success"), "v1 is healthy everywhere")
	}
	healthy := r.mainTree("cluster-c01")

	r.change("v2")
	r.apply()
	require.Equal(t, []string{"cluster-c01"}, r.opened())
	r.mergeAndReport("cluster-c01", "failure")
	failedTree := r.mainTree("cluster-c01")
	require.NotEqual(t, healthy, failedTree)

	rep := r.apply()
	require.NotNil(t, rep.Rollout.Halted)
	assert.True(t, rep.Rollout.Halted.Rollback)
	rb := rep.Rollout.Rollback
	require.NotNil(t, rb, "the run rolled back")
	assert.Equal(t, "v2", rb.Revision)
	require.Len(t, rb.Restores, 1, "%+v", rb)
	assert.Equal(t, rollout.RestoreStatus{Repo: "cluster-c01", To: "v1", PR: rb.Restores[0].PR, PRURL: rb.Restores[0].PRURL, State: rollout.RestoreOpen}, rb.Restores[0])
	assert.Contains(t, rb.Reason, "c01: Flux reported a failure")
	restore := r.open("cluster-c01")
	require.NotNil(t, restore)
	assert.Equal(t, rb.Restores[0].PR, restore.GetNumber())
	assert.Contains(t, restore.GetTitle(), "roll back cluster c01 to v1")
	head, _, err := r.human.Git.GetCommit(context.Background(), "acme", "cluster-c01", restore.GetHead().GetSHA())
	require.NoError(t, err)
	assert.Equal(t, healthy, head.GetTree().GetSHA(), "the rollback commit carries the last healthy tree")
	cr := rollout.New(r.control(true), r.opts().Now).CheckRun(rep.Rollout)
	assert.Equal(t, rollout.CheckHalted, cr.Conclusion)
	assert.Contains(t, cr.Summary, "**Rolled back** revision `v2` because c01: Flux reported a failure")
	assert.Contains(t, cr.Summary, "| cluster-c01 | `v1` | #")
	assert.Equal(t, []string{"cluster-c01"}, r.opened(), "no other wave opens")

	// The same revision again (a restarted service, a resync): the rollback pull request is
	// neither updated nor closed, nothing else opens.
	r.restart()
	rep = r.apply()
	require.NotNil(t, rep.Rollout.Halted)
	assert.True(t, rep.Rollout.Halted.RolledBack, "the revision repeats the rolled-back failure")
	assert.Equal(t, "rolled-back", byRepo(rep)["cluster-c01"].Word())
	again := r.open("cluster-c01")
	require.NotNil(t, again)
	assert.Equal(t, restore.GetNumber(), again.GetNumber())
	assert.Equal(t, restore.GetHead().GetSHA(), again.GetHead().GetSHA())
	assert.Equal(t, []string{"cluster-c01"}, r.opened())

	// Merged and reported healthy: the canary is back on v1's tree and stays there.
	r.mergeAndReport("cluster-c01", "success")
	assert.Equal(t, healthy, r.mainTree("cluster-c01"))
	rep = r.apply()
	assert.Empty(t, r.opened(), "the failed content is not proposed again")
	require.NotNil(t, rep.Rollout.Rollback)
	require.Len(t, rep.Rollout.Rollback.Restores, 1)
	assert.Equal(t, rollout.RestoreHealthy, rep.Rollout.Rollback.Restores[0].State)
	assert.Contains(t, rep.Rollout.Halted.Reason, "revision v2 failed and was rolled back")

	// A newer control-repo commit is a new rollout: the canary first.
	r.change("v3")
	r.apply()
	assert.Equal(t, []string{"cluster-c01"}, r.opened())
	assert.NotContains(t, r.open("cluster-c01").GetTitle(), "roll back")
}

// TestRolloutRollsBackOnTheLocalForge: the same on the local forge with an injected clock:
// Flux fails the canary's merge, the canary wave (budget 0) halts and the repo it reached gets
// a rollback commit of its last healthy tree; hours later the failed revision still opens
// nothing, and once the rollback merged the default branch holds the healthy tree again.
func TestRolloutRollsBackOnTheLocalForge(t *testing.T) {
	t.Parallel()
	requireGit(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := func() time.Time { return now }
	dir := t.TempDir()
	f, err := local.Open(dir, local.Options{Now: func() time.Time { return clk() }, LockTimeout: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	r := &waveRig{t: t, fl: fleet{"c01": "v1", "c02": "v1", "c03": "v1", "c04": "v1", "c05": "v1"}, rev: "v1", onFailure: control.OnFailureRollback}
	ctx := context.Background()
	run := func(waves bool) *Report {
		t.Helper()
		rep, err := Apply(ctx, f, r.control(waves), r.fl.targets(), Options{Concurrency: 2, Now: clk, Source: r.rev})
		require.NoError(t, err)
		return rep
	}
	openPR := func(repo string) *pr.PullRequest {
		ps, err := f.PullRequests("acme", repo)
		require.NoError(t, err)
		for _, p := range ps {
			if p.State == pr.StateOpen {
				return p
			}
		}
		return nil
	}
	mergeOpen := func(repo, state string) string {
		t.Helper()
		p := openPR(repo)
		require.NotNil(t, p, repo)
		require.NoError(t, f.Merge(ctx, "acme", repo, p.Number, local.MergeCommit))
		refs, err := f.Refs("acme", repo)
		require.NoError(t, err)
		require.NoError(t, f.SetStatus("acme", repo, refs["main"], "kustomization/platform/1", state))
		return refs["main"]
	}
	for _, res := range run(false).Results {
		mergeOpen(res.Repo[len("acme/"):], "success")
	}
	healthyHead, err := f.Refs("acme", "cluster-c01")
	require.NoError(t, err)
	healthy, err := f.Snapshot(ctx, "acme", "cluster-c01", "main", "fleetbot/sync")
	require.NoError(t, err)

	r.change("v2")
	run(true)
	mergeOpen("cluster-c01", "failure")
	rep := run(true)
	require.NotNil(t, rep.Rollout.Rollback)
	require.Len(t, rep.Rollout.Rollback.Restores, 1)
	assert.Equal(t, rollout.RestoreOpen, rep.Rollout.Rollback.Restores[0].State)
	restore := openPR("cluster-c01")
	require.NotNil(t, restore)
	rev, failed := pr.RollbackOf(restore.Body)
	assert.Equal(t, "v2", rev)
	assert.NotEmpty(t, failed)

	now = now.Add(2 * time.Hour)
	rep = run(true)
	assert.True(t, rep.Rollout.Halted.RolledBack)
	assert.Equal(t, restore.Number, openPR("cluster-c01").Number, "left alone")

	// A human commit on the rollback's branch is never discarded: the restore is reported
	// blocked until a human decides, and nothing is written.
	refs, err := f.Refs("acme", "cluster-c01")
	require.NoError(t, err)
	botHead := refs["fleetbot/sync"]
	human := humanPush(t, dir, "cluster-c01", "fleetbot/sync", func(wt string) { writeFile(t, wt, "apps/extra.yaml", "kind: ConfigMap\n") })
	rep = run(true)
	require.Len(t, rep.Rollout.Rollback.Restores, 1)
	assert.Equal(t, rollout.RestoreError, rep.Rollout.Rollback.Restores[0].State)
	assert.Contains(t, rep.Rollout.Rollback.Restores[0].Reason, "rollback blocked")
	refs, err = f.Refs("acme", "cluster-c01")
	require.NoError(t, err)
	assert.Equal(t, human, refs["fleetbot/sync"], "the human's commit stays")
	require.NoError(t, f.SetBranch(ctx, "acme", "cluster-c01", "fleetbot/sync", botHead, human)) // the human takes it back
	mergeOpen("cluster-c01", "success")
	rep = run(true)
	assert.Nil(t, openPR("cluster-c01"), "the failed content is not proposed again")
	assert.Equal(t, rollout.RestoreHealthy, rep.Rollout.Rollback.Restores[0].State)
	assert.Nil(t, openPR("cluster-c02"), "no later wave starts")

	// The restored default branch has the healthy merge's tree.
	refs, err = f.Refs("acme", "cluster-c01")
	require.NoError(t, err)
	assert.NotEqual(t, healthyHead["main"], refs["main"], "restored by a new commit, not by moving the branch back")
	snap, err := f.Snapshot(ctx, "acme", "cluster-c01", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, healthy.Base.Tree, snap.Base.Tree, "v1's healthy tree is back")
}

// TestRolloutRollsBackByHand: `fleetbot rollout rollback` (the control repo's
// rollout/rollback.yaml for its content) makes the next apply restore every repo whose newest
// merge carries that content, healthy or not, and open nothing new for it.
func TestRolloutRollsBackByHand(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	for _, n := range r.fl.names() {
		require.NoError(t, postStatuses(r, "cluster-"+n, "success"))
	}
	healthy := r.mainTree("cluster-c01")
	r.change("v2")
	r.apply()
	r.mergeAndReport("cluster-c01", "success")

	ctl := r.control(true)
	ctl.Digest = "sha256:" + strings.Repeat("ab", 32)
	ctl.Rollback = &control.RolloutRecord{Digest: ctl.Digest, Note: "bad release"}
	rep, err := Apply(context.Background(), r.forge, ctl, r.targets(), r.opts())
	require.NoError(t, err)
	require.NotNil(t, rep.Rollout.Halted)
	assert.True(t, rep.Rollout.Halted.RolledBack)
	require.NotNil(t, rep.Rollout.Rollback)
	require.Len(t, rep.Rollout.Rollback.Restores, 1)
	assert.Equal(t, "cluster-c01", rep.Rollout.Rollback.Restores[0].Repo)
	assert.Contains(t, rep.Rollout.Rollback.Reason, "bad release")
	p := r.open("cluster-c01")
	require.NotNil(t, p)
	head, _, err := r.human.Git.GetCommit(context.Background(), "acme", "cluster-c01", p.GetHead().GetSHA())
	require.NoError(t, err)
	assert.Equal(t, healthy, head.GetTree().GetSHA())
	assert.Equal(t, []string{"cluster-c01"}, r.opened(), "nothing else opens for the rolled-back content")
}
