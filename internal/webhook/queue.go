package webhook

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// DefaultQueueSize is how many distinct jobs may wait at once by default.
// Coalescing keeps one job per target repo, so this is roughly the number
// of repos that can drift in one burst before deliveries are refused.
const DefaultQueueSize = 1000

// DefaultDriftDelay is how long serve holds a drift job by default so that the drifts of
// other repos arriving meanwhile join its batch (QueueConfig.DriftDelay).
const DefaultDriftDelay = 100 * time.Millisecond

// ErrQueueFull is returned by Push when the queue holds its capacity of
// distinct jobs. The delivery is refused (503) rather than blocking the
// HTTP handler; the periodic resync catches up with what it would have done.
var ErrQueueFull = errors.New("job queue full")

// Queue is a bounded queue of jobs that coalesces by Job.Key: a job whose
// key is already waiting is merged into it instead of queued again, so ten
// pushes in a burst are one apply and ten drifts of one repo one reconcile.
// A key never runs twice at once: a job pushed while its key runs waits for
// that run to finish. An apply writes only to the target repos it has claimed
// (Claim: the ones an incremental apply plans, or every repo): a claim waits for
// the running drifts of those repos to end, and no drift of them starts until the
// apply is done, so that the two never race on one repo's pull request. Before
// its claim, while the apply reads and renders the control repo, and beside it on
// the other repos, drifts go on. A waiting full apply (a resync, an installation
// change) absorbs the drifts queued behind or before it, which an incremental one
// (a push to the control repo) does not cover.
// NextBatch hands out the drifts waiting for one owner together, so a burst
// of drifts is a few applies limited to their repos rather than one per repo;
// with a DriftDelay, a drift waits that long after its first delivery so that
// the drifts of other repos arriving meanwhile join its batch.
//
// Queue is safe for concurrent use. Push never blocks.
type Queue struct {
	mu       sync.Mutex
	capacity int
	delay    time.Duration
	clock    Clock
	order    []string             // waiting keys, oldest first
	waiting  map[string]*Job      // by key
	due      map[string]time.Time // when a waiting drift may start (with a delay)
	running  map[string]Kind      // by key
	drifts   int                  // running drift jobs
	// claim is what the running apply has claimed (all, or the repos by lower-case name), and
	// want what it waits to claim while drifts of it run: no drift of either starts.
	claim, want repoSet
	waitingD    int           // waiting drift jobs
	applied     int           // apply jobs done
	deepest     int           // the most jobs that waited at once
	changed     chan struct{} // closed (and replaced) when a job may have become runnable
	// timerAt is when the wake-up for the next due drift fires (zero: none armed); timerGen
	// tells the armed timer from a stale one, stopTimer cancels it.
	timerAt   time.Time
	timerGen  int
	stopTimer func() bool
	// later holds the jobs to push at a known time (RetryAt), by key; laterAt is when its
	// wake-up fires (zero: none armed), laterGen tells the armed one from a stale one,
	// stopLater cancels it.
	later     map[string]laterJob
	laterAt   time.Time
	laterGen  int
	stopLater func() bool
}

// laterJob is a job to push at a known time.
type laterJob struct {
	job Job
	at  time.Time
}

// QueueConfig configures a Queue.
type QueueConfig struct {
	// Capacity is how many distinct jobs may wait (DefaultQueueSize if <= 0).
	Capacity int
	// DriftDelay is how long a drift job waits after its first delivery before it may start
	// (0: at once). A burst of events on many target repos then becomes a few batched runs of
	// up to MaxDriftBatch repos, each one GraphQL read of their heads, instead of one run
	// (and its requests to GitHub) per repo; the events of one change (a merge's
	// pull_request and push) coalesce into one job. The delay holds at most DriftHold(Capacity)
	// drifts: once that many wait, they start without waiting it out.
	DriftDelay time.Duration
	// Clock times DriftDelay (default WallClock).
	Clock Clock
}

// NewQueue returns a Queue holding at most capacity waiting jobs
// (DefaultQueueSize if capacity <= 0), whose drift jobs start at once.
func NewQueue(capacity int) *Queue {
	return NewQueueWith(QueueConfig{Capacity: capacity})
}

