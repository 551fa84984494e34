package jobqueue

import (
	"context"
	"errors"
	"sync"
	"time"
)

// DefaultQueueSize is how many distinct jobs may wait at once by default.
const DefaultQueueSize = 1000

// MaxBatch bounds how many batched jobs NextBatch (and a Stager's batch) hands out together.
const MaxBatch = 100

// ErrFull is returned by Push when the queue holds its capacity of distinct jobs: the caller
// refuses the work rather than blocking.
var ErrFull = errors.New("job queue full")

// Class says how a job takes part in claims and batches (Policy.Class).
type Class int

// Job classes.
const (
	// ClassPlain jobs run alone and claim nothing.
	ClassPlain Class = iota
	// ClassClaimer jobs claim targets through their Lease (Queue.Claim) before they write
	// them; a waiting one may absorb the waiting batched jobs (Policy.Absorbs).
	ClassClaimer
	// ClassBatched jobs are handed out with the other batched jobs of their group, may wait
	// Config.BatchDelay, and do not start on a claimed target.
	ClassBatched
)

// Policy is the rules of the jobs of a Queue, supplied by the service that owns them: the
// queue knows nothing else of a job.
type Policy[J any] interface {
	// Key is j's coalescing key: jobs of one key merge while waiting and never run at once.
	Key(j J) string
	// Class is j's class.
	Class(j J) Class
	// Merge folds newer into waiting, a job of the same key that waits.
	Merge(waiting, newer J) J
	// Absorbs reports whether j, a waiting claimer, covers the work of every batched job:
	// they are dropped into it (Absorb) instead of waiting.
	Absorbs(j J) bool
	// Absorb folds batched, a batched job, into j, a claimer that Absorbs.
	Absorb(j, batched J) J
	// Group is the batch group of a batched job: only jobs of one group batch together.
	Group(j J) string
	// Target is what a batched job works on, as claimers name it in Queue.Claim.
	Target(j J) string
	// Requeued is j pushed again at queued (a job held by RetryAt).
	Requeued(j J, queued time.Time) J
	// About is what a Pool logs and measures of j.
	About(j J) About
}

// About is what a Pool logs and measures of a job.
type About struct {
	// Label names the job in the metrics (bounded: its kind).
	Label string
	// Queued is when the job's first push was received; Coalesced how many pushes were
	// merged into it after the first.
	Queued    time.Time
	Coalesced int
	// Attrs name the job on every log line; Detail is added to its "job started" line.
	Attrs, Detail []any
}

// Config configures a Queue.
type Config struct {
	// Capacity is how many distinct jobs may wait (DefaultQueueSize if <= 0).
	Capacity int
	// BatchDelay is how long a batched job waits after its first push before it may start
	// (0: at once), so that the jobs of its group arriving meanwhile join its batch. The
	// delay holds at most BatchHold(Capacity) batched jobs: once that many wait, they start
	// without waiting it out.
	BatchDelay time.Duration
	// Clock times BatchDelay and RetryAt (default WallClock).
	Clock Clock
}

// Queue is a bounded queue of jobs that coalesces by Policy.Key: a job whose key is already
// waiting is merged into it instead of queued again. A key never runs twice at once: a job
// pushed while its key runs waits for that run to finish. A claimer writes only to the targets
// it has claimed (Claim): a claim waits for the running batched jobs of those targets to end,
// and none of them starts until the claimer is Done. Before its claim, and beside it on other
// targets, batched jobs go on. A waiting claimer that Absorbs takes in the batched jobs queued
// behind or before it.
//
// Queue is safe for concurrent use. Push never blocks.
type Queue[J any] struct {
	policy   Policy[J]
	mu       sync.Mutex
	capacity int
	delay    time.Duration
	clock    Clock
	order    []string             // waiting keys, oldest first
	waiting  map[string]*J        // by key
	due      map[string]time.Time // when a waiting batched job may start (with a delay)
	running  map[string]running   // by key
	batched  int                  // running batched jobs
	claimers int                  // running claimers
	// claim is what the running claimers have claimed, and want what one waits to claim while
	// batched jobs of it run: no batched job of either starts.
	claim, want targetSet
	waitingB    int           // waiting batched jobs
	absorbers   int           // waiting jobs that Absorb
	settled     int           // claimers done
	deepest     int           // the most jobs that waited at once
	changed     chan struct{} // closed (and replaced) when a job may have become runnable
	// timerAt is when the wake-up for the next due batched job fires (zero: none armed);
	// timerGen tells the armed timer from a stale one, stopTimer cancels it.
	timerAt   time.Time
	timerGen  int
	stopTimer func() bool
	// later holds the jobs to push at a known time (RetryAt), by key; laterAt is when its
	// wake-up fires (zero: none armed), laterGen tells the armed one from a stale one,
	// stopLater cancels it.
	later     map[string]laterJob[J]
	laterAt   time.Time
	laterGen  int
	stopLater func() bool
}

