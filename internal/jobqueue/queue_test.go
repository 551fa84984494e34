package jobqueue

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// task is a job of a made-up service: the queue knows it only through taskPolicy.
type task struct {
	key    string
	class  Class
	group  string // of a batched task
	target string // of a batched task
	covers bool   // a claimer that absorbs the waiting batched tasks
	pushes int    // pushes merged or absorbed into it, after the first
	note   string // the newest push's
	queued time.Time
}

// taskPolicy is the made-up service's rules.
type taskPolicy struct{}

func (taskPolicy) Key(t task) string    { return t.key }
func (taskPolicy) Class(t task) Class   { return t.class }
func (taskPolicy) Absorbs(t task) bool  { return t.covers }
func (taskPolicy) Group(t task) string  { return t.group }
func (taskPolicy) Target(t task) string { return t.target }
func (taskPolicy) About(t task) About {
	return About{Label: "task", Queued: t.queued, Attrs: []any{"key", t.key}}
}
func (taskPolicy) Requeued(t task, at time.Time) task { t.queued = at; return t }
func (taskPolicy) Merge(old, newer task) task {
	newer.pushes = old.pushes + newer.pushes + 1
	newer.covers = old.covers || newer.covers
	return newer
}
func (taskPolicy) Absorb(t, b task) task { t.pushes += b.pushes + 1; return t }

func newTaskQueue(cfg Config) *Queue[task] { return New[task](taskPolicy{}, cfg) }

func batched(group, target string) task {
	return task{key: group + "/" + target, class: ClassBatched, group: group, target: target}
}

func take(t *testing.T, q *Queue[task]) []task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs, err := q.NextBatch(ctx)
	require.NoError(t, err)
	return jobs
}

// none fails when a waiting job may start now.
func none(t *testing.T, q *Queue[task]) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, k := range q.order {
		if _, held := q.held(k, q.clock.Now()); q.runnable(k, *q.waiting[k]) && !held {
			t.Fatalf("%s may start", k)
		}
	}
}

func keys(ts []task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.key
	}
	sort.Strings(out)
	return out
}

// TestQueueCoalescesByKeyAndIsBounded: a push whose key waits merges into it through the
// policy; distinct keys beyond the capacity are refused at once.
func TestQueueCoalescesByKeyAndIsBounded(t *testing.T) {
	t.Parallel()
	q := newTaskQueue(Config{Capacity: 2})
	for _, n := range []string{"1", "2", "3"} {
		coalesced, err := q.Push(task{key: "a", note: n})
		require.NoError(t, err)
		assert.Equal(t, n != "1", coalesced)
	}
	_, err := q.Push(task{key: "b"})
	require.NoError(t, err)
	_, err = q.Push(task{key: "c"})
	require.ErrorIs(t, err, ErrFull)
	got := q.Drain()
	require.Len(t, got, 2)
	assert.Equal(t, task{key: "a", note: "3", pushes: 2}, got[0], "the newest push's fields, the count of the merged")
}

// TestQueueBatchesAGroupAndAbsorbs: batched jobs come out together per group; a waiting
// claimer that covers them absorbs those waiting and those pushed after it.
func TestQueueBatchesAGroupAndAbsorbs(t *testing.T) {
	t.Parallel()
	q := newTaskQueue(Config{Capacity: 10})
	for _, b := range []task{batched("g1", "x"), batched("g2", "y"), batched("g1", "z"), {key: "plain"}} {
		_, err := q.Push(b)
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"g1/x", "g1/z"}, keys(take(t, q)), "one group's batched jobs together")
	assert.Equal(t, []string{"g2/y"}, keys(take(t, q)))
	assert.Equal(t, []string{"plain"}, keys(take(t, q)), "a plain job alone")

	_, _ = q.Push(batched("g1", "w"))
	coalesced, err := q.Push(task{key: "all", class: ClassClaimer, covers: true})
	require.NoError(t, err)
	assert.False(t, coalesced)
	coalesced, _ = q.Push(batched("g2", "v"))
	assert.True(t, coalesced, "absorbed by the waiting claimer")
	got := q.Drain()
	require.Len(t, got, 1)
	assert.Equal(t, 2, got[0].pushes, "the claimer counts what it absorbed")
}

