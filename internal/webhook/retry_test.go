package webhook

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// rateLimited is the local forge on which reading one repo is rate-limited until reset, by
// the test's clock, as GitHub's forge says it (a deferred error until the reset it announced).
type rateLimited struct {
	*snapshotCounter
	clock *fakeClock
	repo  string
	reset time.Time
}

func (f *rateLimited) Snapshot(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*pr.Snapshot, error) {
	if repo == f.repo && f.clock.Now().Before(f.reset) {
		return nil, report.Classify(errors.New("GET /repos/"+owner+"/"+repo+": 403 API rate limit exceeded"),
			report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonRateLimited, RetryAt: f.reset})
	}
	return f.snapshotCounter.Snapshot(ctx, owner, repo, defaultBranch, botBranch)
}

// TestRateLimitedRepoIsRetriedAtItsReset: a repo the apply could not read because GitHub's rate
// limit was spent is queued again for the reset GitHub announced, and runs then (a drift of
// that repo), not at the next resync; nothing runs before.
func TestRateLimitedRepoIsRetriedAtItsReset(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	snaps, ctl, sha := localFleet(t)
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: start}
	reset := start.Add(17 * time.Minute)
	fg := &rateLimited{snapshotCounter: snaps, clock: clock, repo: "cluster-edge-1", reset: reset}
	q := NewQueue(jobqueue.Config{Clock: clock})
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		Requeue: q.RetryAt,
		Runner:  app.Config{Now: clock.Now}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return fg, nil }),
	})
	require.NoError(t, err)

	_ = svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: sha, Reason: "resync"}, nil)
	require.NotContains(t, snaps.take(), "cluster-edge-1", "its read was refused")
	rep := svc.Reports()
	var deferred []string
	for _, r := range rep.Repos {
		if r.Result.Deferred() {
			deferred = append(deferred, r.Result.Repo)
		}
	}
	require.Equal(t, []string{"acme/cluster-edge-1"}, deferred, "the rate-limited repo is deferred, the others converge")
	assert.Zero(t, q.Len(), "nothing runs before the reset")
	assert.Equal(t, 1, q.Later())
	assert.Contains(t, clock.pending(), reset, "a wake-up at the reset GitHub announced")

	clock.Advance(reset.Sub(start) - time.Second)
	assert.Zero(t, q.Len(), "a second before the reset, still nothing")

	clock.Advance(time.Second)
	require.Equal(t, 1, q.Len(), "at the reset, the repo is queued again")
	assert.Zero(t, q.Later())
	ctx2, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	j, err := q.Next(ctx2)
	require.NoError(t, err)
	assert.Equal(t, KindDrift, j.Kind)
	assert.Equal(t, "acme/cluster-edge-1", j.Repo)
	assert.Equal(t, "retry."+report.ReasonRateLimited, j.Reason)
	assert.Equal(t, reset, j.Queued)
	require.NoError(t, svc.Execute(ctx, j, nil), "after the reset the repo converges")
	q.Done(j.Key())
	assert.Equal(t, []string{"cluster-edge-1"}, snaps.take(), "the retry reads that repo only")
	assert.Zero(t, q.Later(), "nothing more to retry")
}

// TestQueueRetryAt: a job held for a time is pushed then, once per key at the earliest time
// asked; it takes no room in the queue until then; Drain hands it back and cancels its wake-up.
func TestQueueRetryAt(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: start}
	q := NewQueue(jobqueue.Config{Capacity: 1, Clock: clock})
	a := Job{Kind: KindDrift, Repo: "acme/a", Reason: "retry.RateLimited"}
	q.RetryAt(a, start.Add(time.Hour))
	q.RetryAt(a, start.Add(10*time.Minute)) // earlier: replaces
	q.RetryAt(a, start.Add(30*time.Minute)) // later: ignored
	assert.Equal(t, 1, q.Later())
	_, err := q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
	require.NoError(t, err, "a held job takes no room in the queue")

	clock.Advance(10 * time.Minute)
	assert.Zero(t, q.Later())
	assert.Equal(t, 1, q.Len(), "the queue is full (capacity 1): the retry is refused as a delivery would be; the resync catches up")

	q.RetryAt(Job{Kind: KindDrift, Repo: "acme/c"}, start.Add(time.Hour))
	left := q.Drain()
	require.Len(t, left, 2)
	assert.Equal(t, "acme/c", left[1].Repo, "held jobs are handed back too")
	assert.Empty(t, clock.pending(), "their wake-up is cancelled")
	clock.Advance(time.Hour)
	assert.Zero(t, q.Len())

	// A time already past pushes at once (on the clock's next turn).
	q2 := NewQueue(jobqueue.Config{Clock: clock})
	q2.RetryAt(Job{Kind: KindDrift, Repo: "acme/d"}, start)
	clock.Advance(0)
	assert.Equal(t, 1, q2.Len())
}