// running is what the queue knows of a running job.
type running struct {
	class  Class
	target string // of a batched job
}

// laterJob is a job to push at a known time.
type laterJob[J any] struct {
	job J
	at  time.Time
}

// New returns a Queue of jobs ruled by policy, configured by cfg.
func New[J any](policy Policy[J], cfg Config) *Queue[J] {
	if cfg.Capacity <= 0 {
		cfg.Capacity = DefaultQueueSize
	}
	if cfg.Clock == nil {
		cfg.Clock = WallClock{}
	}
	return &Queue[J]{policy: policy, capacity: cfg.Capacity, delay: max(0, cfg.BatchDelay), clock: cfg.Clock,
		waiting: map[string]*J{}, due: map[string]time.Time{}, running: map[string]running{}, later: map[string]laterJob[J]{},
		changed: make(chan struct{})}
}

// RetryAt pushes j at at, by the queue's clock: work deferred until a known time (a rate
// limit's reset) runs again then. It holds one job per key, at the earliest time asked; a held
// job does not count against the capacity until it is pushed, and is then pushed as any job is
// (coalescing, or refused when the queue is full). A time already past pushes at once.
func (q *Queue[J]) RetryAt(j J, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := q.policy.Key(j)
	if old, ok := q.later[key]; ok && !at.Before(old.at) {
		return
	}
	q.later[key] = laterJob[J]{job: j, at: at}
	q.armLater()
}

// Later is how many jobs wait for their time (RetryAt) before they are pushed.
func (q *Queue[J]) Later() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.later)
}

// armLater makes sure a wake-up fires when the earliest held job is due; call with q.mu held.
func (q *Queue[J]) armLater() {
	var first time.Time
	for _, l := range q.later {
		if first.IsZero() || l.at.Before(first) {
			first = l.at
		}
	}
	if first.IsZero() || (!q.laterAt.IsZero() && !q.laterAt.After(first)) {
		return // nothing held, or a wake-up fires by then already
	}
	if q.stopLater != nil {
		q.stopLater()
	}
	q.laterGen++
	gen := q.laterGen
	q.laterAt = first
	q.stopLater = q.clock.AfterFunc(max(first.Sub(q.clock.Now()), 0), func() { q.pushDue(gen) })
}

// pushDue pushes the held jobs that are due and arms the wake-up of the next ones.
func (q *Queue[J]) pushDue(gen int) {
	q.mu.Lock()
	if gen != q.laterGen {
		q.mu.Unlock()
		return
	}
	q.laterAt, q.stopLater = time.Time{}, nil
	now := q.clock.Now()
	var due []J
	for k, l := range q.later {
		if !l.at.After(now) {
			due = append(due, q.policy.Requeued(l.job, now))
			delete(q.later, k)
		}
	}
	q.armLater()
	q.mu.Unlock()
	for _, j := range due {
		// A full queue refuses it as it refuses any push.
		_, _ = q.Push(j)
	}
}

