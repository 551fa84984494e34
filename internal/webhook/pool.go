package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/metrics"
)

// Defaults of a Pool.
const (
	// DefaultWorkers is how many jobs run at once. Each apply already works on several repos
	// concurrently, and GitHub serialises writes per installation; but a check or a full apply
	// of a 1,000-repo fleet holds its worker for a second or two, and every drift batch waits
	// on GitHub's answers. The deepest queue of the bench's 1,000 deliveries a second peaks when
	// every worker is busy: with four workers 74-123 of 1,000, with eight 70-153, with sixteen
	// 64-98 (runs on 2 CPUs shared with the fake GitHub and the sender). Sixteen jobs at
	// --concurrency 4 send some 64 requests at once (a job's control repo load and org read add
	// a few), below GitHub's 100 concurrent requests.
	DefaultWorkers = 16
	// DefaultGrace is how long in-flight jobs may finish after shutdown
	// starts before their contexts are cancelled.
	DefaultGrace = 25 * time.Second
)

// Executor does the work of a job.
type Executor interface {
	// Execute runs j. lease is what the running job holds of the queue: an apply job claims
	// the target repos it writes through it (Lease.Claim); for other jobs it claims nothing.
	Execute(ctx context.Context, j Job, lease Lease) error
}

// Lease is a running job's hold on the queue, passed to Executor.Execute: an apply job claims
// through it the target repos it is about to write (Queue.Claim), so that no drift of them runs
// meanwhile. It is an explicit parameter, never a value in a context.
type Lease interface {
	// Claim claims target repos (names without owner), or every repo when all, for the running
	// job: it returns once no drift of them runs, and no drift of them starts until the job is
	// done. It returns ctx's error when ctx ends first (the job then writes nothing).
	Claim(ctx context.Context, repos []string, all bool) error
}

// NoLease is the Lease of a job that claims nothing: a drift, a check, a job run outside a Pool.
type NoLease struct{}

// Claim claims nothing and returns nil.
func (NoLease) Claim(context.Context, []string, bool) error { return nil }

// ApplyPreparer is an Executor that claims the target repos of its apply jobs itself, through
// its Lease, once it knows them and has done the work that touches no target repo (reading and
// rendering the control repo), so that drifts run meanwhile and beside it. For other Executors
// the Pool claims every repo before Execute.
type ApplyPreparer interface {
	Executor
	// PreparesApplies reports that Execute claims what an apply job writes before it writes.
	PreparesApplies() bool
}

// DriftBatcher is an Executor that does the work of several drift jobs (of one owner, distinct
// repos) in one run, reporting each job's own error at the same index (nil when its repo
// converged). A Pool whose Executor is not one runs a batch's jobs one after the other.
type DriftBatcher interface {
	ExecuteDrifts(ctx context.Context, jobs []Job) []error
}

// DriftStager is a DriftBatcher whose drift batches first do work that every batch of the
// same state shares (serve: read the control repo's head and render it, once per commit).
// While a batch waits on that work, the Pool adds to it the drifts of its owner that may start
// meanwhile (Queue.TakeDrifts), up to MaxDriftBatch: they would wait on the same work, and one
// apply does all of them. A render of a new control head then keeps its drifts in a few
// batches instead of a queue that grows for as long as it takes.
type DriftStager interface {
	DriftBatcher
	// StageDrifts does that shared work and returns the function that reconciles a batch on
	// it, reporting each job's error at its index as ExecuteDrifts does.
	StageDrifts(ctx context.Context) (func(ctx context.Context, jobs []Job) []error, error)
}

