// Package reconcile is the one code path the CLI, the GitHub Action and the
// webhook service run: given a loaded control repo and its rendered targets,
// it plans every target repo against a forge (what would change, and why),
// refuses dangerous plans (mass removals) before any write, then applies the
// plan repo by repo with bounded concurrency, isolating failures.
//
// A run is a pipeline of typed phases: scope (which repos, each in its role:
// contentTarget, tombstone, accessEntry, gateObserver), observe and decide
// (each repo's repoPlan), gate (the rollout's rolloutVerdict), guard (the
// removal limits, a pure function of the decisions) and execute. Every repo's
// Result carries its class (report.Outcome): done, deferred until a known
// time, retryable, needs-human or invalid-input.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// DefaultConcurrency is how many repos are reconciled at once by default.
const DefaultConcurrency = 4

// Phases of a run, as Options.Step names them.
const (
	// PhaseRead reads the owner: its teams and repos (on GitHub, 100 repos a query).
	PhaseRead = "read"
	// PhasePlan observes and decides each repo of the run.
	PhasePlan = "plan"
	// PhaseApply executes the plan, repo by repo.
	PhaseApply = "apply"
)

// stepper calls Options.Step from several workers, one call at a time; a nil stepper (no
// Step) does nothing.
type stepper struct {
	mu    sync.Mutex
	fn    func(phase string, done, total int)
	phase string
	done  int
	total int
}

func newStepper(fn func(string, int, int), phase string, total int) *stepper {
	if fn == nil {
		return nil
	}
	s := &stepper{fn: fn, phase: phase, total: total}
	fn(phase, 0, total)
	return s
}

// step counts one repo done.
func (s *stepper) step() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done++
	s.fn(s.phase, s.done, s.total)
}

// Forge is what reconcile needs from a code host: the pr seam, discovery of
// the repos fleetbot manages (to notice removed clusters and workspaces),
// what the owner's org holds, and repo access settings.
type Forge interface {
	pr.Forge
	// ListManaged lists the repos of owner that fleetbot manages.
	ListManaged(ctx context.Context, owner string) ([]pr.ManagedRepo, error)
	// Org reads, once per run, the owner's teams, its archived repos and
	// the logins fleetbot acts as.
	Org(ctx context.Context, owner string) (policy.Org, error)
	// Access reads a repo's access settings: team roles, direct
	// collaborators and the protection of the default branch, and what else desired (the
	// target's access) needs observed: the ruleset that enforces its branch rules (Rules), its
	// custom properties (Properties).
	Access(ctx context.Context, owner, repo string, desired policy.Access) (policy.Access, error)
	// ApplyAccess executes an access plan that policy.Diff made against
	// what Access returned: grants and role changes first, then protection,
	// then revokes and collaborator removals.
	ApplyAccess(ctx context.Context, owner, repo string, p policy.Plan) error
}

// BaseRoleReader is a forge that can read the owner's base role (policy.Org.BaseRole), which
// reconcile asks for, once per run, when the control repo opts in to organization
// administration (spec.access.branchRules.organization).
type BaseRoleReader interface {
	BaseRole(ctx context.Context, owner string) (policy.Role, error)
}

// The optional abilities a forge declares in pr.Capabilities, under the names
// reconcile has always used.
type (
	// Scanner reads an owner's teams and repos in batches; see pr.Scanner.
	Scanner = pr.Scanner
	// WriteGate checks a repo's writes before they start; see pr.WriteGate.
	WriteGate = pr.WriteGate
)

// Errors callers tell apart with errors.Is.
var (
	// ErrTooManyRemovals refuses a run that would remove more targets than
	// platform spec.maxRemovals allows, unless AllowRemovals is set.
	ErrTooManyRemovals = errors.New("too many removals")
	// ErrNoTargets refuses a run over a control repo that renders nothing:
	// an empty control repo never means "remove everything".
	ErrNoTargets = errors.New("control repo renders no target repo")
	// ErrFailed reports that at least one repo failed; the others were
	// reconciled.
	ErrFailed = errors.New("reconcile failed")
)

