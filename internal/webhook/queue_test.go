package webhook

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func next(t *testing.T, q *Queue) Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	j, err := q.Next(ctx)
	require.NoError(t, err)
	return j
}

func noNext(t *testing.T, q *Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	j, err := q.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no job should be runnable, got %+v", j)
}

func TestQueueCoalescesPerKeyOnTheNewestCommit(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	for i := range 10 {
		c, err := q.Push(Job{Kind: KindApply, Repo: "acme/control", SHA: fmt.Sprintf("sha%d", i), Delivery: fmt.Sprint(i), Queued: t0.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
		assert.Equal(t, i > 0, c, "push %d", i)
	}
	for i := range 3 {
		_, err := q.Push(Job{Kind: KindCheck, Repo: "acme/control", PR: 7, SHA: fmt.Sprintf("head%d", i)})
		require.NoError(t, err)
	}
	assert.Equal(t, 2, q.Len(), "one apply, one check of PR 7")

	j := next(t, q)
	assert.Equal(t, KindApply, j.Kind)
	assert.Equal(t, "sha9", j.SHA, "newest commit")
	assert.Equal(t, "9", j.Delivery, "newest delivery")
	assert.Equal(t, t0, j.Queued, "first delivery's time, for latency")
	assert.Equal(t, 9, j.Merged)
	j2 := next(t, q)
	assert.Equal(t, "head2", j2.SHA)
	q.Done(j.Key())
	q.Done(j2.Key())
	assert.Zero(t, q.Len())
}

func TestQueueIsBoundedAndNeverBlocks(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 2})
	_, err := q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	require.NoError(t, err)
	_, err = q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
	require.NoError(t, err)
	// Push on a full queue returns at once (a blocking Push is caught by go test's -timeout,
	// not by a wall-clock bound that a loaded machine could miss).
	_, err = q.Push(Job{Kind: KindDrift, Repo: "acme/c"})
	require.ErrorIs(t, err, jobqueue.ErrFull)
	c, err := q.Push(Job{Kind: KindDrift, Repo: "ACME/a"})
	require.NoError(t, err, "a full queue still coalesces")
	assert.True(t, c)
}

func TestQueueNeverRunsAKeyTwiceAtOnce(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a", Reason: "first"})
	j := next(t, q)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a", Reason: "while running"})
	assert.Equal(t, 1, q.Len())
	noNext(t, q)
	q.Done(j.Key())
	assert.Equal(t, "while running", next(t, q).Reason)
}

func TestQueueApplyAndDriftsExclude(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a", Queued: t0.Add(time.Second)})
	d := next(t, q)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b", Queued: t0})
	_, _ = q.Push(Job{Kind: KindApply, Repo: "acme/control", Queued: t0.Add(2 * time.Second)})
	assert.Equal(t, 1, q.Len(), "the waiting apply absorbed the waiting drift")
	c, _ := q.Push(Job{Kind: KindDrift, Repo: "acme/c"})
	assert.True(t, c, "a drift behind a waiting apply is covered by it")
	_, _ = q.Push(Job{Kind: KindCheck, Repo: "acme/control", PR: 1})

	// The apply starts beside the running drift: it reads and renders the control repo first.
	a := next(t, q)
	assert.Equal(t, KindApply, a.Kind)
	assert.Equal(t, 2, a.Merged)
	assert.Equal(t, t0, a.Queued, "the earliest absorbed delivery")
	// Its exclusive phase waits for the running drift; no drift starts meanwhile.
	entered := make(chan error, 1)
	go func() { entered <- q.Exclusive(context.Background()) }()
	assert.Equal(t, KindCheck, next(t, q).Kind, "checks run beside everything")
	require.Eventually(t, func() bool { return q.Claiming() }, 10*time.Second, time.Millisecond)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/e"})
	noNext(t, q)
	select {
	case err := <-entered:
		t.Fatalf("the exclusive phase began while a drift ran (%v)", err)
	default:
	}
	q.Done(d.Key())
	require.NoError(t, <-entered)
	noNext(t, q) // no drift during the exclusive phase
	q.Done(a.Key())
	assert.Equal(t, "acme/e", next(t, q).Repo)
}

