package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
	"github.com/fleetbot-io/fleetbot/internal/workcopy"
)

// Target is the desired state of one target repo (fanout.Target): its managed files and
// scaffolds, what render writes.
type Target = fanout.Target

// Fleet is a loaded, validated and rendered control repo.
type Fleet struct {
	Repo    *control.Repo
	Targets []*fanout.Target

	// sums are the digests of Targets (reconcile.Digests), computed once, by the first
	// incremental run over the fleet: a service applies one rendered commit many times (a
	// push, drifts, checks), and hashing every file of a 1,000-cluster fleet per run was most of
	// its CPU under a stream of deliveries.
	sumsOnce sync.Once
	sums     map[string]string

	// now is the clock of the configuration that loaded or rendered the fleet (Config.Now;
	// nil: time.Now); rollouts, the rollout slice's entry for Repo on it, is built once.
	now          func() time.Time
	rolloutsOnce sync.Once
	rollouts     *rollout.Rollouts
}

// Rollouts is the rollout slice's entry for the fleet's control repo (rollout.Rollouts: the
// plan of its waves, the gate, the next wake-up, the check-run text, the status picture), built
// once per fleet on the clock of the configuration that loaded it.
func (f *Fleet) Rollouts() *Rollouts {
	f.rolloutsOnce.Do(func() { f.rollouts = rollout.New(f.Repo, f.now) })
	return f.rollouts
}

// digests returns the digests of f's targets, computed once.
func (f *Fleet) digests() map[string]string {
	f.sumsOnce.Do(func() { f.sums = reconcile.Digests(f.Targets) })
	return f.sums
}

// Owner is the platform owner: the org (or user) owning every target repo.
func (f *Fleet) Owner() string { return f.Repo.Platform.Spec.Owner }

// RolloutRepos lists the "owner/name" of the repos a rollout in waves weighs (not those being
// removed): the cluster repos, and the workspace repos, whose merges and health gate the waves
// of their clusters (rollout.Workspace).
func (f *Fleet) RolloutRepos() []string {
	var out []string
	for _, t := range f.Targets {
		if (t.Kind == fanout.KindCluster || t.Kind == fanout.KindWorkspace) && !t.Removed {
			out = append(out, t.FullName())
		}
	}
	return out
}

// Load loads, validates and renders the control repo at dir with c's renderer. Every
// validation and render problem comes back together as control.Issues; no caller writes
// anything when err != nil. It stops when ctx is done (SIGINT, SIGTERM): between load,
// revision and render, and inside the render between app builds and targets; the error then
// wraps ctx's (errors.Is context.Canceled).
func (c Config) Load(ctx context.Context, dir string) (*Fleet, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loading %s interrupted: %w", dir, context.Cause(ctx))
	}
	r := c.Renderer()
	repo, err := LoadDir(ctx, r, dir)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("loading %s interrupted: %w", dir, context.Cause(ctx))
	}
	repo.Revision = workcopy.Revision(dir)
	targets, err := r.RenderContext(ctx, repo)
	if err != nil {
		return nil, err
	}
	return &Fleet{Repo: repo, Targets: targets, now: c.Now}, nil
}

// LoadDir is control.LoadDir with r building the catalog's apps (Renderer.Prebuild) beside
// the rest of the load: on a machine with a second CPU, the kustomize builds of a cold render
// overlap decoding the cluster files. It returns once both are done; a failed load stops the
// builds first (they end within one build).
func LoadDir(ctx context.Context, r *fanout.Renderer, dir string) (*control.Repo, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var builds sync.WaitGroup
	repo, err := control.LoadDirWith(dir, control.Options{Catalog: func(apps []*control.App) {
		builds.Go(func() { r.Prebuild(ctx, apps) })
	}})
	if err != nil {
		cancel()
	}
	builds.Wait()
	return repo, err
}

// ControlProblems returns the problems of a control repo that err says is invalid: err's class is
// invalid input (report.ClassOf: control.Issues carry it, as does the run that found a team the
// org lacks) and it carries the control repo's issues, each at its file:line, which a front end
// shows (annotations, the report's errors, a check run's). ok is false for any other error (an
// unreadable directory, a forge's), which the front end reports as it is.
func ControlProblems(err error) (Issues, bool) {
	if report.ClassOf(err).Class != report.ClassInvalidInput {
		return nil, false
	}
	var is Issues
	if !errors.As(err, &is) {
		return nil, false
	}
	return is, true
}

// DescribeLoadError adds what to do to a load failure that is not a list of issues (those
// speak for themselves).
func DescribeLoadError(dir string, err error) error {
	var issues control.Issues
	if errors.As(err, &issues) {
		return err
	}
	if errors.Is(err, control.ErrUnreadable) {
		return fmt.Errorf("%w\n    hint: --control must name a control repo directory holding platform.yaml (got %q)", err, dir)
	}
	return err
}

// OwnerAt is the platform owner (the org) of the control repo in fsys, read without
// rendering; false when it does not load (a review reports that itself).
func OwnerAt(fsys fs.FS) (string, bool) {
	repo, err := control.Load(fsys)
	if err != nil {
		return "", false
	}
	return repo.Platform.Spec.Owner, true
}
