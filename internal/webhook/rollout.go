package webhook

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// Reasons of the apply jobs that advance a rollout without a push or a resync.
const (
	// ReasonRolloutTimer: a soak ended or a health timeout passed (RolloutWatch's wake-up).
	ReasonRolloutTimer = "rollout.timer"
	// ReasonRolloutStatus: Flux posted a commit status on a cluster or workspace repo of the rollout.
	ReasonRolloutStatus = "status"
	// ReasonRolloutMerge: a pull request of a cluster or workspace repo of the rollout was closed or merged.
	ReasonRolloutMerge = "pull_request.closed"
)

// RolloutWatch is what serve remembers of the rollout in progress between jobs, so that it
// advances without waiting for a push or the periodic resync: the cluster and workspace repos taking part
// (a Flux commit status or a merged pull request there queues a full apply instead of a drift
// reconcile of the one repo) and the next time the verdict changes by time alone (a soak
// ending, a health timeout), when it queues a full apply itself.
//
// It only remembers what the last full apply derived from GitHub: a restarted service's
// startup resync derives it again, so nothing is lost with the process. The zero value is not
// usable; a nil *RolloutWatch watches nothing.
type RolloutWatch struct {
	// Queue receives the wake-up jobs.
	Queue *Queue
	// Control is the control repo "owner/name" (the jobs' repo).
	Control string
	// Clock schedules the wake-ups (default jobqueue.WallClock).
	Clock jobqueue.Clock
	// Logger may be nil.
	Logger *slog.Logger

	mu sync.Mutex
	// repos are the lower-case "owner/name" of the cluster and workspace repos of the rollout in progress.
	repos map[string]bool
	// at is when the wake-up is due (zero: none); stop cancels it; gen tells a stale timer
	// that fires after being replaced from the current one.
	at   time.Time
	stop func() bool
	gen  int
}

// Active reports whether fullName ("owner/name") is a cluster or workspace repo of the rollout in progress.
func (w *RolloutWatch) Active(fullName string) bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.repos[strings.ToLower(fullName)]
}

// Observe records the verdict of a full apply: repos are the cluster and workspace repos of a rollout still
// in progress or halted (nil when it is done or there is none) and next the time its verdict
// changes by time alone (zero: none). The wake-up is replaced, not added to: the newest
// verdict is the one that counts.
func (w *RolloutWatch) Observe(repos []string, next time.Time) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.repos = make(map[string]bool, len(repos))
	for _, r := range repos {
		w.repos[strings.ToLower(r)] = true
	}
	if next.Equal(w.at) {
		return
	}
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
	w.gen++
	w.at = next
	if next.IsZero() {
		return
	}
	clock := w.clock()
	gen := w.gen
	d := max(next.Sub(clock.Now()), 0)
	w.stop = clock.AfterFunc(d, func() { w.fire(gen) })
	w.log().Info("rollout wake-up scheduled", "at", next.UTC().Format(time.RFC3339), "in", d)
}

// Begin marks repos as taking part before a full apply of a control repo with waves runs:
// a merge or a Flux status that arrives while the apply is still running (its pull requests
// already open) then queues the apply after it, instead of waiting for a resync. The wake-up
// is left alone; Observe settles both once the apply has its verdict.
func (w *RolloutWatch) Begin(repos []string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.repos == nil {
		w.repos = make(map[string]bool, len(repos))
	}
	for _, r := range repos {
		w.repos[strings.ToLower(r)] = true
	}
}

// Next is when the wake-up is due (zero: none).
func (w *RolloutWatch) Next() time.Time {
	if w == nil {
		return time.Time{}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}

// fire queues the full apply that re-evaluates the rollout, unless a newer verdict replaced
// this wake-up.
func (w *RolloutWatch) fire(gen int) {
	w.mu.Lock()
	if gen != w.gen {
		w.mu.Unlock()
		return
	}
	w.at, w.stop = time.Time{}, nil
	w.mu.Unlock()
	_, err := w.Queue.Push(Job{Kind: KindApply, Repo: w.Control, Reason: ReasonRolloutTimer, Queued: w.clock().Now()})
	if err != nil {
		// The periodic resync re-evaluates the rollout anyway.
		w.log().Warn("rollout wake-up not queued; the next resync advances the rollout", "err", err)
	}
}

// Stop cancels the pending wake-up (serve's shutdown).
func (w *RolloutWatch) Stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stop != nil {
		w.stop()
	}
	w.gen++
	w.at, w.stop = time.Time{}, nil
}

func (w *RolloutWatch) clock() jobqueue.Clock {
	if w.Clock == nil {
		return jobqueue.WallClock{}
	}
	return w.Clock
}

func (w *RolloutWatch) log() *slog.Logger {
	if w.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return w.Logger
}

// rollout hands a full apply's rollout verdict to the watch (which cluster repos take part,
// when time alone changes it) and to the rollout check run on the control commit sha,
// completing the previous revision's as superseded. Failing to post the check run is logged:
// the rollout itself went on.
func (s *Service) rollout(ctx context.Context, sha string, fl *app.Fleet, rep *app.Result, log *slog.Logger) {
	if rep.Rollout == nil {
		s.cfg.Rollout.Observe(nil, time.Time{})
		return
	}
	ro := fl.Rollouts()
	p := ro.CheckRun(rep.Rollout)
	var repos []string
	if !p.Done() {
		repos = fl.RolloutRepos()
	}
	s.cfg.Rollout.Observe(repos, ro.NextWake(rep.Rollout))
	if s.cfg.RolloutChecks == nil || p.Changed == 0 {
		return
	}
	s.mu.Lock()
	prev, prevDone := s.rolloutSHA, s.rolloutDone
	s.rolloutSHA, s.rolloutDone = sha, p.Done()
	s.mu.Unlock()
	if prev != "" && prev != sha && !prevDone {
		superseded := checkrun.Result{Conclusion: checkrun.ConclusionNeutral, Title: "superseded by " + report.ShortSHA(sha),
			Summary: fmt.Sprintf("A newer control-repo commit, `%s`, is being rolled out instead; its check run `%s` shows its progress.", report.ShortSHA(sha), checkrun.RolloutCheckName)}
		if err := s.cfg.RolloutChecks.Progress(ctx, prev, superseded); err != nil {
			log.Warn("rollout check run of the superseded revision not updated", "sha", report.ShortSHA(prev), "err", err)
		}
	}
	if err := s.cfg.RolloutChecks.Progress(ctx, sha, checkrun.Result{Conclusion: p.Conclusion, Title: p.Title, Summary: p.Summary}); err != nil {
		log.Warn("rollout check run not updated", "sha", report.ShortSHA(sha), "err", err)
	}
}
