package app

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// Default concurrency and full-run age of plan and apply, for the front ends' flags
// (Config.Concurrency, Config.FullEvery).
const (
	DefaultConcurrency = reconcile.DefaultConcurrency
	DefaultFullEvery   = reconcile.DefaultFullEvery
)

// Runner is the one door of plan and apply, in the manner of krusty's
// MakeKustomizer(fs, opts).Run: built once from the resolved Config (the forges, the renderer,
// where the baselines live, the clock, the logger, the metrics hook), it runs one Request at a
// time or many at once, and returns one Result type for plan and apply to every front end (the
// CLI, the Action, the webhook service). It alone decides whether a run is full or incremental
// (Runner.incremental) and where baselines live (baselineFile, serveBaselineFile). It is safe
// for concurrent use.
type Runner struct {
	cfg      Config
	forges   Forges
	renderer *fanout.Renderer
	// baselines is what the last converged apply left every target repo at (nil: none, every
	// apply is full).
	baselines *reconcile.Baselines
	// service: a long-running service's Runner, whose baselines every job shares (see
	// incremental); a one-shot front end's otherwise.
	service bool
	close   func() error
}

// Forges opens the forge of the target repos of owner for mode (a service's:
// Installations.Forge).
type Forges func(ctx context.Context, owner string, mode ForgeMode) (Forge, error)

// OpenRunner opens the forge of c (see OpenForge) for the target repos of owner and returns the
// Runner of a one-shot front end (the CLI, the Action) on it: a read-only one refuses every write
// (a plan). With the GitHub forge and a snapshot cache, an apply's baselines live beside the
// cache (baselineFile). Close releases the forge.
func (c Config) OpenRunner(ctx context.Context, owner string, readOnly bool) (*Runner, error) {
	f, closeFn, err := c.OpenForge(ctx, owner, readOnly)
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: c, renderer: c.Renderer(), close: closeFn,
		forges: func(context.Context, string, ForgeMode) (Forge, error) { return f, nil }}
	if c.Forge == ForgeGitHub {
		if file := baselineFile(c.CacheDir, owner); file != "" {
			r.baselines = reconcile.NewBaselines(file, c.Logger)
		}
	}
	return r, nil
}

// ServiceRunner returns the Runner of a long-running service of the control repo ("owner/name"):
// forges opens the forge of an owner for a mode (Installations.Forge); its renderer caches
// kustomize builds between runs; its baselines, shared by every job, live in memory and in the
// snapshot cache (serveBaselineFile), so that the first push after a restart is incremental too.
func (c Config) ServiceRunner(control string, forges Forges) *Runner {
	return &Runner{cfg: c, forges: forges, renderer: c.Renderer(), service: true,
		baselines: reconcile.NewBaselines(serveBaselineFile(c.CacheDir, control, c.Shard), c.Logger),
		close:     func() error { return nil }}
}

// Close releases the forge a one-shot Runner opened (and writes its statistics where the
// configuration says).
func (r *Runner) Close() error { return r.close() }

// Renderer is the Runner's renderer (long-lived: it caches kustomize builds).
func (r *Runner) Renderer() *Renderer { return r.renderer }

// Render renders a loaded control repo with the Runner's renderer into a Fleet: the webhook
// service loads the control repo at a commit from GitHub and renders it once per commit.
func (r *Runner) Render(repo *ControlRepo) (*Fleet, error) {
	targets, err := r.renderer.Render(repo)
	if err != nil {
		return nil, err
	}
	return &Fleet{Repo: repo, Targets: targets, now: r.cfg.Now}, nil
}

// Owns reports whether the target repo name (without the owner) is in the Runner's shard
// (Config.Shard; an unsharded Runner owns every repo).
func (r *Runner) Owns(name string) bool { return r.cfg.Shard.Owns(name) }

// Mode is what a Request does.
type Mode int

// Modes of a Request.
const (
	// ModePlan decides what an apply would do; nothing is written.
	ModePlan Mode = iota
	// ModeApply plans and, unless the removal guard refuses, writes: one pull request per
	// changed repo, access converged.
	ModeApply
)

// Trigger is why a Request runs: with its mode and scope, the Runner decides from it whether a
// run is full or incremental.
type Trigger int

