package webhook

import (
	"context"
	"log/slog"
	"time"
)

// DefaultResyncInterval is how often the whole fleet is reconciled even
// without a webhook, to catch deliveries GitHub never made or that were
// refused.
const DefaultResyncInterval = 10 * time.Minute

// Resync queues an apply of the whole fleet at once and then every
// Interval: the safety net for missed or refused deliveries. State lives in
// git and GitHub, so a restarted service loses nothing: its first resync
// finds whatever is left to do.
type Resync struct {
	Queue *Queue
	// Control is the control repo "owner/name", for the jobs' logs.
	Control string
	// Interval defaults to DefaultResyncInterval.
	Interval time.Duration
	Logger   *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Recover, when set, returns the jobs a resync adds to its apply: the checks of the
	// control pull requests, and the tenant checks of the workspace and cluster repos' pull
	// requests, whose head has no completed check run (Service.Recover).
	Recover func(ctx context.Context) ([]Job, error)
}

// Run queues resyncs until ctx is done. scheduled, if not nil, is called
// once the first resync is queued (readiness).
func (r *Resync) Run(ctx context.Context, scheduled func()) {
	interval := r.Interval
	if interval <= 0 {
		interval = DefaultResyncInterval
	}
	log := r.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := r.Now
	if now == nil {
		now = time.Now
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	first := true
	for {
		_, err := r.Queue.Push(Job{Kind: KindApply, Repo: r.Control, Reason: "resync", Queued: now()})
		switch {
		case err != nil:
			log.Warn("resync not queued", "err", err)
		case first:
			first = false
			log.Info("first resync queued", "interval", interval)
			if scheduled != nil {
				scheduled()
			}
		}
		r.recover(ctx, log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// recover queues the jobs Recover finds (nothing without it); what it could not read is logged
// and asked again at the next resync.
func (r *Resync) recover(ctx context.Context, log *slog.Logger) {
	if r.Recover == nil {
		return
	}
	jobs, err := r.Recover(ctx)
	if err != nil && ctx.Err() == nil {
		log.Warn("resync: recovering pull request checks; the next resync tries again", "err", err)
	}
	for _, j := range jobs {
		if _, err := r.Queue.Push(j); err != nil {
			log.Warn("resync: check not queued; the next resync tries again", "repo", j.Repo, "pr", j.PR, "err", err)
		}
	}
}
