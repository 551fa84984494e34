package webhook

import (
	"context"
	"errors"
	"strings"
	"sync"
)

// DefaultQueueSize is how many distinct jobs may wait at once by default.
// Coalescing keeps one job per target repo, so this is roughly the number
// of repos that can drift in one burst before deliveries are refused.
const DefaultQueueSize = 1000

// ErrQueueFull is returned by Push when the queue holds its capacity of
// distinct jobs. The delivery is refused (503) rather than blocking the
// HTTP handler; the periodic resync catches up with what it would have done.
var ErrQueueFull = errors.New("job queue full")

// Queue is a bounded queue of jobs that coalesces by Job.Key: a job whose
// key is already waiting is merged into it instead of queued again, so ten
// pushes in a burst are one apply and ten drifts of one repo one reconcile.
// A key never runs twice at once: a job pushed while its key runs waits for
// that run to finish. An apply (the whole fleet) and drifts (single repos)
// never run together, so they do not race on the same repo's pull request,
// and a waiting apply absorbs the drifts queued behind or before it.
// NextBatch hands out the drifts waiting for one owner together, so a burst
// of drifts is a few applies limited to their repos rather than one per repo.
//
// Queue is safe for concurrent use. Push never blocks.
type Queue struct {
	mu       sync.Mutex
	capacity int
	order    []string        // waiting keys, oldest first
	waiting  map[string]*Job // by key
	running  map[string]Kind // by key
	drifts   int             // running drift jobs
	changed  chan struct{}   // closed (and replaced) when a job may have become runnable
}

// NewQueue returns a Queue holding at most capacity waiting jobs
// (DefaultQueueSize if capacity <= 0).
func NewQueue(capacity int) *Queue {
	if capacity <= 0 {
		capacity = DefaultQueueSize
	}
	return &Queue{capacity: capacity, waiting: map[string]*Job{}, running: map[string]Kind{}, changed: make(chan struct{})}
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
		q.signal()
		return true, nil
	}
	if j.Kind == KindDrift {
		if apply, ok := q.waiting[string(KindApply)]; ok {
			apply.Merged++
			apply.Queued = earliest(apply.Queued, j.Queued)
			return true, nil
		}
	}
	if j.Kind == KindApply {
		q.absorbDrifts(&j)
	}
	if len(q.order) >= q.capacity {
		return false, ErrQueueFull
	}
	q.waiting[key] = &j
	q.order = append(q.order, key)
	q.signal()
	return false, nil
}

// absorbDrifts drops the waiting drift jobs into apply, which covers them.
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
		delete(q.waiting, k)
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
		for i, k := range q.order {
			j := q.waiting[k]
			if !q.runnable(j) {
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
		changed := q.changed
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		}
	}
}

// take marks the waiting job of key running and forgets it as waiting (the caller removes key
// from q.order); call with q.mu held.
func (q *Queue) take(key string) {
	j := q.waiting[key]
	delete(q.waiting, key)
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
	switch j.Kind {
	case KindApply:
		return q.drifts == 0
	case KindDrift:
		_, applying := q.running[string(KindApply)]
		return !applying
	}
	return true
}

// Done marks key finished, letting a job waiting on it run.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running[key] == KindDrift {
		q.drifts--
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

// Running is the number of jobs being worked on.
func (q *Queue) Running() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.running)
}

// Drain removes and returns the waiting jobs, oldest first: at shutdown
// they are handed back (logged), and the next process's first resync
// redoes their work.
func (q *Queue) Drain() []Job {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]Job, 0, len(q.order))
	for _, k := range q.order {
		out = append(out, *q.waiting[k])
	}
	q.order, q.waiting = nil, map[string]*Job{}
	return out
}