// TestQueueClaimHoldsItsTargets: a claim waits for the running batched job of its target, keeps
// new ones of its targets waiting until the claimer is done, and lets others run meanwhile.
func TestQueueClaimHoldsItsTargets(t *testing.T) {
	t.Parallel()
	q := newTaskQueue(Config{Capacity: 10})
	require.Error(t, q.Claim(context.Background(), []string{"x"}, false), "no claimer runs")
	_, _ = q.Push(batched("g", "x"))
	running := take(t, q)
	_, _ = q.Push(task{key: "claimer", class: ClassClaimer})
	claimer := take(t, q)

	claimed := make(chan error, 1)
	go func() { claimed <- q.Claim(context.Background(), []string{"x", "y"}, false) }()
	for changed := q.changedChan(); !q.Claiming(); changed = q.changedChan() {
		<-changed
	}
	_, _ = q.Push(batched("g", "y"))
	_, _ = q.Push(batched("h", "other"))
	assert.Equal(t, []string{"h/other"}, keys(take(t, q)), "a target the claim does not cover runs")
	none(t, q)
	q.Done(running[0].key)
	require.NoError(t, <-claimed)
	none(t, q)
	q.Done(claimer[0].key)
	assert.Equal(t, []string{"g/y"}, keys(take(t, q)), "free once the claimer is done")
	assert.Equal(t, 1, q.Settled())
}

// changedChan is the channel closed at the queue's next change (tests wait on it).
func (q *Queue[J]) changedChan() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.changed
}

// manualClock fires AfterFunc callbacks only when advanced.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []manualTimer
}

type manualTimer struct {
	at time.Time
	f  func()
}

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *manualClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, manualTimer{at: c.now.Add(d), f: f})
	return func() bool { return true } // stale timers are told apart by the queue itself
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []func()
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.at.After(c.now) {
			due = append(due, tm.f)
			continue
		}
		kept = append(kept, tm)
	}
	c.timers = kept
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// TestQueueRetryAtHoldsOutsideTheCapacity: a job held until a time does not count against the
// capacity, keeps the earliest time asked per key, and is pushed when the clock gets there.
func TestQueueRetryAtHoldsOutsideTheCapacity(t *testing.T) {
	t.Parallel()
	clock := &manualClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	q := newTaskQueue(Config{Capacity: 1, Clock: clock})
	q.RetryAt(task{key: "later"}, clock.now.Add(time.Minute))
	q.RetryAt(task{key: "later", note: "sooner"}, clock.now.Add(30*time.Second))
	assert.Equal(t, 1, q.Later())
	_, err := q.Push(task{key: "now"})
	require.NoError(t, err, "the held job takes no room")
	q.Done(take(t, q)[0].key)

	clock.advance(29 * time.Second)
	assert.Zero(t, q.Len())
	clock.advance(time.Second)
	got := take(t, q)
	require.Len(t, got, 1)
	assert.Equal(t, "sooner", got[0].note)
	assert.Equal(t, clock.Now(), got[0].queued, "requeued at the time it was pushed")
	assert.Zero(t, q.Later())
}

// recorder is an Executor that records the lease each job got and fails or panics on demand.
type recorder struct {
	mu     sync.Mutex
	leases map[string]Lease
	done   chan string
}

func (r *recorder) Execute(_ context.Context, j task, lease Lease) error {
	defer func() { r.done <- j.key }()
	r.mu.Lock()
	r.leases[j.key] = lease
	r.mu.Unlock()
	switch j.note {
	case "panic":
		panic("boom")
	case "fail":
		return errors.New("failed")
	}
	return nil
}

