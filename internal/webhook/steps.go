package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// A full apply never fails for being long. Jobs have no deadline; a full apply whose fleet has
// more than StepRepos target repos to bring to a new desired state (onboarding 1,000 clusters:
// every repo is new) makes progress in steps of StepRepos repos: each step applies its repos
// (Only), records them as done (in memory and, with StepsFile, on disk), and queues the next
// step as the apply job itself (at once, or at the write budget's next slot when the step's
// repos were all deferred by it), so drifts, checks and deliveries run between steps and a
// restart or a later job resumes with the repos not done. Once no repo is pending, the last
// step is the ordinary full apply: it finds the repos converged (reads only), handles what only
// a full run sees (repos that left the control repo, the control repo's access, the rollout)
// and records the baseline incremental pushes plan against. A fleet within StepRepos changed
// repos (every resync of a converged fleet) is one full apply, as before.

// DefaultStepRepos is how many target repos one step of a full apply plans. At fleetbot's
// default write budget a new repo costs 3 content-creating requests, and GitHub admits 80 a
// minute and 500 an hour: a step of 100 new repos is about 300 writes, well under an hour.
const DefaultStepRepos = 100

// ReasonStep is the reason of the apply job that runs the next step of a full apply.
const ReasonStep = "resync.step"

// stepsVersion is the StepsFile format; a file of another version is ignored.
const stepsVersion = 1

// stepProgress is the progress of the full apply in steps under way: which target repos of the
// control commit Source are done.
type stepProgress struct {
	Version int    `json:"version"`
	Source  string `json:"source"`
	Owner   string `json:"owner"`
	// Started is when the first step ran; Total how many repos the steps cover.
	Started time.Time `json:"started"`
	Total   int       `json:"total"`
	// Done are the repos done (names, lower case): converged, failed (the next resync retries
	// them) or deferred until a known time (queued again for then).
	Done []string `json:"done"`
	// Pending are the repos still to do and ResumeAt when the next step runs.
	Pending  int       `json:"pending"`
	ResumeAt time.Time `json:"resumeAt"`
	// repos are the target repos the steps cover (for the status pages).
	repos []app.StatusRunRepo
}

// StepStatus is what the status page and the logs say of a full apply in steps.
type StepStatus struct {
	// Active is false when no full apply runs in steps.
	Active bool
	// Source is the control commit applied; Done and Pending count target repos.
	Source        string
	Done, Pending int
	// ResumeAt is when the next step runs.
	ResumeAt time.Time
}

// Steps returns the progress of the full apply in steps under way.
func (s *Service) Steps() StepStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.steps
	if p == nil {
		return StepStatus{}
	}
	return StepStatus{Active: true, Source: p.Source, Done: len(p.Done), Pending: p.Pending, ResumeAt: p.ResumeAt}
}

// StatusRun is the full apply in steps under way as the status pages show it (the repos it
// covers, when its next step runs); nil when none is.
func (s *Service) StatusRun() *app.StatusRun {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.steps
	if p == nil || len(p.repos) == 0 {
		return nil
	}
	run := &app.StatusRun{Source: p.Source, Started: p.Started, Repos: p.repos}
	if p.ResumeAt.After(s.cfg.Runner.Now()) {
		run.ResumeAt = p.ResumeAt
	}
	return run
}

// stepRepos is the configured step size.
func (s *Service) stepRepos() int {
	if s.cfg.StepRepos > 0 {
		return s.cfg.StepRepos
	}
	return DefaultStepRepos
}

// pendingSteps returns the target repos of e (of this replica's shard) a full apply in steps
// still has to do, sorted, and the progress it resumes (nil: none is under way and the fleet's
// changed repos fit one step: the job is one full apply). A repo is changed when its desired
// state differs from the baseline of the last converged apply (every repo without one).
func (s *Service) pendingSteps(e *fleetEntry) ([]string, *stepProgress) {
	fl := e.fleet
	owner := strings.ToLower(fl.Owner())
	s.mu.Lock()
	p := s.steps
	if p == nil {
		p = s.loadSteps()
	}
	s.mu.Unlock()
	if p != nil && (p.Source != e.sha || p.Owner != owner) {
		p = nil // a newer commit: its steps start over (the repos done are then unchanged)
	}
	repos := s.cfg.Runner.Changed(e.fleet)
	done := map[string]bool{}
	if p != nil {
		for _, r := range p.Done {
			done[r] = true
		}
	}
	var pending []string
	total := len(repos)
	for _, r := range repos {
		_, name, _ := strings.Cut(r.Repo, "/")
		if !done[strings.ToLower(name)] {
			pending = append(pending, name)
		}
	}
	if p == nil {
		s.mu.Lock()
		closed := s.stepsClosed == e.sha
		s.mu.Unlock()
		if total <= s.stepRepos() || closed {
			// Few changed repos, or the steps of this commit ended already (a repo that did
			// not converge keeps the baseline from being recorded): one full apply.
			return nil, nil
		}
		p = &stepProgress{Version: stepsVersion, Source: e.sha, Owner: owner, Started: s.cfg.Runner.Now(), Total: total}
	}
	p.repos = repos
	slices.Sort(pending)
	return pending, p
}