// TestQueueDriftsRunWhileAnApplyPrepares: until an apply enters its exclusive phase, drifts
// start; an apply whose exclusive phase is cancelled lets them start again.
func TestQueueDriftsRunWhileAnApplyPrepares(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	_, _ = q.Push(Job{Kind: KindApply, Repo: "acme/control", Incremental: true})
	a := next(t, q)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	d := next(t, q)
	assert.Equal(t, "acme/a", d.Repo, "a drift runs while the apply prepares")

	ctx, cancel := context.WithCancel(context.Background())
	entered := make(chan error, 1)
	go func() { entered <- q.Exclusive(ctx) }()
	require.Eventually(t, func() bool { return q.Claiming() }, 10*time.Second, time.Millisecond)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
	noNext(t, q)
	cancel()
	require.ErrorIs(t, <-entered, context.Canceled)
	assert.Equal(t, "acme/b", next(t, q).Repo, "the apply gave up its exclusive phase")
	q.Done(a.Key())
	assert.Error(t, q.Exclusive(context.Background()), "no apply runs")
}

// A push to the control repo is an incremental apply: it plans only the repos whose desired
// state changed, so it must not swallow the drifts waiting (they would be lost until the next
// full resync). They run beside it, or after its exclusive phase; a full apply still absorbs
// them.
func TestQueueIncrementalApplyDoesNotCoverDrifts(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	c, _ := q.Push(Job{Kind: KindApply, Repo: "acme/control", Reason: "push", Incremental: true})
	assert.False(t, c)
	c, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
	assert.False(t, c, "a drift behind an incremental apply is queued on its own")
	assert.Equal(t, 3, q.Len(), "the incremental apply absorbed no drift")

	a := next(t, q)
	assert.Equal(t, KindDrift, a.Kind, "the oldest runnable job first")
	q.Done(a.Key())
	a = next(t, q)
	assert.Equal(t, KindApply, a.Kind)
	require.NoError(t, q.Exclusive(context.Background()))
	noNext(t, q)
	q.Done(a.Key())
	assert.Equal(t, "acme/b", next(t, q).Repo, "the drift runs after the apply")

	// A resync coalescing into a waiting push makes it full: it covers the drifts then.
	_, _ = q.Push(Job{Kind: KindApply, Repo: "acme/control", Reason: "push", Incremental: true})
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/c"})
	c, _ = q.Push(Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"})
	assert.True(t, c)
	assert.Equal(t, 1, q.Len(), "the apply, now full, absorbed the drift")
	full := next(t, q)
	assert.False(t, full.Incremental)
	assert.Equal(t, 2, full.Merged)
}

// With a DriftDelay, a drift waits that long after its first delivery, and the drifts that
// arrive meanwhile run in its batch: a burst over many repos is a few batched runs.
func TestQueueDriftDelayGathersABatch(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: t0}
	q := NewQueue(jobqueue.Config{Capacity: 500, BatchDelay: 100 * time.Millisecond, Clock: clock})
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	noNext(t, q)
	clock.Advance(60 * time.Millisecond)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
	_, _ = q.Push(Job{Kind: KindCheck, Repo: "acme/control", PR: 3})
	assert.Equal(t, KindCheck, next(t, q).Kind, "other jobs are not held behind a waiting drift")
	noNext(t, q)
	c, _ := q.Push(Job{Kind: KindDrift, Repo: "acme/a", Reason: "again"})
	assert.True(t, c, "a second event on a waiting repo coalesces")

	clock.Advance(40 * time.Millisecond) // acme/a is due: acme/b, not yet, comes along
	jobs, err := q.NextBatch(context.Background())
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	assert.Equal(t, "acme/a", jobs[0].Repo)
	assert.Equal(t, 1, jobs[0].Merged)
	assert.Equal(t, "acme/b", jobs[1].Repo)
	for _, j := range jobs {
		q.Done(j.Key())
	}

	// A drift pushed while its repo runs waits its own delay once the run is done.
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/c"})
	noNext(t, q)
	clock.Advance(100 * time.Millisecond)
	assert.Equal(t, "acme/c", next(t, q).Repo)

	// The delay holds at most a twentieth of the queue's capacity: the drift that makes 25 of
	// this queue's 500 does not wait, and takes the others with it.
	for i := range jobqueue.BatchHold(500) - 1 {
		_, err := q.Push(Job{Kind: KindDrift, Repo: fmt.Sprintf("acme/r%d", i)})
		require.NoError(t, err)
	}
	noNext(t, q)
	_, err = q.Push(Job{Kind: KindDrift, Repo: "acme/last"})
	require.NoError(t, err)
	jobs, err = q.NextBatch(context.Background())
	require.NoError(t, err)
	assert.Len(t, jobs, 25, "25 waiting drifts start without the delay")
}

func TestDriftHold(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 50, jobqueue.BatchHold(1000))
	assert.Equal(t, jobqueue.MaxBatch, jobqueue.BatchHold(100000), "at most a batch")
	assert.Equal(t, 1, jobqueue.BatchHold(10), "at least one")
}