// Triggers of a Request.
const (
	// TriggerCLI: a person ran fleetbot plan, apply, status or rollout status. An apply is
	// incremental where the Runner keeps baselines, unless Request.Full.
	TriggerCLI Trigger = iota
	// TriggerPush: a push to the control repo's default branch (serve's push delivery, the
	// Action on push). The apply is incremental where the Runner keeps baselines; a service's is
	// full when the control repo declares rollout waves (its rollout watch weighs every cluster).
	TriggerPush
	// TriggerResync: every target repo again (serve's resync, an installation's change, a
	// rollout's wake-up; the Action's scheduled and manual runs): a full apply, which records
	// the baselines.
	TriggerResync
	// TriggerDrift: events on target repos (serve's drift jobs): an apply of Scope.Repos.
	TriggerDrift
	// TriggerCheck: the plan of a control repo pull request (serve's check run, the Action's
	// plan). A service plans what merging it changes (the target repos whose desired state
	// differs from what its last converged apply left them at); a one-shot plan is full.
	TriggerCheck
)

// Scope is which target repos a Request covers.
type Scope struct {
	// Repos, when set, limits the run to these target repos (names without the owner), within
	// the Runner's shard; removals are left to runs over every repo.
	Repos []string
	// AllShards covers every target repo even on a sharded Runner (a check's plan, which
	// writes nothing); otherwise a run covers the repos of the Runner's shard.
	AllShards bool
}

// Request is one plan or apply of a Fleet.
type Request struct {
	Mode    Mode
	Trigger Trigger
	Scope   Scope
	// Full asks an apply to plan every target repo (fleetbot apply --full).
	Full bool
	// AllowRemovals and AllowAccessRemovals lift the guards on removing target repos and
	// taking away grants.
	AllowRemovals, AllowAccessRemovals bool
	// AccessChanged: the events of a drift say access settings may have changed; the run
	// reads them afresh (ForgeDrift) instead of trusting what it observed recently.
	AccessChanged bool
	// Logger, when set, replaces the Runner's logger for this run (a job's delivery id).
	Logger *slog.Logger
	// Step, when set, is told how far the run is (the phase and done of total repos), for a
	// progress display.
	Step func(phase string, done, total int)
	// Progress, when set, receives each target repo's result as an apply finishes it (beside
	// the Runner's OnApplied): a service shows each repo as soon as it is done.
	Progress func(RepoResult)
	// Claim, when set, is called by an apply once it knows the target repos it plans (only,
	// by name; nil: every repo), before it reads or writes any of them: a service keeps its
	// other jobs off them then. An error stops the run before anything is written.
	Claim func(ctx context.Context, only []string) error
}

// Result is a plan or an apply, whichever front end asked: each target repo's result
// (Results, Failed, Deferred, Blocked), the scope it ran in (Scope, Incremental), the rollout
// gate's verdict (Rollout), the removal guard's refusal (Refused), the most urgent class
// (Class, ExitCode), and the report every output renders (Document, WriteMarkdown).
type Result struct {
	*reconcile.Report
}

// HasIssues is true when the run found control repo errors against the forge (a team the org
// does not have).
func (r *Result) HasIssues() bool { return len(r.Issues) > 0 }

// Run plans or applies f as req asks. A control repo error found against the forge (a team the
// org does not have) is returned as Issues; a run that could not open its forge returns the
// forge's error classified retryable with report.ReasonUnreachable (nothing was read or
// written). The Result is nil only when nothing was planned.
func (r *Runner) Run(ctx context.Context, f *Fleet, req Request) (*Result, error) {
	forge, err := r.forges(ctx, f.Owner(), req.forgeMode())
	if err != nil {
		return nil, report.Classify(err, report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonUnreachable})
	}
	opts := r.options(f, req)
	var rep *reconcile.Report
	if req.Mode == ModeApply {
		rep, err = reconcile.Apply(ctx, forge, f.Repo, f.Targets, opts)
	} else {
		rep, err = reconcile.Plan(ctx, forge, f.Repo, f.Targets, opts)
	}
	if rep == nil {
		return nil, err
	}
	return &Result{Report: rep}, err
}

// forgeMode is what the request needs a forge for.
func (req Request) forgeMode() ForgeMode {
	switch {
	case req.Mode == ModePlan:
		return ForgePlan
	case req.Trigger == TriggerDrift && req.AccessChanged:
		return ForgeDrift
	}
	return ForgeApply
}

// options are the reconcile options of req on f: the Runner's concurrency, clock, shard and
// metrics hook (applies only), the request's scope and flags, and the incremental decision.
func (r *Runner) options(f *Fleet, req Request) reconcile.Options {
	opts := reconcile.Options{
		AllowRemovals: req.AllowRemovals, AllowAccessRemovals: req.AllowAccessRemovals,
		Concurrency: r.cfg.Concurrency, Logger: r.cfg.Logger, Step: req.Step, Now: r.cfg.Now,
		Only: req.Scope.Repos, Claim: req.Claim, Incremental: r.incremental(f, req),
	}
	if req.Logger != nil {
		opts.Logger = req.Logger
	}
	if !req.Scope.AllShards {
		opts.Shard = r.cfg.Shard
	}
	if req.Mode == ModeApply {
		opts.Progress = bothProgress(r.cfg.OnApplied, req.Progress)
	}
	return opts
}