// Push queues j, or merges it into the waiting job with the same key (or into a waiting
// claimer that absorbs it, for a batched job) and reports coalesced. A full queue returns
// ErrFull at once.
func (q *Queue[J]) Push(j J) (coalesced bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := q.policy.Key(j)
	class := q.policy.Class(j)
	if old, ok := q.waiting[key]; ok {
		was := q.absorbs(*old)
		*old = q.policy.Merge(*old, j)
		switch now := q.absorbs(*old); {
		case now && !was:
			q.absorbers++
		case was && !now:
			q.absorbers--
		}
		if q.absorbs(*old) {
			q.absorbBatched(old)
		}
		q.signal()
		return true, nil
	}
	if class == ClassBatched && q.absorbers > 0 {
		for _, k := range q.order {
			if w := q.waiting[k]; q.absorbs(*w) {
				*w = q.policy.Absorb(*w, j)
				return true, nil
			}
		}
	}
	if q.absorbs(j) {
		q.absorbBatched(&j)
	}
	if len(q.order) >= q.capacity {
		return false, ErrFull
	}
	q.waiting[key] = &j
	q.order = append(q.order, key)
	q.deepest = max(q.deepest, len(q.order))
	if q.absorbs(j) {
		q.absorbers++
	}
	if class == ClassBatched {
		q.waitingB++
		if q.delay > 0 {
			q.due[key] = q.clock.Now().Add(q.delay)
		}
	}
	q.signal()
	return false, nil
}

// absorbs reports whether j is a claimer that absorbs the waiting batched jobs.
func (q *Queue[J]) absorbs(j J) bool {
	return q.policy.Class(j) == ClassClaimer && q.policy.Absorbs(j)
}

// absorbBatched drops the waiting batched jobs into into, a claimer that covers them; call with
// q.mu held.
func (q *Queue[J]) absorbBatched(into *J) {
	if q.waitingB == 0 {
		return
	}
	kept := q.order[:0]
	for _, k := range q.order {
		w := q.waiting[k]
		if q.policy.Class(*w) != ClassBatched {
			kept = append(kept, k)
			continue
		}
		*into = q.policy.Absorb(*into, *w)
		q.forgetWaiting(k)
	}
	clear(q.order[len(kept):])
	q.order = kept
}

// Next waits for a runnable job, marks its key running and returns it. The caller must call
// Done with the job's key when finished. It returns ctx's error once ctx is done.
func (q *Queue[J]) Next(ctx context.Context) (J, error) {
	jobs, err := q.next(ctx, 1)
	if err != nil {
		var zero J
		return zero, err
	}
	return jobs[0], nil
}

// NextBatch is Next, except that a batched job comes with every other runnable batched job
// waiting in its group (at most MaxBatch in all, oldest first). Every job returned has its key
// running; the caller must call Done for each. Any other job comes alone.
func (q *Queue[J]) NextBatch(ctx context.Context) ([]J, error) {
	return q.next(ctx, MaxBatch)
}

