package jobqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// Defaults of a Pool.
const (
	// DefaultWorkers is how many jobs run at once. fleetbot serve's jobs each work on several
	// target repos at once and wait on GitHub's answers: the deepest queue of the bench's 1,000
	// deliveries a second peaks when every worker is busy: with four workers 74-123 of 1,000,
	// with eight 70-153, with sixteen 64-98 (runs on 2 CPUs shared with the fake GitHub and the
	// sender). Sixteen jobs at --concurrency 4 send some 64 requests at once, below GitHub's 100
	// concurrent requests.
	DefaultWorkers = 16
	// DefaultGrace is how long in-flight jobs may finish after shutdown
	// starts before their contexts are cancelled.
	DefaultGrace = 25 * time.Second
)

// Executor does the work of a job.
type Executor[J any] interface {
	// Execute runs j. lease is what the running job holds of the queue: a claimer claims the
	// targets it writes through it (Lease.Claim); for other jobs it claims nothing.
	Execute(ctx context.Context, j J, lease Lease) error
}

// Lease is a running job's hold on the queue, passed to Executor.Execute: a claimer claims
// through it the targets it is about to write (Queue.Claim), so that no batched job of them runs
// meanwhile. It is an explicit parameter, never a value in a context.
type Lease interface {
	// Claim claims targets, or every target when all, for the running job: it returns once no
	// batched job of them runs, and no batched job of them starts until the job is done. It
	// returns ctx's error when ctx ends first (the job then writes nothing).
	Claim(ctx context.Context, targets []string, all bool) error
}

// NoLease is the Lease of a job that claims nothing: a batched or plain job, a job run outside
// a Pool.
type NoLease struct{}

// Claim claims nothing and returns nil.
func (NoLease) Claim(context.Context, []string, bool) error { return nil }

// Preparer is an Executor that claims the targets of its claimers itself, through their Lease,
// once it knows them and has done the work that touches no target, so that batched jobs run
// meanwhile and beside it. For other Executors the Pool claims every target before Execute.
type Preparer interface {
	// PreparesClaims reports that Execute claims what a claimer writes before it writes.
	PreparesClaims() bool
}

// Batcher is an Executor that does the work of several batched jobs (of one group, distinct
// keys) in one run, reporting each job's own error at the same index (nil when it succeeded).
// A Pool whose Executor is not one runs a batch's jobs one after the other.
type Batcher[J any] interface {
	ExecuteBatch(ctx context.Context, jobs []J) []error
}

// Stager is a Batcher whose batches first do work that every batch of the same state shares.
// While a batch waits on that work, the Pool adds to it the batched jobs of its group that may
// start meanwhile (Queue.TakeBatch), up to MaxBatch: they would wait on the same work, and one
// run does all of them.
type Stager[J any] interface {
	Batcher[J]
	// StageBatch does that shared work and returns the function that runs a batch on it,
	// reporting each job's error at its index as ExecuteBatch does.
	StageBatch(ctx context.Context) (func(ctx context.Context, jobs []J) []error, error)
}

// Metrics records what a Pool does; *metrics.Metrics of fleetbot serve is one.
type Metrics interface {
	// JobStarted records a job labelled label (About.Label) starting after waiting wait.
	JobStarted(label string, wait time.Duration)
	// JobDone records a job labelled label ending with outcome ("ok", "error", "panic",
	// "canceled") after running took.
	JobDone(label, outcome string, took time.Duration)
}

// Pool runs jobs from a Queue on a fixed number of workers. Each job gets a fresh context (not
// the one of whoever pushed it), with no deadline unless JobTimeout sets one; a panic fails that
// job only.
type Pool[J any] struct {
	Queue *Queue[J]
	Exec  Executor[J]
	// Workers and Grace default to DefaultWorkers and DefaultGrace. JobTimeout, when set, bounds
	// each job; zero (the default) sets no deadline: a long job is not failed for being long
	// (the executor bounds its steps, as serve's full apply in steps does).
	Workers    int
	JobTimeout time.Duration
	Grace      time.Duration
	// Logger and Metrics may be nil.
	Logger  *slog.Logger
	Metrics Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Finished, when set, is called with each job once it is over: logged, counted in Metrics
	// and Done in the queue (tests wait on it rather than on time).
	Finished func(j J)
}