// incremental decides whether a run is full or incremental, the one place that does: nil is a
// full run that records no baseline. A run limited to some repos, or on a Runner without
// baselines, is full. A plan is full, but a service's check of a control pull request: it plans
// what merging changes, as the apply after the merge will (unless the control repo declares
// rollout waves, whose plan weighs every cluster, or the Runner is one shard of several, whose
// baselines cover its shard only). An apply is incremental unless a resync, Request.Full, the
// last full run older than Config.FullEvery, or, on a service, rollout waves (the rollout watch
// and check run follow full applies only) make it full.
func (r *Runner) incremental(f *Fleet, req Request) *reconcile.Incremental {
	if r.baselines == nil || req.Scope.Repos != nil {
		return nil
	}
	waves := f.Repo.HasRollout()
	in := &reconcile.Incremental{Baselines: r.baselines, FullEvery: r.cfg.FullEvery, Salt: r.cfg.Version}
	switch {
	case req.Mode == ModePlan:
		if !r.service || req.Trigger != TriggerCheck || waves || r.cfg.Shard.Sharded() {
			return nil
		}
		// A plan records no baseline; the age of the last full run does not matter to it.
		in.FullEvery = -1
	case req.Trigger == TriggerResync:
		in.Full = true
	default:
		in.Full = req.Full || (r.service && waves)
	}
	in.Digests = f.digests()
	return in
}

// baselineFile is where the baselines of the target repos of owner live for the CLI and the
// Action, beside the GitHub snapshot cache cacheDir (a dot name, which no org's directory there
// can have); "" when there is no cache (every apply is then full). serveBaselineFile is serve's.
// These are the one place that names them.
func baselineFile(cacheDir, owner string) string {
	if cacheDir == "" {
		return ""
	}
	return filepath.Join(cacheDir, ".baseline-"+strings.ToLower(owner)+".json")
}

// serveBaselineFile is where serve keeps what its last converged apply left every target repo
// at, so that the first push after a restart is incremental too: in the snapshot cache cacheDir,
// per control repo ("owner/name") and shard; "" (no cache) keeps it in memory.
func serveBaselineFile(cacheDir, control string, shard Shard) string {
	if cacheDir == "" {
		return ""
	}
	name := ".baseline-serve-" + strings.ToLower(strings.ReplaceAll(control, "/", "_"))
	switch {
	case shard.Live != nil:
		name += "-replica" // the cache is the pod's own; the partition's key salts the baseline
	case shard.Count > 1:
		name += fmt.Sprintf("-shard%dof%d", shard.Index, shard.Count)
	}
	return filepath.Join(cacheDir, name+".json")
}

// Now is the Runner's clock (Config.Now; the wall clock without one).
func (r *Runner) Now() time.Time {
	if r.cfg.Now != nil {
		return r.cfg.Now()
	}
	return time.Now()
}

// Changed returns the target repos of f in this Runner's shard whose desired state differs
// from the baseline of the last converged full apply (every one without a baseline, or with
// one of another owner): what an apply of f has to bring to a new state. serve runs a full
// apply of many of them in steps.
func (r *Runner) Changed(f *Fleet) []StatusRunRepo {
	var base map[string]string
	if r.baselines != nil {
		if b := r.baselines.Get(); b != nil && strings.EqualFold(b.Owner, f.Owner()) {
			base = b.Repos
		}
	}
	sums := f.digests()
	var out []StatusRunRepo
	for _, t := range f.Targets {
		if !r.cfg.Shard.Owns(t.Repo) || (base != nil && base[t.Repo] == sums[t.Repo]) {
			continue
		}
		out = append(out, StatusRunRepo{Repo: t.FullName(), Kind: t.Kind, Name: t.Name})
	}
	return out
}

// ServeStepsFile is where serve keeps the progress of a full apply in steps, beside its
// baselines ("": in memory, without a cache directory).
func ServeStepsFile(cacheDir, control string, shard Shard) string {
	f := serveBaselineFile(cacheDir, control, shard)
	if f == "" {
		return ""
	}
	return strings.TrimSuffix(f, ".json") + "-steps.json"
}

// bothProgress calls a, then b, with each result; nil when both are nil.
func bothProgress(a, b func(RepoResult)) func(RepoResult) {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(r RepoResult) { a(r); b(r) }
}
