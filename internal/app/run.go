package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// Default concurrency and full-run age of plan and apply, for the front ends' flags.
const (
	DefaultConcurrency = reconcile.DefaultConcurrency
	DefaultFullEvery   = reconcile.DefaultFullEvery
)

// Exit codes of plan and apply with --detailed-exitcode, and of the Action's exit-code output
// (DESIGN §7).
const (
	ExitNoChanges = reconcile.ExitNoChanges
	ExitError     = reconcile.ExitError
)

// Targets is an open forge of one owner's target repos: the application's plan and apply run
// against it.
type Targets struct {
	forge reconcile.Forge
	close func() error
}

// OpenTargets opens the forge of the configuration for the target repos of owner (see
// OpenForge); Close releases it.
func (c Config) OpenTargets(ctx context.Context, owner string, readOnly bool) (*Targets, error) {
	f, closeFn, err := c.OpenForge(ctx, owner, readOnly)
	if err != nil {
		return nil, err
	}
	return &Targets{forge: f, close: closeFn}, nil
}

// Close releases the forge (and writes its statistics where the configuration says).
func (t *Targets) Close() error { return t.close() }

// RunOptions tune a plan or an apply.
type RunOptions struct {
	// AllowRemovals and AllowAccessRemovals lift the guards on removing target repos and
	// taking away grants.
	AllowRemovals, AllowAccessRemovals bool
	// Concurrency bounds how many target repos are worked on at once (default
	// DefaultConcurrency).
	Concurrency int
	// Source is the control repo commit (default: the fleet's revision).
	Source string
	Logger *slog.Logger
	// Progress, when set, receives each target repo's row as it finishes.
	Progress func(report.Repo)
	// Step, when set, is told how far the run is (reconcile.Options.Step): the phase and done
	// of total repos, for a progress display.
	Step func(phase string, done, total int)
	// BaselineFile, when set, makes an apply incremental: only the target repos whose desired
	// state changed since the last converged run recorded there are planned, unless Full, or
	// the last full run is older than FullEvery. Salt (the version) invalidates baselines of
	// other versions.
	BaselineFile string
	Full         bool
	FullEvery    time.Duration
	Salt         string
}

func (o RunOptions) reconcile() reconcile.Options {
	opts := reconcile.Options{
		AllowRemovals: o.AllowRemovals, AllowAccessRemovals: o.AllowAccessRemovals,
		Concurrency: o.Concurrency, Source: o.Source, Logger: o.Logger, Step: o.Step,
	}
	if o.Progress != nil {
		opts.Progress = func(r reconcile.Result) { o.Progress(r.Row()) }
	}
	if o.BaselineFile != "" {
		opts.Incremental = &reconcile.Incremental{
			Baselines: reconcile.NewBaselines(o.BaselineFile, o.Logger),
			Full:      o.Full, FullEvery: o.FullEvery, Salt: o.Salt,
		}
	}
	return opts
}

// Plan is what an apply would do to every target repo of the fleet; nothing is written. A
// control repo error found against the forge (a team the org does not have) is returned as
// control.Issues. The outcome is nil only when nothing was planned.
func (t *Targets) Plan(ctx context.Context, f *Fleet, o RunOptions) (*Outcome, error) {
	rep, err := reconcile.Plan(ctx, t.forge, f.Repo, f.Targets, o.reconcile())
	return outcome(rep), err
}

// Apply converges every target repo of the fleet (see Plan for the errors).
func (t *Targets) Apply(ctx context.Context, f *Fleet, o RunOptions) (*Outcome, error) {
	rep, err := reconcile.Apply(ctx, t.forge, f.Repo, f.Targets, o.reconcile())
	return outcome(rep), err
}

// Outcome is a plan or an apply over the target repos.
type Outcome struct {
	rep *reconcile.Report
}

func outcome(rep *reconcile.Report) *Outcome {
	if rep == nil {
		return nil
	}
	return &Outcome{rep: rep}
}

// Document is the outcome as the report every output renders.
func (o *Outcome) Document() *report.Document { return o.rep.Document() }

// RolloutStatus is the rollout gate's verdict: each wave's state, the clusters held and why,
// a halt.
type RolloutStatus = rollout.Status

// Rollout is the rollout gate's verdict for the run's revision (nil without waves).
func (o *Outcome) Rollout() *RolloutStatus { return o.rep.Rollout }

// HasIssues is true when the run found control repo errors against the forge.
func (o *Outcome) HasIssues() bool { return len(o.rep.Issues) > 0 }

// Repos is the number of target repos in the outcome; Failed how many of them failed.
func (o *Outcome) Repos() int  { return len(o.rep.Results) }
func (o *Outcome) Failed() int { return len(o.rep.Failed()) }

// ExitCode is the detailed exit code of a run that returned no error: its most urgent repo's
// class (report.Class.ExitCode), or for a plan whose repos are done, 2 when it would change
// something; applied is true for an apply.
func (o *Outcome) ExitCode(applied bool) int { return o.rep.ExitCode(applied) }

// RepoOutcome is one target repo of an outcome: its row and what a front end acts on.
type RepoOutcome struct {
	Row report.Repo
	// Changed: the repo's content, pull request or access changes; Failed: it failed (not
	// deferred); Blocked: a human's commit on the bot branch stops it. Whether it waits for a
	// later run, and until when, is Row.Outcome.
	Changed, Failed, Blocked bool
	// Action is the pull-request action planned (create, update, ...).
	Action string
	// PR and PRURL are the pull request acted upon (0: none).
	PR    int
	PRURL string
}

// Results are the target repos, sorted by repo.
func (o *Outcome) Results() []RepoOutcome {
	blocked := map[string]bool{}
	for _, b := range o.rep.Blocked() {
		blocked[b.Repo] = true
	}
	out := make([]RepoOutcome, len(o.rep.Results))
	for i, x := range o.rep.Results {
		out[i] = RepoOutcome{Row: x.Row(), Changed: x.Changed(), Failed: x.Err != nil && !x.Deferred(),
			Blocked: blocked[x.Repo], Action: string(x.Action), PR: x.PR, PRURL: x.PRURL}
	}
	return out
}