// NewQueueWith returns a Queue configured by cfg.
func NewQueueWith(cfg QueueConfig) *Queue {
	if cfg.Capacity <= 0 {
		cfg.Capacity = DefaultQueueSize
	}
	if cfg.Clock == nil {
		cfg.Clock = WallClock{}
	}
	return &Queue{capacity: cfg.Capacity, delay: max(0, cfg.DriftDelay), clock: cfg.Clock,
		waiting: map[string]*Job{}, due: map[string]time.Time{}, running: map[string]Kind{}, later: map[string]laterJob{}, changed: make(chan struct{})}
}

// RetryAt pushes j at at, by the queue's clock: a repo whose run was deferred until a known
// time (a rate limit's reset, the write budget's next slot) runs again then, not at the next
// resync. It holds one job per key, at the earliest time asked; a held job does not count
// against the capacity until it is pushed (a rate limit deferring every repo must not refuse
// deliveries meanwhile), and is then pushed as any job is (coalescing, or refused when the
// queue is full: the resync catches up). A time already past pushes at once.
func (q *Queue) RetryAt(j Job, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := j.Key()
	if old, ok := q.later[key]; ok && !at.Before(old.at) {
		return
	}
	q.later[key] = laterJob{job: j, at: at}
	q.armLater()
}

// Later is how many jobs wait for their time (RetryAt) before they are pushed.
func (q *Queue) Later() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.later)
}

