package webhook

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// fakePending is the control repo's open pull requests and the newest fleetbot check run of
// each head, as GitHub would list them; it counts the check-run reads.
type fakePending struct {
	mu     sync.Mutex
	pulls  []OpenPullRequest
	checks map[string]CheckState
	reads  int
}

func (p *fakePending) OpenPullRequests(context.Context) ([]OpenPullRequest, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]OpenPullRequest(nil), p.pulls...), nil
}

func (p *fakePending) LatestCheck(_ context.Context, sha string) (CheckState, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reads++
	st, ok := p.checks[sha]
	return st, ok, nil
}

// recoverEnv is a fresh service (a new process) over a control repo with one open pull request.
type recoverEnv struct {
	svc     *Service
	checks  *fakeChecks
	pending *fakePending
	clock   *fakeClock
	head    string
}

func newRecoverEnv(t *testing.T) *recoverEnv {
	t.Helper()
	snaps, ctl, base := localFleet(t)
	head := ctl.push(edit(t, readControl(t), "clusters/edge-2.yaml", "", newCluster))
	e := &recoverEnv{checks: &fakeChecks{}, clock: &fakeClock{now: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}, head: head,
		pending: &fakePending{pulls: []OpenPullRequest{{Number: 7, Head: head, Base: base, Author: "alice"}}, checks: map[string]CheckState{}}}
	var err error
	e.svc, err = NewService(ServiceConfig{
		Control: ctl, Checks: e.checks, Pending: e.pending,
		Runner: app.Config{Now: e.clock.Now}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return snaps, nil }),
	})
	require.NoError(t, err)
	return e
}

// resync runs one resync of a fresh queue (as a restarted process's first one) with the
// service's recovery and returns the check jobs it queued, the apply aside.
func (e *recoverEnv) resync(t *testing.T) []Job {
	t.Helper()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	ctx, cancel := context.WithCancel(context.Background())
	(&Resync{Queue: q, Control: "acme/control", Interval: time.Hour,
		Recover: func(ctx context.Context) ([]Job, error) { return e.svc.RecoverChecks(ctx, "acme/control") }}).Run(ctx, cancel)
	var checks []Job
	for _, j := range q.Drain() {
		if j.Kind == KindCheck {
			checks = append(checks, j)
		}
	}
	return checks
}

// TestResyncCreatesTheCheckOfADeliveryLostWithItsProcess: serve acknowledged a pull_request
// delivery and was killed before its check job ran: GitHub shows the head with no fleetbot
// check run. The first resync of the next process queues the check of that head, which then
// completes on it; once seen completed, the head costs no more check-run reads.
func TestResyncCreatesTheCheckOfADeliveryLostWithItsProcess(t *testing.T) {
	t.Parallel()
	e := newRecoverEnv(t)
	jobs := e.resync(t)
	require.Len(t, jobs, 1, "the open pull request without a check")
	j := jobs[0]
	assert.Equal(t, Job{Kind: KindCheck, Repo: "acme/control", SHA: e.head, PR: 7, Base: j.Base, Author: "alice",
		Reason: ReasonRecoverMissing, Queued: e.clock.Now()}, j)
	assert.Zero(t, j.CheckRun, "a check run of its own")

	require.NoError(t, e.svc.Execute(context.Background(), j, nil))
	run := e.checks.last(t)
	assert.Equal(t, e.head, run.sha, "the check run is on the pull request's head")
	assert.Equal(t, checkrun.ConclusionSuccess, run.res.Conclusion)

	reads := e.pending.reads
	assert.Empty(t, e.resync(t), "the check this service completed is not queued again")
	assert.Equal(t, reads, e.pending.reads, "a head seen completed costs no check-run read")
}

// TestResyncResumesACheckStuckInProgress: a process killed during a check job left its check
// run in_progress. A resync within the bound leaves it (a job may still be running it); past
// the bound it queues the check with that run, and the job completes that run instead of
// starting another. A completed check is never queued.
func TestResyncResumesACheckStuckInProgress(t *testing.T) {
	t.Parallel()
	e := newRecoverEnv(t)
	started := e.clock.Now()
	e.pending.checks[e.head] = CheckState{ID: 41, Status: "in_progress", StartedAt: started}
	e.checks.runs, e.checks.next = map[int64]*recordedCheck{41: {sha: e.head}}, 41

	e.clock.now = started.Add(DefaultStuckCheck - time.Second)
	assert.Empty(t, e.resync(t), "within the bound: possibly still running")

	e.clock.now = started.Add(DefaultStuckCheck + time.Second)
	jobs := e.resync(t)
	require.Len(t, jobs, 1)
	assert.Equal(t, ReasonRecoverStuck, jobs[0].Reason)
	assert.Equal(t, int64(41), jobs[0].CheckRun, "the stuck run is the one to complete")
	require.NoError(t, e.svc.Execute(context.Background(), jobs[0], nil))
	assert.Equal(t, int64(41), e.checks.next, "no second check run was started")
	assert.Equal(t, checkrun.ConclusionSuccess, e.checks.runs[41].res.Conclusion, "the stuck run is completed")

	// The same head's delivery arriving meanwhile coalesces without losing the run to complete.
	assert.Equal(t, int64(41), jobs[0].merge(Job{Kind: KindCheck, Repo: "acme/control", SHA: e.head, PR: 7}).CheckRun)
	assert.Zero(t, jobs[0].merge(Job{Kind: KindCheck, Repo: "acme/control", SHA: "other", PR: 7}).CheckRun,
		"a newer head starts its own run")

	e2 := newRecoverEnv(t)
	e2.pending.checks[e2.head] = CheckState{ID: 5, Status: "completed", StartedAt: started}
	e2.clock.now = started.Add(24 * time.Hour)
	assert.Empty(t, e2.resync(t), "a completed check is never run again by a resync")
}

// TestResyncWithoutPendingChecksQueuesTheApplyOnly: without the reader (tests, the CLI's own
// services) a resync queues its apply as before.
func TestResyncWithoutPendingChecksQueuesTheApplyOnly(t *testing.T) {
	t.Parallel()
	e := newRecoverEnv(t)
	e.svc.cfg.Pending = nil
	assert.Empty(t, e.resync(t))
}
