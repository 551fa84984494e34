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
	// DefaultWorkers is how many jobs run at once. Each apply already works
	// on several repos concurrently, and GitHub serialises writes per
	// installation, so a few workers suffice.
	DefaultWorkers = 4
	// DefaultJobTimeout bounds one job.
	DefaultJobTimeout = 15 * time.Minute
	// DefaultGrace is how long in-flight jobs may finish after shutdown
	// starts before their contexts are cancelled.
	DefaultGrace = 25 * time.Second
)

// Executor does the work of a job.
type Executor interface {
	Execute(ctx context.Context, j Job) error
}

// Pool runs jobs from a Queue on a fixed number of workers. Each job gets a
// fresh context (not the delivery's, which ends with the HTTP response),
// with a timeout; a panic fails that job only.
type Pool struct {
	Queue *Queue
	Exec  Executor
	// Workers, JobTimeout and Grace default to DefaultWorkers,
	// DefaultJobTimeout and DefaultGrace.
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
				j, err := p.Queue.Next(ctx)
				if err != nil {
					return
				}
				p.run(hard, j)
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

// run executes one job on a fresh context and reports it.
func (p *Pool) run(parent context.Context, j Job) {
	timeout := p.JobTimeout
	if timeout <= 0 {
		timeout = DefaultJobTimeout
	}
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	defer p.Queue.Done(j.Key())

	log := p.logger().With("kind", j.Kind, "repo", j.Repo, "delivery", j.Delivery, "reason", j.Reason)
	start := p.now()
	wait := start.Sub(j.Queued)
	p.Metrics.JobStarted(string(j.Kind), wait)
	log.Info("job started", "waited", wait.Round(time.Millisecond), "coalesced", j.Merged, "sha", j.SHA)

	err := p.execute(ctx, j)
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

// panicError carries a recovered panic out of a job.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// execute calls the executor, turning a panic into an error.
func (p *Pool) execute(ctx context.Context, j Job) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return p.Exec.Execute(ctx, j)
}