// armLater makes sure a wake-up fires when the earliest held job is due; call with q.mu held.
func (q *Queue) armLater() {
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
func (q *Queue) pushDue(gen int) {
	q.mu.Lock()
	if gen != q.laterGen {
		q.mu.Unlock()
		return
	}
	q.laterAt, q.stopLater = time.Time{}, nil
	now := q.clock.Now()
	var due []Job
	for k, l := range q.later {
		if !l.at.After(now) {
			j := l.job
			j.Queued = now
			due = append(due, j)
			delete(q.later, k)
		}
	}
	q.armLater()
	q.mu.Unlock()
	for _, j := range due {
		// A full queue refuses it as it refuses a delivery; the resync catches up.
		_, _ = q.Push(j)
	}
}

// Push queues j, or merges it into the waiting job with the same key (or
// into a waiting apply, for a drift) and reports coalesced. A full queue
// returns ErrQueueFull at once.
func (q *Queue) Push(j Job) (coalesced bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	key := j.Key()
	if old, ok := q.waiting[key]; ok {
		*old = old.merge(j)
		if old.Kind == KindApply && !old.Incremental {
			q.absorbDrifts(old)
		}
		q.signal()
		return true, nil
	}
	if j.Kind == KindDrift {
		if apply, ok := q.waiting[string(KindApply)]; ok && !apply.Incremental {
			apply.Merged++
			apply.Queued = earliest(apply.Queued, j.Queued)
			return true, nil
		}
	}
	if j.Kind == KindApply && !j.Incremental {
		q.absorbDrifts(&j)
	}
	if len(q.order) >= q.capacity {
		return false, ErrQueueFull
	}
	q.waiting[key] = &j
	q.order = append(q.order, key)
	q.deepest = max(q.deepest, len(q.order))
	if j.Kind == KindDrift {
		q.waitingD++
		if q.delay > 0 {
			q.due[key] = q.clock.Now().Add(q.delay)
		}
	}
	q.signal()
	return false, nil
}

// absorbDrifts drops the waiting drift jobs into apply, a full one, which covers them. An
// incremental apply (a push to the control repo) plans only the repos whose desired state
// changed: the drifts wait for it instead, and run after it.
func (q *Queue) absorbDrifts(apply *Job) {
	kept := q.order[:0]
	for _, k := range q.order {
		w := q.waiting[k]
		if w.Kind != KindDrift {
			kept = append(kept, k)
			continue
		}
		apply.Merged += w.Merged + 1
		apply.Queued = earliest(apply.Queued, w.Queued)
		q.forgetWaiting(k)
	}
	q.order = kept
}

// MaxDriftBatch bounds how many drift jobs NextBatch hands out together: one apply limited to
// that many repos (a GraphQL page of heads), so a burst of drifts costs one org-level read
// per hundred repos instead of one per repo.
const MaxDriftBatch = 100

// Next waits for a runnable job, marks its key running and returns it. The
// caller must call Done(job.Key()) when finished. It returns ctx's error
// once ctx is done.
func (q *Queue) Next(ctx context.Context) (Job, error) {
	jobs, err := q.next(ctx, 1)
	if err != nil {
		return Job{}, err
	}
	return jobs[0], nil
}

// NextBatch is Next, except that a drift job comes with every other runnable drift job waiting
// for a repo of the same owner (at most MaxDriftBatch in all, oldest first): one apply limited
// to their repos does the work of all of them. Every job returned has its key running; the
// caller must call Done for each. Any other job comes alone.
func (q *Queue) NextBatch(ctx context.Context) ([]Job, error) {
	return q.next(ctx, MaxDriftBatch)
}

// next waits for a runnable job and takes it, with up to limit-1 drift jobs of the same owner
// when it is a drift job.
func (q *Queue) next(ctx context.Context, limit int) ([]Job, error) {
	for {
		// A done ctx wins over a waiting job: a pool shutting down starts nothing new, and the
		// waiting jobs are handed back (Drain).
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.mu.Lock()
		now := q.clock.Now()
		var wake time.Time // the earliest due time of a drift held by the delay
		for i, k := range q.order {
			j := q.waiting[k]
			if !q.runnable(j) {
				continue
			}
			if at, held := q.held(k, now); held {
				if wake.IsZero() || at.Before(wake) {
					wake = at
				}
				continue
			}
			out := []Job{*j}
			q.take(k)
			if j.Kind == KindDrift {
				owner := ownerOf(j.Repo)
				kept := q.order[:i]
				for _, k2 := range q.order[i+1:] {
					d := q.waiting[k2]
					if len(out) < limit && d.Kind == KindDrift && strings.EqualFold(ownerOf(d.Repo), owner) && q.runnable(d) {
						out = append(out, *d)
						q.take(k2)
						continue
					}
					kept = append(kept, k2)
				}
				q.order = kept
			} else {
				q.order = append(q.order[:i], q.order[i+1:]...)
			}
			q.mu.Unlock()
			return out, nil
		}
		if !wake.IsZero() {
			q.arm(now, wake)
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

// TakeDrifts takes up to n waiting drift jobs of owner's repos that may start now (held by the
// drift delay or not: they join a batch that has started, as NextBatch's do), oldest first,
// marks them running and returns them with a channel closed when the queue next changes. The
// caller must call Done for each. A Pool adds them to a drift batch that waits on work they
// would wait on too (DriftStager): the control head's render. It takes none once ctx is done
// (as Next starts none), nor once an apply finished since the batch read its head (applied is
// Applied then): that apply may have written a newer head to their repos, which the batch
// would take back.
func (q *Queue) TakeDrifts(ctx context.Context, owner string, n, applied int) ([]Job, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if ctx.Err() != nil || q.applied != applied {
		return nil, q.changed
	}
	var out []Job
	kept := q.order[:0]
	for _, k := range q.order {
		d := q.waiting[k]
		if len(out) < n && d.Kind == KindDrift && strings.EqualFold(ownerOf(d.Repo), owner) && q.runnable(d) {
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

// Applied is how many apply jobs have finished (Done).
func (q *Queue) Applied() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.applied
}

// DriftHold is how many waiting drifts the drift delay may hold in a queue of capacity: a
// twentieth of it (50 of the default 1,000), at most a batch (MaxDriftBatch), at least one.
// Drifts held for batching are waiting work: under a stream of drift events the delay alone
// must not fill the queue toward the point where deliveries are refused, and half a batch
// already saves almost all the requests a batch saves.
func DriftHold(capacity int) int {
	return max(1, min(MaxDriftBatch, capacity/20))
}

// held reports whether the waiting drift of key is held by the delay at now, and until when;
// call with q.mu held. Once DriftHold drifts wait, none is held.
func (q *Queue) held(key string, now time.Time) (time.Time, bool) {
	at, ok := q.due[key]
	if !ok || !now.Before(at) || q.waitingD >= DriftHold(q.capacity) {
		return time.Time{}, false
	}
	return at, true
}

// arm makes sure a wake-up fires by at, when the first held drift becomes due; call with
// q.mu held.
func (q *Queue) arm(now, at time.Time) {
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
func (q *Queue) forgetWaiting(key string) {
	if j := q.waiting[key]; j != nil && j.Kind == KindDrift {
		q.waitingD--
	}
	delete(q.waiting, key)
	delete(q.due, key)
}

// take marks the waiting job of key running and forgets it as waiting (the caller removes key
// from q.order); call with q.mu held.
func (q *Queue) take(key string) {
	j := q.waiting[key]
	q.forgetWaiting(key)
	q.running[key] = j.Kind
	if j.Kind == KindDrift {
		q.drifts++
	}
}

// ownerOf is the owner of an "owner/name" repo.
func ownerOf(repo string) string {
	owner, _, _ := strings.Cut(repo, "/")
	return owner
}

// runnable reports whether j may start now.
func (q *Queue) runnable(j *Job) bool {
	if _, busy := q.running[j.Key()]; busy {
		return false
	}
	if j.Kind == KindDrift {
		// Not on a repo the running apply claimed, nor on one it waits to claim: it gets
		// them once their running drifts are done, instead of waiting behind a stream of
		// drift batches that never leaves none running.
		name := repoName(j.Repo)
		return !q.claim.has(name) && !q.want.has(name)
	}
	return true
}

// repoSet is a set of target repos by lower-case name (without owner), or every repo.
type repoSet struct {
	all   bool
	names map[string]bool
}

func (s repoSet) has(name string) bool { return s.all || s.names[name] }

func (s repoSet) empty() bool { return !s.all && len(s.names) == 0 }

// repoName is the lower-case name of an "owner/name" repo.
func repoName(repo string) string {
	_, name, _ := strings.Cut(repo, "/")
	return strings.ToLower(name)
}

// Claim claims target repos (names without owner) for the running apply, or every repo when
// all is set: it waits until no drift of them runs, and keeps drifts of them from starting
// until the apply is Done; drifts of other repos go on. A second claim of the same apply adds
// to the first. It returns ctx's error when ctx ends first (the apply then writes nothing), or
// an error when no apply runs.
func (q *Queue) Claim(ctx context.Context, repos []string, all bool) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.running[string(KindApply)]; !ok {
		return errors.New("job queue: no apply is running to claim target repos")
	}
	want := repoSet{all: all || q.claim.all, names: map[string]bool{}}
	for n := range q.claim.names {
		want.names[n] = true
	}
	for _, r := range repos {
		want.names[strings.ToLower(r)] = true
	}
	q.want = want
	for q.driftsOn(want) {
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			q.mu.Lock()
			q.want = repoSet{}
			q.signal()
			return ctx.Err()
		case <-changed:
		}
		q.mu.Lock()
	}
	q.claim, q.want = want, repoSet{}
	q.signal()
	return nil
}

// Exclusive claims every target repo for the running apply (Claim).
func (q *Queue) Exclusive(ctx context.Context) error { return q.Claim(ctx, nil, true) }

// driftsOn reports whether a drift of a repo of s runs; call with q.mu held.
func (q *Queue) driftsOn(s repoSet) bool {
	if s.empty() {
		return false
	}
	if s.all {
		return q.drifts > 0
	}
	for key, kind := range q.running {
		if kind == KindDrift && s.names[repoName(strings.TrimPrefix(key, string(KindDrift)+":"))] {
			return true
		}
	}
	return false
}

// Done marks key finished, letting a job waiting on it run.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch q.running[key] {
	case KindDrift:
		q.drifts--
	case KindApply:
		q.claim, q.want = repoSet{}, repoSet{}
		q.applied++
	}
	delete(q.running, key)
	q.signal()
}

// signal wakes every waiting Next; call with q.mu held.
func (q *Queue) signal() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Len is the number of waiting jobs.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// Deepest is the most jobs that have waited at once.
func (q *Queue) Deepest() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.deepest
}

// Running is the number of jobs being worked on.
func (q *Queue) Running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.running)
}

// Drain removes and returns the waiting jobs, oldest first, then those held for a later time
// (RetryAt): at shutdown
// they are handed back (logged), and the next process's first resync
// redoes their work.
func (q *Queue) Drain() []Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Job, 0, len(q.order))
	for _, k := range q.order {
		out = append(out, *q.waiting[k])
	}
	for _, l := range q.later {
		out = append(out, l.job)
	}
	q.order, q.waiting, q.due, q.waitingD, q.later = nil, map[string]*Job{}, map[string]time.Time{}, 0, map[string]laterJob{}
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