// Run works until ctx is done, then shuts down gracefully: workers take no new job, in-flight
// jobs get Grace to finish before their contexts are cancelled, and jobs still waiting are
// handed back (logged). It returns once every worker has stopped.
func (p *Pool[J]) Run(ctx context.Context) error {
	if p.Queue == nil || p.Exec == nil {
		return errors.New("job pool: no queue or executor")
	}
	workers, grace := p.Workers, p.Grace
	if workers <= 0 {
		workers = DefaultWorkers
	}
	if grace <= 0 {
		grace = DefaultGrace
	}
	log := p.logger()

	// jobs derive from hard, which outlives ctx by the grace period.
	hard, cancelHard := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHard()
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			if n := p.Queue.Running(); n > 0 {
				log.Warn("grace period over; cancelling in-flight jobs", "jobs", n, "grace", grace)
			}
			cancelHard()
		case <-hard.Done():
		}
	})
	defer stopGrace()

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				jobs, err := p.Queue.NextBatch(ctx)
				if err != nil {
					return
				}
				p.runBatch(ctx, hard, jobs)
			}
		}()
	}
	wg.Wait()
	for _, j := range p.Queue.Drain() {
		log.Info("job handed back to the next resync", p.Queue.policy.About(j).Attrs...)
	}
	return nil
}

func (p *Pool[J]) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

func (p *Pool[J]) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

func (p *Pool[J]) key(j J) string { return p.Queue.policy.Key(j) }

// runBatch executes jobs (one job, or batched jobs taken together) on a fresh context derived
// from parent and reports each job: every job is counted and logged as when it ran alone.
// Once the pool's ctx is done, a batch takes no more jobs.
func (p *Pool[J]) runBatch(ctx, parent context.Context, jobs []J) {
	if s, ok := p.Exec.(Stager[J]); ok && p.Queue.policy.Class(jobs[0]) == ClassBatched {
		p.runStaged(ctx, parent, s, jobs)
		return
	}
	b, batched := p.Exec.(Batcher[J])
	if len(jobs) == 1 || !batched {
		for _, j := range jobs {
			p.run(parent, j)
		}
		return
	}
	for _, j := range jobs {
		defer p.done(j)
	}
	ctx, cancel := p.jobContext(parent)
	defer cancel()
	start := make([]time.Time, len(jobs))
	for i, j := range jobs {
		start[i] = p.started(j)
	}
	p.logger().Debug("jobs batched into one run", "jobs", len(jobs))
	errs := p.executeBatch(jobs, func() []error { return b.ExecuteBatch(ctx, jobs) })
	for i, j := range jobs {
		p.report(ctx, j, start[i], func() error { return errs[i] })
	}
}

// stage is the outcome of a Stager's StageBatch.
type stage[J any] struct {
	run func(context.Context, []J) []error
	err error
}

// runStaged runs batched jobs (of one group) with a Stager: it stages the batch and, until that
// is done, takes into the batch the jobs of the group that may start meanwhile (at most
// MaxBatch in all, and none once the pool's ctx is done); then it runs them together and
// reports each job.
func (p *Pool[J]) runStaged(pool, parent context.Context, s Stager[J], jobs []J) {
	defer func() {
		for _, j := range jobs { // the jobs taken while staging too
			p.done(j)
		}
	}()
	ctx, cancel := p.jobContext(parent)
	defer cancel()
	start := make([]time.Time, len(jobs))
	for i, j := range jobs {
		start[i] = p.started(j)
	}
	staged := make(chan stage[J], 1)
	settled := p.Queue.Settled() // before staging reads what a claimer may write
	go func() {
		var st stage[J]
		defer func() {
			if v := recover(); v != nil {
				st = stage[J]{err: &panicError{value: v, stack: debug.Stack()}}
			}
			staged <- st
		}()
		st.run, st.err = s.StageBatch(ctx)
	}()
	group := p.Queue.policy.Group(jobs[0])
	var st stage[J]
	for waiting := true; waiting; {
		// changed and stop stay nil once the batch is full or the pool stops: then only
		// staging ends the wait.
		var changed, stop <-chan struct{}
		if len(jobs) < MaxBatch && pool.Err() == nil {
			var more []J
			more, changed = p.Queue.TakeBatch(pool, group, MaxBatch-len(jobs), settled)
			stop = pool.Done()
			for _, j := range more {
				jobs = append(jobs, j)
				start = append(start, p.started(j))
			}
		}
		select {
		case st = <-staged:
			waiting = false
		case <-changed:
		case <-stop:
		}
	}
	if len(jobs) > 1 {
		p.logger().Debug("jobs batched into one run", "jobs", len(jobs))
	}
	var errs []error
	if st.err != nil {
		errs = make([]error, len(jobs))
		for i := range errs {
			errs[i] = st.err
		}
	} else {
		errs = p.executeBatch(jobs, func() []error { return st.run(ctx, jobs) })
	}
	for i, j := range jobs {
		p.report(ctx, j, start[i], func() error { return errs[i] })
	}
}