// applyInSteps runs the next step of a full apply in steps: the next StepRepos pending repos,
// or the closing full apply once none is pending. It reports whether it ran a step (false: the
// job is an ordinary full apply).
func (s *Service) applyInSteps(ctx context.Context, j Job, e *fleetEntry, lease jobqueue.Lease) (bool, error) {
	pending, p := s.pendingSteps(e)
	if p == nil {
		return false, nil
	}
	log := s.log.With("delivery", j.Delivery, "kind", j.Kind, "source", report.ShortSHA(e.sha))
	if len(pending) == 0 {
		s.setSteps(nil)
		s.mu.Lock()
		s.stepsClosed = e.sha
		s.mu.Unlock()
		log.Info("full apply in steps: every repo done; the closing full apply runs now", "repos", p.Total)
		return false, nil
	}
	step := pending[:min(len(pending), s.stepRepos())]
	rep, err := s.applyReport(ctx, j, step, e, lease)
	if rep == nil {
		return true, err
	}
	// The next step runs at once, or, when the write budget deferred every repo of this one,
	// at the earliest slot it announced.
	now := s.cfg.Runner.Now()
	var earliest time.Time
	deferredAll := len(rep.Results) > 0
	doneNow := map[string]bool{}
	for _, r := range rep.Results {
		o := r.Outcome()
		if ctx.Err() != nil && o.Class == report.ClassRetryable {
			continue // cut short by the shutdown: not done
		}
		_, name, _ := strings.Cut(r.Repo, "/")
		doneNow[strings.ToLower(name)] = true
		switch {
		case o.Class != report.ClassDeferred || o.RetryAt.IsZero():
			deferredAll = false
		case earliest.IsZero() || o.RetryAt.Before(earliest):
			earliest = o.RetryAt
		}
	}
	resume := now
	if deferredAll && earliest.After(now) {
		resume = earliest
	}
	for r := range doneNow {
		p.Done = append(p.Done, r)
	}
	slices.Sort(p.Done)
	p.Pending = len(pending) - len(doneNow)
	p.ResumeAt = resume
	s.setSteps(p)
	if len(doneNow) == 0 || ctx.Err() != nil {
		// No progress (the run failed as a whole, or stopped): the error is the job's, and the
		// next resync (or the retry time the run announced) resumes the steps; queuing the next
		// step at once would only fail again.
		log.Warn("full apply in steps: the step made no progress; the next resync resumes", "pending", p.Pending, "total", p.Total, "err", err)
		return true, err
	}
	log.Info("full apply in steps: step done; the next step is queued", "step", len(step), "done", len(p.Done),
		"pending", p.Pending, "total", p.Total, "resumes_at", resume.UTC().Format(time.RFC3339))
	if s.cfg.Requeue != nil {
		s.cfg.Requeue(Job{Kind: KindApply, Repo: j.Repo, Reason: ReasonStep, Queued: resume}, resume)
	}
	return true, err
}

// setSteps records p as the progress under way (nil: none) and writes it to StepsFile.
func (s *Service) setSteps(p *stepProgress) {
	s.mu.Lock()
	s.steps = p
	s.mu.Unlock()
	if err := writeSteps(s.cfg.StepsFile, p); err != nil {
		s.log.Warn("writing the progress of the full apply in steps; a restart redoes the steps done (they are converged: reads only)",
			"file", s.cfg.StepsFile, "err", err)
	}
}

// loadSteps reads StepsFile (s.mu held); nil when there is none or it is unusable.
func (s *Service) loadSteps() *stepProgress {
	if s.cfg.StepsFile == "" {
		return nil
	}
	data, err := os.ReadFile(s.cfg.StepsFile)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("cannot read the progress of a full apply in steps; its steps start over", "file", s.cfg.StepsFile, "err", err)
		}
		return nil
	}
	var p stepProgress
	if err := json.Unmarshal(data, &p); err != nil || p.Version != stepsVersion {
		s.log.Warn("ignoring the progress file of a full apply in steps (corrupt or of another version); its steps start over",
			"file", s.cfg.StepsFile, "err", err)
		return nil
	}
	s.steps = &p
	return &p
}

// writeSteps writes p to file atomically (file "": nothing; p nil: removes it).
func writeSteps(file string, p *stepProgress) error {
	if file == "" {
		return nil
	}
	if p == nil {
		if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), filepath.Base(file)+".*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	return os.Rename(tmp.Name(), file)
}