// Pool runs jobs from a Queue on a fixed number of workers. Each job gets a
// fresh context (not the delivery's, which ends with the HTTP response),
// with no deadline (a long job is not failed for being long: a full apply of many changed repos
// runs in bounded steps, Service.applyInSteps, and the write budget defers what it cannot admit
// to a known time); a panic fails that job only.
type Pool struct {
	Queue *Queue
	Exec  Executor
	// Workers and Grace default to DefaultWorkers and DefaultGrace. JobTimeout, when set, bounds
	// each job; zero (the default) sets no deadline.
	Workers    int
	JobTimeout time.Duration
	Grace      time.Duration
	// Logger and Metrics may be nil.
	Logger  *slog.Logger
	Metrics *metrics.Metrics
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Run works until ctx is done, then shuts down gracefully: workers take no
// new job, in-flight jobs get Grace to finish before their contexts are
// cancelled, and jobs still waiting are handed back (logged; state lives in
// git and GitHub, so the next process's first resync redoes them). It
// returns once every worker has stopped.
func (p *Pool) Run(ctx context.Context) error {
	if p.Queue == nil || p.Exec == nil {
		return errors.New("webhook pool: no queue or executor")
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
	if left := p.Queue.Drain(); len(left) > 0 {
		for _, j := range left {
			log.Info("job handed back to the next resync", "kind", j.Kind, "repo", j.Repo, "delivery", j.Delivery, "reason", j.Reason)
		}
	}
	return nil
}

func (p *Pool) logger() *slog.Logger {
	if p.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Logger
}

func (p *Pool) now() time.Time {
	if p.Now == nil {
		return time.Now()
	}
	return p.Now()
}

// runBatch executes jobs (one job, or drift jobs taken together) on a fresh context derived
// from parent and reports each job: every delivery is counted and logged as when it ran alone.
// Once the pool's ctx is done, a batch takes no more jobs.
func (p *Pool) runBatch(ctx, parent context.Context, jobs []Job) {
	if s, ok := p.Exec.(DriftStager); ok && jobs[0].Kind == KindDrift {
		p.runStaged(ctx, parent, s, jobs)
		return
	}
	b, batched := p.Exec.(DriftBatcher)
	if len(jobs) == 1 || !batched {
		for _, j := range jobs {
			p.run(parent, j)
		}
		return
	}
	for _, j := range jobs {
		defer p.Queue.Done(j.Key())
	}
	ctx, cancel := p.jobContext(parent)
	defer cancel()
	start := make([]time.Time, len(jobs))
	for i, j := range jobs {
		start[i] = p.started(j)
	}
	p.logger().Debug("drift jobs batched into one apply", "jobs", len(jobs))
	errs := p.executeDrifts(jobs, func() []error { return b.ExecuteDrifts(ctx, jobs) })
	for i, j := range jobs {
		p.report(ctx, j, start[i], func() error { return errs[i] })
	}
}

// runStaged runs drift jobs (of one owner) with a DriftStager: it stages the batch and, until
// that is done, takes into the batch the drifts of the owner that may start meanwhile (at most
// MaxDriftBatch in all, and none once the pool's ctx is done); then it reconciles them
// together and reports each job.
func (p *Pool) runStaged(pool, parent context.Context, s DriftStager, jobs []Job) {
	defer func() {
		for _, j := range jobs { // the jobs taken while staging too
			p.Queue.Done(j.Key())
		}
	}()
	ctx, cancel := p.jobContext(parent)
	defer cancel()
	start := make([]time.Time, len(jobs))
	for i, j := range jobs {
		start[i] = p.started(j)
	}
	type stage struct {
		run func(context.Context, []Job) []error
		err error
	}
	staged := make(chan stage, 1)
	applied := p.Queue.Applied() // before staging reads the head
	go func() {
		var st stage
		defer func() {
			if v := recover(); v != nil {
				st = stage{err: &panicError{value: v, stack: debug.Stack()}}
			}
			staged <- st
		}()
		st.run, st.err = s.StageDrifts(ctx)
	}()
	owner := ownerOf(jobs[0].Repo)
	var st stage
	for waiting := true; waiting; {
		// changed and stop stay nil once the batch is full or the pool stops: then only
		// staging ends the wait.
		var changed, stop <-chan struct{}
		if len(jobs) < MaxDriftBatch && pool.Err() == nil {
			var more []Job
			more, changed = p.Queue.TakeDrifts(pool, owner, MaxDriftBatch-len(jobs), applied)
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
		p.logger().Debug("drift jobs batched into one apply", "jobs", len(jobs))
	}
	var errs []error
	if st.err != nil {
		errs = make([]error, len(jobs))
		for i := range errs {
			errs[i] = st.err
		}
	} else {
		errs = p.executeDrifts(jobs, func() []error { return st.run(ctx, jobs) })
	}
	for i, j := range jobs {
		p.report(ctx, j, start[i], func() error { return errs[i] })
	}
}

// started records that j starts now and returns when.
func (p *Pool) started(j Job) time.Time {
	start := p.now()
	wait := start.Sub(j.Queued)
	p.Metrics.JobStarted(string(j.Kind), wait)
	p.jobLogger(j).Info("job started", "waited", wait.Round(time.Millisecond), "coalesced", j.Merged, "sha", j.SHA)
	return start
}

func (p *Pool) jobLogger(j Job) *slog.Logger {
	return p.logger().With("kind", j.Kind, "repo", j.Repo, "delivery", j.Delivery, "reason", j.Reason)
}

// report runs (or collects) j's outcome and records it.
func (p *Pool) report(ctx context.Context, j Job, start time.Time, run func() error) {
	log := p.jobLogger(j)
	err := run()
	took := p.now().Sub(start)
	outcome := "ok"
	var pe *panicError
	switch {
	case err == nil:
		log.Info("job done", "took", took.Round(time.Millisecond), "latency", p.now().Sub(j.Queued).Round(time.Millisecond))
	case errors.As(err, &pe):
		outcome = "panic"
		log.Error("job panicked; the next resync retries", "panic", fmt.Sprint(pe.value), "stack", string(pe.stack))
	case ctx.Err() != nil:
		outcome = "canceled"
		log.Warn("job cancelled; handed back to the next resync", "took", took.Round(time.Millisecond), "err", err)
	default:
		outcome = "error"
		log.Error("job failed; the next resync retries", "took", took.Round(time.Millisecond), "err", err)
	}
	p.Metrics.JobDone(string(j.Kind), outcome, took)
}

// jobContext is a job's context: parent, bounded by JobTimeout when one is set.
func (p *Pool) jobContext(parent context.Context) (context.Context, context.CancelFunc) {
	if p.JobTimeout <= 0 {
		return context.WithCancel(parent)
	}
	return context.WithTimeout(parent, p.JobTimeout)
}

// run executes one job on a fresh context, reports it and marks it done.
func (p *Pool) run(parent context.Context, j Job) {
	defer p.Queue.Done(j.Key())
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

// execute calls the executor, turning a panic into an error. An apply job gets the queue as its
// Lease to claim target repos with, or claims them all first when the executor does not prepare
// its applies; other jobs get NoLease.
func (p *Pool) execute(ctx context.Context, j Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	var lease Lease = NoLease{}
	if j.Kind == KindApply {
		lease = p.Queue
		if ap, ok := p.Exec.(ApplyPreparer); !ok || !ap.PreparesApplies() {
			if err := p.Queue.Exclusive(ctx); err != nil {
				return err
			}
		}
	}
	return p.Exec.Execute(ctx, j, lease)
}

// executeDrifts runs a batch of jobs with run, turning a panic into an error of every job and
// a result of the wrong length into an error rather than a lost report.
func (p *Pool) executeDrifts(jobs []Job, run func() []error) (errs []error) {
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
		err := fmt.Errorf("drift batch: the executor reported %d results for %d jobs", len(errs), len(jobs))
		errs = make([]error, len(jobs))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}