// started records that j starts now and returns when.
func (p *Pool[J]) started(j J) time.Time {
	start := p.now()
	a := p.Queue.policy.About(j)
	wait := start.Sub(a.Queued)
	if p.Metrics != nil {
		p.Metrics.JobStarted(a.Label, wait)
	}
	p.logger().With(a.Attrs...).Info("job started", append([]any{"waited", wait.Round(time.Millisecond), "coalesced", a.Coalesced}, a.Detail...)...)
	return start
}

// done marks j Done in the queue and tells Finished.
func (p *Pool[J]) done(j J) {
	p.Queue.Done(p.key(j))
	if p.Finished != nil {
		p.Finished(j)
	}
}

// report runs (or collects) j's outcome and records it: counted in Metrics, then logged, so
// that whoever reads the log line finds the job counted.
func (p *Pool[J]) report(ctx context.Context, j J, start time.Time, run func() error) {
	a := p.Queue.policy.About(j)
	log := p.logger().With(a.Attrs...)
	err := run()
	took := p.now().Sub(start)
	var pe *panicError
	var outcome string
	switch {
	case err == nil:
		outcome = "ok"
	case errors.As(err, &pe):
		outcome = "panic"
	case ctx.Err() != nil:
		outcome = "canceled"
	default:
		outcome = "error"
	}
	if p.Metrics != nil {
		p.Metrics.JobDone(a.Label, outcome, took)
	}
	switch outcome {
	case "ok":
		log.Info("job done", "took", took.Round(time.Millisecond), "latency", p.now().Sub(a.Queued).Round(time.Millisecond))
	case "panic":
		log.Error("job panicked; the next resync retries", "panic", fmt.Sprint(pe.value), "stack", string(pe.stack))
	case "canceled":
		log.Warn("job cancelled; handed back to the next resync", "took", took.Round(time.Millisecond), "err", err)
	default:
		log.Error("job failed; the next resync retries", "took", took.Round(time.Millisecond), "err", err)
	}
}

// jobContext is a job's context: parent, bounded by JobTimeout when one is set.
func (p *Pool[J]) jobContext(parent context.Context) (context.Context, context.CancelFunc) {
	if p.JobTimeout <= 0 {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, p.JobTimeout)
}

// run executes one job on a fresh context, reports it and marks it done.
func (p *Pool[J]) run(parent context.Context, j J) {
	defer p.done(j)
	ctx, cancel := p.jobContext(parent)
	defer cancel()
	p.report(ctx, j, p.started(j), func() error { return p.execute(ctx, j) })
}

// panicError carries a recovered panic out of a job.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// execute calls the executor, turning a panic into an error. A claimer gets the queue as its
// Lease to claim targets with, or claims them all first when the executor does not prepare its
// claims; other jobs get NoLease.
func (p *Pool[J]) execute(ctx context.Context, j J) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	var lease Lease = NoLease{}
	if p.Queue.policy.Class(j) == ClassClaimer {
		lease = p.Queue
		if pr, ok := p.Exec.(Preparer); !ok || !pr.PreparesClaims() {
			if err := p.Queue.Exclusive(ctx); err != nil {
				return err
			}
		}
	}
	return p.Exec.Execute(ctx, j, lease)
}

// executeBatch runs a batch of jobs with run, turning a panic into an error of every job and a
// result of the wrong length into an error rather than a lost report.
func (p *Pool[J]) executeBatch(jobs []J, run func() []error) (errs []error) {
	defer func() {
		if v := recover(); v != nil {
			err := &panicError{value: v, stack: debug.Stack()}
			errs = make([]error, len(jobs))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	errs = run()
	if len(errs) != len(jobs) {
		err := fmt.Errorf("job batch: the executor reported %d results for %d jobs", len(errs), len(jobs))
		errs = make([]error, len(jobs))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}
