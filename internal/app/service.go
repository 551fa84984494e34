package app

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// The application's vocabulary for front ends that keep state between runs (the webhook
// service): they name these types through the application layer, never the floors below.
type (
	// ControlRepo is a loaded and validated control repo.
	ControlRepo = control.Repo
	// Issues are control repo errors, each on its file and line with a hint; a load, a plan
	// or an apply returns them as its error when the control repo is wrong.
	Issues = control.Issues
	// Issue is one control repo error; Position is its file and line.
	Issue    = control.Issue
	Position = control.Position
	// Forge is the forge of one owner's target repos, as plan and apply use it.
	Forge = reconcile.Forge
	// Renderer renders a control repo into its target repos; a long-lived one (serve's) caches
	// kustomize builds between runs.
	Renderer = fanout.Renderer
	// Shard is one replica's share of the target repos (docs/scale-out.md); the zero Shard
	// owns every repo.
	Shard = reconcile.Shard
	// Partition is a live Shard's share at one instant (replicas on Kubernetes Leases).
	Partition = reconcile.Partition
	// Baselines is what the last converged apply left every target repo at, for incremental
	// applies.
	Baselines = reconcile.Baselines
	// Report is a plan or an apply of a service, repo by repo.
	Report = reconcile.Report
	// RepoResult is one target repo of a Report.
	RepoResult = reconcile.Result
	// PlannedWave is one wave of a rollout plan and the clusters it takes.
	PlannedWave = control.PlannedWave
)

// The rollout's names in the control repo, for front ends that print them.
const (
	// FluxStatusPrefix starts the context of the commit statuses Flux's notification-controller
	// posts for a Kustomization: only those count as a cluster's health.
	FluxStatusPrefix = rollout.FluxStatusPrefix
	// PausedFile is the control repo file whose presence pauses every rollout.
	PausedFile = control.PausedFile
	// FleetWaves names the fleet-wide wave list (platform spec.rollout.waves) in a plan.
	FleetWaves = control.FleetWaves
)

// ParseShard reads a --shard value, "INDEX/COUNT" (e.g. "2/5"); "" owns every repo.
func ParseShard(s string) (Shard, error) { return reconcile.ParseShard(s) }

// NewBaselines keeps baselines in file ("" keeps them in memory only).
func NewBaselines(file string, log *slog.Logger) *Baselines { return reconcile.NewBaselines(file, log) }

// Render renders a loaded control repo with r into a Fleet: the webhook service loads the
// control repo at a commit from GitHub and renders it with its long-lived renderer.
func Render(r *Renderer, repo *ControlRepo) (*Fleet, error) {
	targets, err := r.Render(repo)
	if err != nil {
		return nil, err
	}
	return &Fleet{Repo: repo, Targets: targets}, nil
}

// ServiceOptions tune a plan or an apply of a long-running service: unlike RunOptions they
// carry the service's shared baselines and its shard, and report raw results.
type ServiceOptions struct {
	// Concurrency bounds how many target repos are worked on at once (default
	// DefaultConcurrency).
	Concurrency int
	// Only, when set, restricts the run to these target repos (names).
	Only []string
	// Shard restricts the run to the target repos this replica owns.
	Shard  Shard
	Logger *slog.Logger
	// Progress, when set, receives each target repo's result as it finishes.
	Progress func(RepoResult)
	// Now is the run's clock, which the rollout gate weighs soaks and timeouts by (default
	// time.Now).
	Now func() time.Time
	// Baselines, when set, make an apply incremental: only the target repos whose desired
	// state changed since the last converged run are planned, unless Full, or the last full
	// run is older than FullEvery (default DefaultFullEvery). Salt (the version) invalidates
	// baselines of other versions.
	Baselines *Baselines
	Full      bool
	FullEvery time.Duration
	Salt      string
	// Digests, when set, are Digests(f) of the fleet the run applies, computed once by the
	// caller that keeps the fleet (hashing every file of a large fleet per run is costly).
	Digests map[string]string
	// Claim, when set, is called by ApplyFleet once it knows the target repos it plans (only;
	// nil: every repo), before it touches them (see reconcile.Options.Claim).
	Claim func(ctx context.Context, only []string) error
}

// Digests hashes the desired files of every target repo of f, as an incremental apply
// compares them with the baselines; a service computes them once per rendered commit.
func Digests(f *Fleet) map[string]string {
	if f == nil {
		return nil
	}
	return reconcile.Digests(f.Targets)
}

func (o ServiceOptions) reconcile() reconcile.Options {
	opts := reconcile.Options{Concurrency: o.Concurrency, Only: o.Only, Shard: o.Shard, Logger: o.Logger, Progress: o.Progress, Now: o.Now, Claim: o.Claim}
	if o.Baselines != nil {
		opts.Incremental = &reconcile.Incremental{Baselines: o.Baselines, Full: o.Full, FullEvery: o.FullEvery, Salt: o.Salt, Digests: o.Digests}
	}
	return opts
}

// ApplyFleet converges the target repos of f on forge, as Targets.Apply does, for a service.
func ApplyFleet(ctx context.Context, forge Forge, f *Fleet, o ServiceOptions) (*Report, error) {
	return reconcile.Apply(ctx, forge, f.Repo, f.Targets, o.reconcile())
}

// PlanFleet plans the target repos of f on forge (a read-only one: a check run), as
// Targets.Plan does, for a service.
func PlanFleet(ctx context.Context, forge Forge, f *Fleet, o ServiceOptions) (*Report, error) {
	return reconcile.Plan(ctx, forge, f.Repo, f.Targets, o.reconcile())
}

// Reports is what a service knows of the fleet from its own applies: the newest result of
// each target repo. Reading it costs no request (the status pages are built from it).
type Reports struct {
	// Source is the control-repo commit of the newest apply, and Control the control repo
	// loaded at it (labels); nil before the first apply.
	Source  string
	Control *ControlRepo
	// Repos holds one entry per target repo, sorted by repo.
	Repos []RepoReport
}

// RepoReport is the result of the newest apply that covered one target repo.
type RepoReport struct {
	Result RepoResult
	// Source is the control-repo commit that apply rendered; At is when it finished.
	Source string
	At     time.Time
}

// BaselineFile is where the baselines of the target repos of owner live for the CLI and the
// Action, beside the GitHub snapshot cache cacheDir (a dot name, which no org's directory there
// can have); "" when there is no cache (every apply is then full). ServeBaselineFile is serve's.
// These are the one place that names them.
func BaselineFile(cacheDir, owner string) string {
	if cacheDir == "" {
		return ""
	}
	return filepath.Join(cacheDir, ".baseline-"+strings.ToLower(owner)+".json")
}

// ServeBaselineFile is where serve keeps what its last converged apply left every target repo
// at, so that the first push after a restart is incremental too: in the snapshot cache cacheDir,
// per control repo ("owner/name") and shard; "" (no cache) keeps it in memory.
func ServeBaselineFile(cacheDir, control string, shard Shard) string {
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