// next waits for a runnable job and takes it, with up to limit-1 batched jobs of its group
// when it is a batched job.
func (q *Queue[J]) next(ctx context.Context, limit int) ([]J, error) {
	for {
		// A done ctx wins over a waiting job: a pool shutting down starts nothing new, and the
		// waiting jobs are handed back (Drain).
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.mu.Lock()
		if out := q.take1(limit); out != nil {
			q.mu.Unlock()
			return out, nil
		}
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

// take1 takes the oldest runnable job (with the batched jobs of its group, up to limit) or,
// when none may start, arms the wake-up of the first one the delay holds and returns nil; call
// with q.mu held.
func (q *Queue[J]) take1(limit int) []J {
	now := q.clock.Now()
	var wake time.Time // the earliest due time of a batched job held by the delay
	for i, k := range q.order {
		j := q.waiting[k]
		if !q.runnable(k, *j) {
			continue
		}
		if at, held := q.held(k, now); held {
			if wake.IsZero() || at.Before(wake) {
				wake = at
			}
			continue
		}
		out := []J{*j}
		q.take(k)
		if q.policy.Class(out[0]) != ClassBatched {
			q.order = append(q.order[:i], q.order[i+1:]...)
			return out
		}
		group := q.policy.Group(out[0])
		kept := q.order[:i]
		for _, k2 := range q.order[i+1:] {
			d := q.waiting[k2]
			if len(out) < limit && q.policy.Class(*d) == ClassBatched && q.policy.Group(*d) == group && q.runnable(k2, *d) {
				out = append(out, *d)
				q.take(k2)
				continue
			}
			kept = append(kept, k2)
		}
		q.order = kept
		return out
	}
	if !wake.IsZero() {
		q.arm(now, wake)
	}
	return nil
}

// TakeBatch takes up to n waiting batched jobs of group that may start now (held by the batch
// delay or not: they join a batch that has started, as NextBatch's do), oldest first, marks
// them running and returns them with a channel closed when the queue next changes. The caller
// must call Done for each. A Pool adds them to a batch that waits on work they would wait on
// too (Stager). It takes none once ctx is done (as Next starts none), nor once a claimer
// finished since the batch began (settled is Settled then): that claimer may have written
// what the batch read before.
func (q *Queue[J]) TakeBatch(ctx context.Context, group string, n, settled int) ([]J, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ctx.Err() != nil || q.settled != settled {
		return nil, q.changed
	}
	var out []J
	kept := q.order[:0]
	for _, k := range q.order {
		d := q.waiting[k]
		if len(out) < n && q.policy.Class(*d) == ClassBatched && q.policy.Group(*d) == group && q.runnable(k, *d) {
			out = append(out, *d)
			q.take(k)
			continue
		}
		kept = append(kept, k)
	}
	clear(q.order[len(kept):])
	q.order = kept
	return out, q.changed
}

// Settled is how many claimers have finished (Done).
func (q *Queue[J]) Settled() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.settled
}

// BatchHold is how many waiting batched jobs the batch delay may hold in a queue of capacity:
// a twentieth of it (50 of the default 1,000), at most a batch (MaxBatch), at least one. Jobs
// held for batching are waiting work: under a stream of them the delay alone must not fill
// the queue toward the point where pushes are refused, and half a batch already saves almost
// all a batch saves.
func BatchHold(capacity int) int {
	return max(1, min(MaxBatch, capacity/20))
}

// held reports whether the waiting batched job of key is held by the delay at now, and until
// when; call with q.mu held. Once BatchHold batched jobs wait, none is held.
func (q *Queue[J]) held(key string, now time.Time) (time.Time, bool) {
	at, ok := q.due[key]
	if !ok || !now.Before(at) || q.waitingB >= BatchHold(q.capacity) {
		return time.Time{}, false
	}
	return at, true
}

// arm makes sure a wake-up fires by at, when the first held batched job becomes due; call with
// q.mu held.
func (q *Queue[J]) arm(now, at time.Time) {
	if !q.timerAt.IsZero() && !q.timerAt.After(at) {
		return // one fires by then already
	}
	if q.stopTimer != nil {
		q.stopTimer()
	}
	q.timerGen++
	gen := q.timerGen
	q.timerAt = at
	q.stopTimer = q.clock.AfterFunc(at.Sub(now), func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.timerGen == gen {
			q.timerAt, q.stopTimer = time.Time{}, nil
		}
		q.signal()
	})
}

// forgetWaiting forgets the waiting job of key (the caller removes key from q.order); call
// with q.mu held.
func (q *Queue[J]) forgetWaiting(key string) {
	if j := q.waiting[key]; j != nil {
		if q.policy.Class(*j) == ClassBatched {
			q.waitingB--
		}
		if q.absorbs(*j) {
			q.absorbers--
		}
	}
	delete(q.waiting, key)
	delete(q.due, key)
}

// take marks the waiting job of key running and forgets it as waiting (the caller removes key
// from q.order); call with q.mu held.
func (q *Queue[J]) take(key string) {
	j := *q.waiting[key]
	q.forgetWaiting(key)
	r := running{class: q.policy.Class(j)}
	switch r.class {
	case ClassBatched:
		r.target = q.policy.Target(j)
		q.batched++
	case ClassClaimer:
		q.claimers++
	}
	q.running[key] = r
}