// Options tune Plan and Apply.
type Options struct {
	// AllowRemovals lets a run remove more targets than maxRemovals.
	AllowRemovals bool
	// AllowAccessRemovals lets a run take away more of a repo's grants than
	// spec.access.maxAccessRemovals.
	AllowAccessRemovals bool
	// Concurrency bounds how many repos are worked on at once (default 4).
	Concurrency int
	// Source is the control repo commit (default: the repo's Revision).
	Source string
	// Logger receives progress logs (default: discarded).
	Logger *slog.Logger
	// Progress is called once per repo as it finishes, never concurrently.
	Progress func(Result)
	// Step, when set, is told how far the run is, for a progress display: the phase
	// (PhaseRead, PhasePlan, PhaseApply) and done of total repos (total -1 while unknown). It
	// is called when a phase starts (done 0) and once per repo, never concurrently.
	Step func(phase string, done, total int)
	// Now times the run (default time.Now).
	Now func() time.Time
	// Only restricts the run to these target repos (names without the
	// owner), for a reconcile of the one repo a webhook reported drift on.
	// Targets not listed are neither planned nor counted, and no managed
	// repo is taken for removed: removals are left to full runs, where the
	// maxRemovals guard sees the whole fleet. Nil means every target.
	Only []string
	// Shard restricts the run to the repos this replica owns when several
	// services share one fleet (see Shard); the zero Shard owns every repo.
	Shard Shard
	// Incremental, when set, makes Apply plan only the target repos whose
	// desired state changed since the last converged run (nil: every run is
	// full). Ignored when Only is set.
	Incremental *Incremental
	// Claim, when set, is called by Apply once it knows which target repos it plans (only, by
	// name; nil when it plans every repo) and before it reads or writes any of them: a service
	// keeps its other jobs off them then. An error stops the run before anything is written.
	Claim func(ctx context.Context, only []string) error
}

// withDefaults fills what a caller left unset: the concurrency, a discarding logger, the system
// clock, and the control repo's revision as the run's source.
func (o Options) withDefaults(repo *control.Repo) Options {
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Shard = o.Shard.Fixed()
	if o.Source == "" && repo != nil {
		o.Source = repo.Revision
	}
	return o
}

// Plan decides, for every target and every managed repo that left the
// control repo, what Apply would do. It never writes. A plan refused by the
// removal guard has Report.Refused set.
//
// With opts.Incremental (and no opts.Only), only the target repos whose desired state differs
// from the last converged run's are planned, as an incremental Apply plans them (a pull
// request's check: what merging it changes); a plan never records a baseline. The org is read
// and checked all the same, even when no repo differs.
func Plan(ctx context.Context, f Forge, repo *control.Repo, targets []*fanout.Target, opts Options) (*Report, error) {
	opts = opts.withDefaults(repo)
	var scope string
	if incremental(repo, targets, opts) {
		sc := opts.Incremental.decide(repo, targets, opts, opts.Now())
		opts.Only, scope = sc.only, sc.line
		opts.Logger.Info("plan scope", "scope", scope)
	}
	pl, rep, err := plan(ctx, f, newRunInput(repo, targets, opts))
	if rep != nil {
		rep.Command = report.CommandPlan
		rep.Scope, rep.Incremental = scope, opts.Only != nil && scope != ""
	}
	if err != nil {
		return rep, err
	}
	pl.report(opts.Now())
	return rep, nil
}

// Apply plans like Plan and, unless the plan is refused, executes it: one
// PR per changed repo, access converged. A failing repo does not stop the
// others; the returned error (wrapping ErrFailed) names every failed repo.
// A refused plan writes nothing and returns an error wrapping
// ErrTooManyRemovals.
//
// With opts.Incremental (and no opts.Only), only the target repos whose desired state changed
// since the last converged run are planned; see Incremental.
func Apply(ctx context.Context, f Forge, repo *control.Repo, targets []*fanout.Target, opts Options) (*Report, error) {
	opts = opts.withDefaults(repo)
	var rep *Report
	var err error
	if incremental(repo, targets, opts) {
		rep, err = applyIncremental(ctx, f, repo, targets, opts)
	} else {
		rep, err = applyAll(ctx, f, newRunInput(repo, targets, opts))
	}
	if rep != nil {
		rep.Command = report.CommandApply
	}
	return rep, err
}