// A worker waiting for a held drift is woken when the delay ends (the queue arms the clock),
// not only by the next push.
func TestQueueDriftDelayWakesTheWorker(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: t0, armed: make(chan struct{}, 1)}
	q := NewQueue(jobqueue.Config{BatchDelay: time.Second, Clock: clock})
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	got := make(chan Job, 1)
	go func() {
		j, err := q.Next(context.Background())
		if err == nil {
			got <- j
		}
	}()
	// The worker arms a wake-up for the due time; once it is armed, moving the clock past it
	// must hand the worker the job.
	<-clock.armed // a worker that never arms one is a hang, for go test -timeout
	require.Len(t, clock.pending(), 1)
	select {
	case j := <-got:
		t.Fatalf("drift %s started before its delay", j.Repo)
	default:
	}
	clock.Advance(time.Second)
	// A worker not woken when the drift's delay ends is a hang, for go test -timeout.
	assert.Equal(t, "acme/a", (<-got).Repo)
	q.Done("drift:acme/a")
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
	noNext(t, q)
	require.Len(t, q.Drain(), 1)
	assert.Empty(t, clock.pending(), "Drain stops the wake-up")
}

func TestQueueDrain(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	_, _ = q.Push(Job{Kind: KindCheck, Repo: "acme/control", SHA: "abc"})
	left := q.Drain()
	require.Len(t, left, 2)
	assert.Equal(t, "drift:acme/a", left[0].Key())
	assert.Equal(t, "check:acme/control@abc", left[1].Key())
	assert.Zero(t, q.Len())
}

// BenchmarkQueueBurst is a burst as serve sees one: 200 deliveries (drifts on 50 repos and
// pushes to the control repo) coalesced into the queue, then drained by a worker. The figure
// per op is one whole burst.
func BenchmarkQueueBurst(b *testing.B) {
	ctx := context.Background()
	repos := make([]string, 50)
	for i := range repos {
		repos[i] = "acme/repo-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		q := NewQueue(jobqueue.Config{Capacity: jobqueue.DefaultQueueSize})
		for d := range 200 {
			j := Job{Kind: KindDrift, Repo: repos[d%len(repos)]}
			if d%4 == 0 {
				j = Job{Kind: KindApply, Repo: "acme/control"}
			}
			if _, err := q.Push(j); err != nil {
				b.Fatal(err)
			}
		}
		for q.Len() > 0 {
			j, err := q.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			q.Done(j.Key())
		}
	}
}

// TestQueueClaimHoldsOnlyTheAppliedRepos: an incremental apply claims the repos it plans: a
// claim waits for the running drift of one of them, keeps new drifts of them waiting, and lets
// drifts of every other repo start meanwhile; a later claim of all (a full run) holds them all.
func TestQueueClaimHoldsOnlyTheAppliedRepos(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	d := next(t, q)
	_, _ = q.Push(Job{Kind: KindApply, Repo: "acme/control", Incremental: true})
	a := next(t, q)

	claimed := make(chan error, 1)
	go func() { claimed <- q.Claim(context.Background(), repoNames([]string{"A", "c"}), false) }()
	require.Eventually(t, func() bool { return q.Claiming() }, 10*time.Second, time.Millisecond)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/c"})
	b := next(t, q)
	assert.Equal(t, "acme/b", b.Repo, "a repo the apply does not claim drifts on")
	noNext(t, q) // acme/c waits for the apply
	select {
	case err := <-claimed:
		t.Fatalf("claimed acme/a while its drift ran (%v)", err)
	default:
	}
	q.Done(d.Key())
	require.NoError(t, <-claimed)
	q.Done(b.Key())

	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
	require.NoError(t, q.Exclusive(context.Background()), "no drift runs: every repo at once")
	noNext(t, q)
	q.Done(a.Key())
	jobs, err := q.NextBatch(context.Background())
	require.NoError(t, err)
	assert.Len(t, jobs, 2, "acme/c and acme/b, once the apply is done")
}

// Deepest is the most jobs that waited at once, exact however rarely the depth is sampled.
func TestQueueDeepest(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	for _, r := range []string{"acme/a", "acme/b", "acme/c"} {
		_, err := q.Push(Job{Kind: KindDrift, Repo: r})
		require.NoError(t, err)
	}
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"}) // coalesced: no new waiting job
	for range 2 {
		q.Done(next(t, q).Key())
	}
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/d"})
	assert.Equal(t, 2, q.Len())
	assert.Equal(t, 3, q.Deepest())
}