// runnable reports whether j, waiting under key, may start now.
func (q *Queue[J]) runnable(key string, j J) bool {
	if _, busy := q.running[key]; busy {
		return false
	}
	if q.policy.Class(j) == ClassBatched {
		// Not on a target a running claimer claimed, nor on one it waits to claim: it gets
		// them once their running batched jobs are done, instead of waiting behind a stream
		// of batches that never leaves none running.
		t := q.policy.Target(j)
		return !q.claim.has(t) && !q.want.has(t)
	}
	return true
}

// targetSet is a set of targets, or every target.
type targetSet struct {
	all   bool
	names map[string]bool
}

func (s targetSet) has(name string) bool { return s.all || s.names[name] }

func (s targetSet) empty() bool { return !s.all && len(s.names) == 0 }

// Claim claims targets for the running claimer, or every target when all is set: it waits
// until no batched job of them runs, and keeps batched jobs of them from starting until the
// claimer is Done; batched jobs of other targets go on. A second claim adds to the first. It
// returns ctx's error when ctx ends first (the claimer then writes nothing), or an error when
// no claimer runs. Targets are compared as given (Policy.Target names them the same way).
func (q *Queue[J]) Claim(ctx context.Context, targets []string, all bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.claimers == 0 {
		return errors.New("job queue: no claiming job is running to claim targets")
	}
	want := targetSet{all: all || q.claim.all, names: map[string]bool{}}
	for n := range q.claim.names {
		want.names[n] = true
	}
	for _, t := range targets {
		want.names[t] = true
	}
	q.want = want
	q.signal() // a waiter may watch for the claim (Claiming)
	for q.batchedOn(want) {
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			q.mu.Lock()
			q.want = targetSet{}
			q.signal()
			return ctx.Err()
		case <-changed:
		}
		q.mu.Lock()
	}
	q.claim, q.want = want, targetSet{}
	q.signal()
	return nil
}

// Exclusive claims every target for the running claimer (Claim).
func (q *Queue[J]) Exclusive(ctx context.Context) error { return q.Claim(ctx, nil, true) }

// Claiming reports whether a claim waits for running batched jobs of its targets to end.
func (q *Queue[J]) Claiming() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.want.empty()
}

// Wants reports whether a waiting claim covers target.
func (q *Queue[J]) Wants(target string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.want.has(target)
}

// batchedOn reports whether a batched job of a target of s runs; call with q.mu held.
func (q *Queue[J]) batchedOn(s targetSet) bool {
	if s.empty() {
		return false
	}
	if s.all {
		return q.batched > 0
	}
	for _, r := range q.running {
		if r.class == ClassBatched && s.names[r.target] {
			return true
		}
	}
	return false
}

// Done marks key finished, letting a job waiting on it run; a claimer's claim ends with it.
func (q *Queue[J]) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	r, ok := q.running[key]
	if !ok {
		return
	}
	switch r.class {
	case ClassBatched:
		q.batched--
	case ClassClaimer:
		q.claimers--
		q.claim, q.want = targetSet{}, targetSet{}
		q.settled++
	}
	delete(q.running, key)
	q.signal()
}

// signal wakes every waiting Next; call with q.mu held.
func (q *Queue[J]) signal() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Len is the number of waiting jobs.
func (q *Queue[J]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// Deepest is the most jobs that have waited at once.
func (q *Queue[J]) Deepest() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deepest
}

// Running is the number of jobs being worked on.
func (q *Queue[J]) Running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.running)
}

// Drain removes and returns the waiting jobs, oldest first, then those held for a later time
// (RetryAt): at shutdown they are handed back (logged).
func (q *Queue[J]) Drain() []J {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]J, 0, len(q.order))
	for _, k := range q.order {
		out = append(out, *q.waiting[k])
	}
	for _, l := range q.later {
		out = append(out, l.job)
	}
	q.order, q.waiting, q.due, q.waitingB, q.absorbers, q.later = nil, map[string]*J{}, map[string]time.Time{}, 0, 0, map[string]laterJob[J]{}
	if q.stopTimer != nil {
		q.stopTimer()
		q.timerAt, q.stopTimer = time.Time{}, nil
		q.timerGen++
	}
	if q.stopLater != nil {
		q.stopLater()
		q.laterAt, q.stopLater = time.Time{}, nil
	}
	q.laterGen++
	return out
}