// runInput is what a run starts from: the control repo, its rendered targets, the run's
// options with their defaults, and the control repo's rollouts on the run's clock.
type runInput struct {
	repo     *control.Repo
	targets  []*fanout.Target
	opts     Options
	rollouts *rollout.Rollouts
}

// newRunInput is the input of a run of repo's targets with opts (their defaults set): the
// rollout slice's entry is built here, once per run, from the control repo and opts.Now.
func newRunInput(repo *control.Repo, targets []*fanout.Target, opts Options) runInput {
	return runInput{repo: repo, targets: targets, opts: opts, rollouts: rollout.New(repo, opts.Now)}
}

// planned is the read-only half of a run, which Plan reports and Apply executes: every repo of
// the run decided (sorted by repo), the rollout gate's verdict, and the report so far (the
// removal guard's numbers and refusal).
type planned struct {
	repos   []*repoPlan
	verdict *rolloutVerdict
	rep     *Report
}

// report adds every repo's result to the report and closes it at now.
func (pl *planned) report(now time.Time) {
	for _, p := range pl.repos {
		pl.rep.Results = append(pl.rep.Results, p.res)
	}
	pl.rep.finish(now)
}

// plan runs the read-only phases every run shares, in the manner of kustomize-controller's
// fetch, build, apply, prune, health: scope (which repos, in which role, after one read of the
// owner), observe and decide (each repo, concurrently), gate (the rollout's verdict: which
// repos wait for their wave) and guard (the removal limits). Nothing is written. A control
// repo that names a team the org lacks returns the report of its issues and the issues as the
// error.
func plan(ctx context.Context, f Forge, in runInput) (*planned, *Report, error) {
	started := in.opts.Now()
	sc, rep, err := scope(ctx, f, in, started)
	if err != nil {
		return nil, rep, err
	}
	repos, observers := decideAll(ctx, f, in, sc)
	verdict, err := gate(ctx, f, in, repos, observers)
	if err != nil {
		return nil, nil, err
	}
	verdict.holdAll(repos)
	g, err := guard(guardInput{
		weights: weigh(repos), fleet: fleetTotalsOf(in), maxRemovals: sc.fleet.MaxRemovals,
		allowRemovals: in.opts.AllowRemovals, allowAccessRemovals: in.opts.AllowAccessRemovals,
	})
	if err != nil {
		return nil, nil, err
	}
	rep = &Report{Source: in.opts.Source, Rollout: verdict.Status, started: started,
		Removals: g.removals, MaxRemovals: g.max, Refused: g.refused}
	return &planned{repos: repos, verdict: verdict, rep: rep}, rep, nil
}

// applyAll runs every phase of an Apply over the run's scope (every repo, or opts.Only):
// claim the repos, plan them, and execute the plan unless the guard refused it.
func applyAll(ctx context.Context, f Forge, in runInput) (*Report, error) {
	if in.opts.Claim != nil {
		if err := in.opts.Claim(ctx, in.opts.Only); err != nil {
			return nil, fmt.Errorf("claiming the target repos of the run: %w", err)
		}
	}
	pl, rep, err := plan(ctx, f, in)
	if err != nil {
		return rep, err
	}
	if rep.Refused != nil {
		pl.report(in.opts.Now())
		return rep, rep.Refused
	}
	execute(ctx, f, in, pl)
	rollBack(ctx, f, in, pl)
	pl.report(in.opts.Now())
	if failed := rep.Failed(); len(failed) > 0 {
		names := make([]string, len(failed))
		for i, r := range failed {
			names[i] = r.Repo
		}
		return rep, fmt.Errorf("%w: %d of %d repos failed: %s", ErrFailed, len(failed), len(rep.Results), strings.Join(names, ", "))
	}
	return rep, nil
}

// each runs fn(0..n-1) on at most workers goroutines and waits for all.
// Once ctx is done, remaining indexes are skipped.
func each(ctx context.Context, n, workers int, fn func(i int)) {
	if workers > n {
		workers = n
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := 0; i < n; i++ {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
}

// recovered runs fn and turns a panic into an error, so one repo's bug
// fails that repo instead of the whole run (and, in serve, the process).
func recovered(fn func()) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("internal error (please report it): %v\n%s", v, debug.Stack())
		}
	}()
	fn()
	return nil
}
