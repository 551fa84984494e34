package webhook

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// writeCounter is a forge counting the pull requests opened per repo.
type writeCounter struct {
	reconcile.Forge
	mu     sync.Mutex
	opened map[string]int
}

func (f *writeCounter) OpenPR(ctx context.Context, owner, repo string, p pr.NewPR) (*pr.PullRequest, error) {
	out, err := f.Forge.OpenPR(ctx, owner, repo, p)
	if err == nil {
		f.mu.Lock()
		f.opened[repo]++
		f.mu.Unlock()
	}
	return out, err
}

func (f *writeCounter) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.opened))
	for k, v := range f.opened {
		out[k] = v
	}
	return out
}

// TestLargeApplyFinishesAcrossSteps: onboarding a fleet larger than a step (105 clusters
// and their workspaces, every target repo new, in steps of 40; the same holds for 1,050 in steps
// of 100, which only takes longer) is not one job racing a deadline: each step applies at most StepRepos repos,
// records them as done and queues the next step at once; a new service (a restart) reading
// the progress file resumes with the repos not done; no repo gets a second pull request; once
// none is pending the closing full apply finds every repo converged and the steps end.
func TestLargeApplyFinishesAcrossSteps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lf, err := local.Open(t.TempDir(), local.Options{Now: func() time.Time { return time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = lf.Close() })
	forge := &writeCounter{Forge: lf, opened: map[string]int{}}
	ctl := &memControl{commits: map[string]fs.FS{}}
	ctl.push(fleetgen.Generate(fleetgen.Options{Clusters: 105, Apps: 2, Seed: 1}))
	clock := &fakeClock{now: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}
	stepsFile := filepath.Join(t.TempDir(), "steps.json")
	const step = 40
	newService := func(q *Queue) *Service {
		svc, err := NewService(ServiceConfig{
			Control: ctl, StepRepos: step, StepsFile: stepsFile, Requeue: q.RetryAt,
			Runner: app.Config{Now: clock.Now, Concurrency: 16}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return forge, nil }),
		})
		require.NoError(t, err)
		return svc
	}
	resync := Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"}

	q := NewQueue(jobqueue.Config{Clock: clock})
	svc := newService(q)
	require.NoError(t, svc.Execute(ctx, resync, nil))
	st := svc.Steps()
	require.True(t, st.Active, "more changed repos than one step: the apply runs in steps")
	total := st.Done + st.Pending
	assert.GreaterOrEqual(t, total, 105, "every cluster repo (and the workspaces') is new")
	require.Greater(t, total, 2*step, "more than two steps of repos")
	assert.Equal(t, step, st.Done, "one step did StepRepos repos")
	assert.Equal(t, step, len(forge.counts()), "and wrote nothing else")
	run := svc.StatusRun()
	require.NotNil(t, run, "the status page shows the apply in steps")
	assert.Len(t, run.Repos, total, "with a row for every repo it covers")
	next := q.Drain()
	require.Len(t, next, 1, "the next step is queued at once")
	assert.Equal(t, ReasonStep, next[0].Reason)

	// The process restarts: a new service and queue; its startup resync resumes the steps.
	q = NewQueue(jobqueue.Config{Clock: clock})
	svc = newService(q)
	require.NoError(t, svc.Execute(ctx, resync, nil))
	st = svc.Steps()
	assert.Equal(t, 2*step, st.Done, "the restart resumed after the repos done")
	assert.Equal(t, total-2*step, st.Pending)
	for j := q.Drain(); len(j) > 0; j = q.Drain() {
		require.NoError(t, svc.Execute(ctx, j[0], nil))
	}
	assert.False(t, svc.Steps().Active, "no repo pending: the closing full apply ended the steps")
	assert.Nil(t, svc.StatusRun())
	counts := forge.counts()
	assert.Len(t, counts, total, "every repo got its pull request")
	for repo, n := range counts {
		require.Equal(t, 1, n, "%s: a repo done is not done again", repo)
	}
	rep := svc.Reports()
	var failed []string
	for _, r := range rep.Repos {
		if r.Result.Err != nil {
			failed = append(failed, r.Result.Repo)
		}
	}
	assert.Empty(t, failed)
	_, err = os.Stat(stepsFile)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the progress file is removed once the steps end")
}

// deferAll is the local forge on which every repo's read is rate-limited until reset.
type deferAll struct {
	*snapshotCounter
	clock *fakeClock
	reset time.Time
}

func (f *deferAll) Snapshot(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*pr.Snapshot, error) {
	if f.clock.Now().Before(f.reset) {
		return nil, report.Classify(errors.New("GET /repos/"+owner+"/"+repo+": 403 API rate limit exceeded"),
			report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonRateLimited, RetryAt: f.reset})
	}
	return f.snapshotCounter.Snapshot(ctx, owner, repo, defaultBranch, botBranch)
}

// TestStepDeferredByARateLimitResumesAtTheReset: when GitHub's rate limit defers every repo of
// a step, the next step is queued for the reset GitHub announced (not at once, not at the next
// resync), each deferred repo is queued again for then, and the status page says when the
// apply resumes.
func TestStepDeferredByARateLimitResumesAtTheReset(t *testing.T) {
	t.Parallel()
	snaps, ctl, _ := localFleet(t)
	clock := &fakeClock{now: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}
	reset := clock.Now().Add(17 * time.Minute)
	fg := &deferAll{snapshotCounter: snaps, clock: clock, reset: reset}
	type queued struct {
		job Job
		at  time.Time
	}
	var got []queued
	svc, err := NewService(ServiceConfig{
		Control: ctl, StepRepos: 2,
		Requeue: func(j Job, at time.Time) { got = append(got, queued{j, at}) },
		Runner:  app.Config{Now: clock.Now}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return fg, nil }),
	})
	require.NoError(t, err)
	_ = svc.Execute(context.Background(), Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"}, nil)
	var step []queued
	drifts := 0
	for _, q := range got {
		switch q.job.Kind {
		case KindApply:
			step = append(step, q)
		case KindDrift:
			drifts++
			assert.Equal(t, reset, q.at, "%s: retried at the reset", q.job.Repo)
		}
	}
	require.Len(t, step, 1, "the next step is queued once")
	assert.Equal(t, ReasonStep, step[0].job.Reason)
	assert.Equal(t, reset, step[0].at, "at the reset GitHub announced")
	assert.Equal(t, 2, drifts, "each repo of the step is queued again for the reset")
	st := svc.Steps()
	assert.Equal(t, reset, st.ResumeAt)
	assert.Equal(t, 2, st.Done)
	require.NotNil(t, svc.StatusRun())
	assert.Equal(t, reset, svc.StatusRun().ResumeAt, "the status page says when the apply resumes")
}