func (r *recorder) PreparesClaims() bool { return true }

// TestPoolPassesTheLeaseExplicitly: a claimer gets the queue as its Lease, any other job
// NoLease; a panic fails that job only and the pool goes on.
func TestPoolPassesTheLeaseExplicitly(t *testing.T) {
	t.Parallel()
	q := newTaskQueue(Config{Capacity: 10})
	r := &recorder{leases: map[string]Lease{}, done: make(chan string, 10)}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool[task]{Queue: q, Exec: r, Workers: 1}
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(ctx) }()
	for _, j := range []task{{key: "boom", note: "panic"}, {key: "claimer", class: ClassClaimer}, {key: "plain", note: "fail"}} {
		_, err := q.Push(j)
		require.NoError(t, err)
		assert.Equal(t, j.key, <-r.done)
	}
	cancel()
	require.NoError(t, <-stopped)
	assert.Same(t, q, r.leases["claimer"], "the claimer claims through the queue")
	assert.Equal(t, NoLease{}, r.leases["plain"])
	assert.Zero(t, q.Running(), "every job done, the panicked one too")
}

// countingMetrics is a Metrics counting finished jobs by outcome.
type countingMetrics struct {
	mu   sync.Mutex
	done map[string]int
}

func (m *countingMetrics) JobStarted(string, time.Duration) {}

func (m *countingMetrics) JobDone(_, outcome string, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done[outcome]++
}

func (m *countingMetrics) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.done {
		n += c
	}
	return n
}

// metricsAtLog is a slog.Handler noting, for each record, how many jobs the metrics had counted.
type metricsAtLog struct {
	m       *countingMetrics
	mu      *sync.Mutex
	counted map[string]int // by message
}

func (h metricsAtLog) Enabled(context.Context, slog.Level) bool { return true }
func (h metricsAtLog) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counted[r.Message] = h.m.count()
	return nil
}
func (h metricsAtLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h metricsAtLog) WithGroup(string) slog.Handler      { return h }

// TestPoolFinishedAfterTheJobIsCountedAndDone: a job's log line comes after its count in the
// metrics, and Finished after both and after the queue let it go, so that whoever waits on the
// one or the other (serve's tests) finds the job counted and no longer running.
func TestPoolFinishedAfterTheJobIsCountedAndDone(t *testing.T) {
	t.Parallel()
	q := newTaskQueue(Config{Capacity: 10})
	r := &recorder{leases: map[string]Lease{}, done: make(chan string, 10)}
	m := &countingMetrics{done: map[string]int{}}
	logged := metricsAtLog{m: m, mu: &sync.Mutex{}, counted: map[string]int{}}
	type seen struct {
		key              string
		counted, running int
	}
	finished := make(chan seen, 10)
	ctx, cancel := context.WithCancel(context.Background())
	p := &Pool[task]{Queue: q, Exec: r, Workers: 1, Metrics: m, Logger: slog.New(logged),
		Finished: func(j task) { finished <- seen{j.key, m.count(), q.Running()} }}
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(ctx) }()
	for i, j := range []task{{key: "ok"}, {key: "fails", note: "fail"}, {key: "panics", note: "panic"}, batched("g", "a")} {
		_, err := q.Push(j)
		require.NoError(t, err)
		assert.Equal(t, seen{j.key, i + 1, 0}, <-finished, "finished once counted and done")
	}
	cancel()
	require.NoError(t, <-stopped)
	logged.mu.Lock()
	defer logged.mu.Unlock()
	assert.Equal(t, map[string]int{"job done": 4, "job failed; the next resync retries": 2, "job panicked; the next resync retries": 3},
		withoutStarts(logged.counted), "each line logged once its job is counted")
}

// withoutStarts drops the "job started" lines.
func withoutStarts(m map[string]int) map[string]int {
	delete(m, "job started")
	return m
}
