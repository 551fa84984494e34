// Package reconcile is the one code path the CLI, the GitHub Action and the
// webhook service run: given a loaded control repo and its rendered targets,
// it plans every target repo against a forge (what would change, and why),
// refuses dangerous plans (mass removals) before any write, then applies the
// plan repo by repo with bounded concurrency, isolating failures.
package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// DefaultConcurrency is how many repos are reconciled at once by default.
const DefaultConcurrency = 4

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
	// collaborators and the protection of the default branch.
	Access(ctx context.Context, owner, repo string) (policy.Access, error)
	// ApplyAccess executes an access plan that policy.Diff made against
	// what Access returned: grants and role changes first, then protection,
	// then revokes and collaborator removals.
	ApplyAccess(ctx context.Context, owner, repo string, p policy.Plan) error
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
	if o.Source == "" && repo != nil {
		o.Source = repo.Revision
	}
	return o
}

func newItem(t *fanout.Target) *item {
	return &item{target: t, res: Result{Repo: t.FullName(), Kind: t.Kind, Name: t.Name}}
}

// item is one target repo through a run.
type item struct {
	target   *fanout.Target
	decision *pr.Decision
	// observed is the repo's access as read, and access the plan that
	// converges it (nil when access is not planned: new, removed or
	// archived repos).
	observed policy.Access
	access   *policy.Plan
	// accessOnly items (the control repo) have no content to reconcile.
	accessOnly bool
	// skipped items are left alone entirely (archived repos).
	skipped bool
	// destroys counts the provisioned clusters a management repo's plan
	// deletes (deletion policy Delete): each counts against maxRemovals.
	destroys int
	// observeOnly items are outside the run (Only, Shard): not planned, only seen by the
	// rollout gate through their pull request; dropped before anything is counted.
	observeOnly bool
	// held is why the rollout gate holds the item's new pull request (nil: not held);
	// its access still converges.
	held error
	// autoMerge overrides the run's merge mode for this repo (a rollout wave's merge);
	// nil: the platform's.
	autoMerge *bool
	// waves are the lists of rollout waves the revision takes, recorded in the pull request
	// (pr.Options.Waves).
	waves []string
	res   Result
}

// prOptions is the run's pull request options for this item.
func (it *item) prOptions(o pr.Options) pr.Options {
	if it.autoMerge != nil {
		o.AutoMerge = *it.autoMerge
	}
	o.Waves = it.waves
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
	items, rep, err := plan(ctx, f, repo, targets, opts)
	if rep != nil {
		rep.Command = report.CommandPlan
		rep.Scope, rep.Incremental = scope, opts.Only != nil && scope != ""
	}
	if err != nil {
		return rep, err
	}
	for _, it := range items {
		rep.Results = append(rep.Results, it.res)
	}
	rep.finish(opts.Now())
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
		rep, err = applyAll(ctx, f, repo, targets, opts)
	}
	if rep != nil {
		rep.Command = report.CommandApply
	}
	return rep, err
}

func applyAll(ctx context.Context, f Forge, repo *control.Repo, targets []*fanout.Target, opts Options) (*Report, error) {
	if opts.Claim != nil {
		if err := opts.Claim(ctx, opts.Only); err != nil {
			return nil, fmt.Errorf("claiming the target repos of the run: %w", err)
		}
	}
	items, rep, err := plan(ctx, f, repo, targets, opts)
	if err != nil {
		return rep, err
	}
	if rep.Refused != nil {
		for _, it := range items {
			rep.Results = append(rep.Results, it.res)
		}
		rep.finish(opts.Now())
		return rep, rep.Refused
	}
	prOpts := prOptions(repo, opts)
	var mu, writes sync.Mutex
	each(context.WithoutCancel(ctx), len(items), opts.Concurrency, func(i int) {
		it := items[i]
		log := opts.Logger.With("repo", it.target.FullName())
		if it.held != nil {
			// Held by the rollout: converge access only; report it deferred.
			it.res.Err, it.res.Deferred = nil, false
			it.decision = withoutContent(it.decision)
		}
		if it.res.Err == nil && !it.skipped {
			if err := ctx.Err(); err != nil {
				it.res.Err = fmt.Errorf("%s: not applied: %w", it.target.FullName(), context.Cause(ctx))
			} else if err := recovered(func() { applyOne(ctx, f, it, it.prOptions(prOpts), log, &writes) }); err != nil {
				it.res.Err = fmt.Errorf("%s: %w", it.target.FullName(), err)
			}
		}
		if it.held != nil && it.res.Err == nil {
			it.res.Err, it.res.Deferred = it.held, true
		}
		if it.res.Deferred {
			log.Warn("reconcile deferred to the next run", "err", it.res.Err)
		} else if it.res.Err != nil {
			log.Error("reconcile failed", "err", it.res.Err)
		} else {
			log.Info("reconciled", "action", it.res.Action, "pr", it.res.PR)
		}
		if opts.Progress != nil {
			mu.Lock()
			opts.Progress(it.res)
			mu.Unlock()
		}
	})
	for _, it := range items {
		rep.Results = append(rep.Results, it.res)
	}
	rep.finish(opts.Now())
	if failed := rep.Failed(); len(failed) > 0 {
		names := make([]string, len(failed))
		for i, r := range failed {
			names[i] = r.Repo
		}
		return rep, fmt.Errorf("%w: %d of %d repos failed: %s", ErrFailed, len(failed), len(rep.Results), strings.Join(names, ", "))
	}
	return rep, nil
}

// applyOne executes one item's decision. writes is shared by the run's
// workers: see below.
func applyOne(ctx context.Context, f Forge, it *item, o pr.Options, log *slog.Logger, writes *sync.Mutex) {
	t, d := it.target, it.decision
	// Access (branch protection first) converges before a pull request is opened or updated
	// on a repo whose default branch exists: a pull request fleetbot opens while someone has
	// removed the protection would be mergeable without review, and merge: auto would merge it.
	// A new or empty repo keeps the bootstrap order instead (CODEOWNERS, then protection, then
	// the teams: see pr.Apply and the forge's CreateRepo), so its access converges after.
	var accessErr error
	accessDone := false
	existing := func(d *pr.Decision) bool { return !d.CreateRepo && len(d.Bootstrap) == 0 }
	convergeAccess := func() {
		accessDone = true
		if it.access == nil || it.access.Empty() || d.CreateRepo {
			return
		}
		accessErr = applyAccess(ctx, f, it)
		noteProtection(f, it)
		if accessErr == nil {
			log.Info("access converged", "steps", it.access.Describe())
		}
	}
	if d.Writes() && !it.accessOnly {
		if f.Capabilities().WriteGate != nil {
			// A forge with a write budget gets one repo's writes at a time:
			// its mutations are serial anyway, and the repo the gate admits
			// then finds the budget as the gate saw it, instead of other
			// repos exhausting the windows half-way (a tree and a commit
			// written, the ref refused: content writes wasted and redone).
			writes.Lock()
			defer writes.Unlock()
		}
		var err error
		d, err = gate(ctx, f, it, o)
		if err != nil {
			it.res.fail(err)
			return
		}
		if d.Writes() {
			if existing(d) && (d.OpenPR || d.UpdatePR || d.PushBranch) {
				convergeAccess()
			}
			p, err := pr.Apply(ctx, f, t, d, o)
			it.res.setPR(p)
			if err != nil {
				it.res.fail(errors.Join(err, accessErr))
				return
			}
			if d.OpenPR && p != nil && p.State == pr.StateMerged {
				it.res.Merged = true
			}
			noteProtection(f, it)
			if d.CreateRepo || len(d.Bootstrap) > 0 {
				// The bootstrap commit landed CODEOWNERS on the default
				// branch: check it now, while the repo is new.
				checkCodeowners(ctx, f, it, t.Access, true)
			}
		}
	}
	if !accessDone {
		convergeAccess()
	}
	if accessErr != nil {
		it.res.fail(accessErr)
	}
}

// gate asks a WriteGate forge whether the item's decision may be executed,
// planning the repo once more when the forge reports its snapshot stale.
func gate(ctx context.Context, f Forge, it *item, o pr.Options) (*pr.Decision, error) {
	g := f.Capabilities().WriteGate
	if g == nil {
		return it.decision, nil
	}
	err := g.BeforeWrite(ctx, it.target.Owner, it.target.Repo, it.decision.Cost())
	if errors.Is(err, pr.ErrStale) {
		d, perr := pr.Plan(ctx, f, it.target, o)
		if perr != nil {
			return nil, perr
		}
		it.decision = d
		it.res.fromDecision(d)
		if !d.Writes() {
			return d, nil
		}
		err = g.BeforeWrite(ctx, it.target.Owner, it.target.Repo, d.Cost())
	}
	return it.decision, err
}

func prOptions(repo *control.Repo, opts Options) pr.Options {
	fl := repo.Fleet()
	return pr.Options{
		Branch:    fl.PRBranch,
		Labels:    fl.Labels,
		Source:    opts.Source,
		AutoMerge: fl.AutoMerge,
	}
}

// readOwner reads, once per run, what the owner's org holds (teams, archived repos, logins)
// and, for a run over the whole fleet, the repos fleetbot manages there: with one batched scan
// when the forge can (see Scanner), else with Org and ListManaged.
func readOwner(ctx context.Context, f Forge, owner, defBranch, botBranch string, only []string) (policy.Org, []pr.ManagedRepo, error) {
	if sc := f.Capabilities().Scanner; sc != nil {
		org, managed, err := sc.Scan(ctx, owner, defBranch, botBranch, only)
		if err != nil {
			return org, nil, fmt.Errorf("reading the teams and repos of %s: %w", owner, err)
		}
		return org, managed, nil
	}
	org, err := f.Org(ctx, owner)
	if err != nil {
		return org, nil, fmt.Errorf("reading the teams and repos of %s: %w", owner, err)
	}
	if only != nil {
		return org, nil, nil
	}
	managed, err := f.ListManaged(ctx, owner)
	if err != nil {
		return org, nil, fmt.Errorf("listing repos managed under %s: %w", owner, err)
	}
	return org, managed, nil
}

// plan runs the read-only phase shared by Plan and Apply.
func plan(ctx context.Context, f Forge, repo *control.Repo, targets []*fanout.Target, opts Options) ([]*item, *Report, error) {
	if repo == nil || repo.Platform == nil {
		return nil, nil, fmt.Errorf("%w: no platform loaded", ErrNoTargets)
	}
	if len(targets) == 0 {
		return nil, nil, fmt.Errorf("%w (%d clusters, %d workspaces): refusing to treat it as \"remove everything\"; check --control",
			ErrNoTargets, len(repo.Clusters), len(repo.Workspaces))
	}
	if err := opts.Shard.Validate(); err != nil {
		return nil, nil, err
	}
	started := opts.Now()
	fl := repo.Fleet()
	owner, defBranch := fl.Owner, fl.DefaultBranch
	only := map[string]bool{}
	for _, r := range opts.Only {
		only[strings.ToLower(r)] = true
	}
	org, managed, err := readOwner(ctx, f, owner, defBranch, fl.PRBranch, opts.Only)
	if err != nil {
		return nil, nil, err
	}
	if is := repo.MissingTeams(owner, org.HasTeam); len(is) > 0 {
		// A team that does not exist is a control repo error: nothing is
		// planned further, nothing is written anywhere.
		rep := &Report{Source: opts.Source, Issues: is, started: started}
		rep.finish(opts.Now())
		return nil, rep, is
	}
	items := make([]*item, 0, len(targets)+len(managed))
	wanted := map[string]bool{}
	for _, t := range targets {
		if t.Owner != owner {
			return nil, nil, fmt.Errorf("target %s is not owned by the platform owner %s", t.FullName(), owner)
		}
		if wanted[t.Repo] {
			return nil, nil, fmt.Errorf("two targets render the same repo %s", t.FullName())
		}
		wanted[t.Repo] = true
		if (opts.Only == nil || only[strings.ToLower(t.Repo)]) && opts.Shard.Owns(t.Repo) {
			items = append(items, newItem(t))
		} else if hasWaves(repo) && t.Kind == fanout.KindCluster {
			// The rollout gate weighs every cluster of a wave, not only this run's.
			it := newItem(t)
			it.observeOnly = true
			items = append(items, it)
		}
	}
	for _, m := range managed {
		if wanted[m.Repo] || !opts.Shard.Owns(m.Repo) {
			continue
		}
		items = append(items, newItem(fanout.Tombstone(owner, fl.Admins, defBranch, m.Kind, m.Name, m.Repo)))
	}
	if ctl := fl.ControlRepo; ctl != "" && (opts.Only == nil || only[strings.ToLower(ctl)]) && opts.Shard.Owns(ctl) {
		if wanted[ctl] {
			return nil, nil, fmt.Errorf("the control repo %s/%s is also a target repo", owner, ctl)
		}
		items = append(items, controlItem(fl))
	}
	sort.Slice(items, func(a, b int) bool { return items[a].target.Repo < items[b].target.Repo })
	if hasWaves(repo) {
		for _, it := range items {
			if it.target.Kind == fanout.KindCluster && !it.target.Removed {
				auto := repo.ClusterAutoMerge(it.target.Name)
				it.autoMerge = &auto
			}
		}
	}

	prOpts := prOptions(repo, opts)
	accessOpts := accessOptions(fl, org)
	each(ctx, len(items), opts.Concurrency, func(i int) {
		it := items[i]
		if it.observeOnly {
			// The gate reads its pull request in one batch (see gateRollout). In a
			// sharded full run the owner's scan already holds every repo's heads, so
			// its plan (content only, no access) costs no request on GitHub; a run
			// limited by Only does not plan it, unless a component declares its own
			// waves: which waves the revision takes depends on every cluster's change.
			if opts.Only == nil || hasComponentWaves(repo) {
				if d, err := pr.Plan(ctx, f, it.target, it.prOptions(prOpts)); err == nil {
					it.decision = d
				}
			}
			return
		}
		if err := recovered(func() { planOne(ctx, f, it, org, prOpts, accessOpts, opts) }); err != nil {
			it.res.fail(fmt.Errorf("%s: %w", it.target.FullName(), err))
		}
	})

	for _, it := range items {
		if it.decision == nil && it.res.Err == nil && !it.observeOnly {
			it.res.Err = fmt.Errorf("%s: not planned: %w", it.target.FullName(), context.Cause(ctx))
		}
	}
	st, err := gateRollout(ctx, f, repo, items, opts)
	if err != nil {
		return nil, nil, err
	}
	kept := items[:0]
	for _, it := range items {
		if !it.observeOnly {
			kept = append(kept, it)
		}
	}
	items = kept
	rep := &Report{Source: opts.Source, Rollout: st, started: started}
	removals, total := 0, 0
	clusters, clustersRemoved, componentRemovals := 0, 0, 0
	for _, it := range items {
		if !it.accessOnly {
			total++
		}
		removed := it.target.Removed && (it.decision == nil || it.decision.Action == pr.ActionRemove)
		if removed {
			removals++
		}
		removals += it.destroys // provisioned clusters whose machines the plan destroys
		if it.target.Kind == fanout.KindCluster {
			clusters++
			if removed {
				clustersRemoved++
			} else if it.decision != nil && removesComponent(it.decision) {
				componentRemovals++
			}
		}
	}
	if opts.Only != nil {
		// A run limited to some repos (an incremental apply or plan, a drift batch) weighs its
		// removals against the fleet, as the full run it stands in for does: against the
		// repos it planned, two clusters losing a component of a 30-cluster fleet would be
		// refused.
		fleetTotal, fleetClusters := 0, 0
		for _, t := range targets {
			if opts.Shard.Owns(t.Repo) {
				fleetTotal++
				if t.Kind == fanout.KindCluster {
					fleetClusters++
				}
			}
		}
		total, clusters = max(total, fleetTotal), max(clusters, fleetClusters)
	}
	limit := &fl.MaxRemovals
	max, err := intstr.GetScaledValueFromIntOrPercent(limit, total, true)
	if err != nil {
		return nil, nil, fmt.Errorf("platform spec.maxRemovals %q: %w", limit.String(), err)
	}
	if max < 1 {
		max = 1
	}
	rep.Removals, rep.MaxRemovals = removals, max
	var refused error
	switch {
	case opts.AllowRemovals:
	case removals > max:
		refused = fmt.Errorf("%w: %d of %d target repos would be removed, more than maxRemovals (%s of %d = %d); nothing was written. "+
			"If the control repo is right, re-run with --allow-removals", ErrTooManyRemovals, removals, total, limit.String(), total, max)
	case clustersRemoved > 0 && clustersRemoved == clusters:
		// maxRemovals is at least 1, so a one-cluster fleet would lose its cluster to an
		// emptied clusters/ directory without this.
		refused = fmt.Errorf("%w: every cluster repo (%d) would be removed; nothing was written. "+
			"If the control repo is right, re-run with --allow-removals", ErrTooManyRemovals, clustersRemoved)
	case componentRemovals > max:
		refused = fmt.Errorf("%w: %d of %d cluster repos would lose a platform component, more than maxRemovals (%s = %d); nothing was written. "+
			"A clusterSelector that matches no cluster does this (see the warnings); if the control repo is right, re-run with --allow-removals",
			ErrTooManyRemovals, componentRemovals, clusters, limit.String(), max)
	}
	rep.Refused = joinRefusals(refused, refuseAccess(items, opts.AllowAccessRemovals))
	return items, rep, nil
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

// planOne decides one item: its PR action, its access plan and its
// CODEOWNERS check.
func planOne(ctx context.Context, f Forge, it *item, org policy.Org, prOpts pr.Options, accessOpts policy.DiffOptions, opts Options) {
	t := it.target
	if org.IsArchived(t.Repo) {
		// GitHub refuses every write to an archived repo: leave it
		// alone, and say so rather than fail.
		it.skipped, it.res.Skipped = true, SkippedArchived
		it.decision = &pr.Decision{Owner: t.Owner, Repo: t.Repo, Kind: t.Kind, Name: t.Name, Action: pr.ActionNoop}
		it.res.Action, it.res.Reason = pr.ActionNoop, "archived: not reconciled"
		return
	}
	if it.accessOnly {
		it.decision = &pr.Decision{Owner: t.Owner, Repo: t.Repo, Kind: t.Kind, Name: t.Name, Action: pr.ActionNoop}
		it.res.Action, it.res.Reason = pr.ActionNoop, "control repo: access only"
		if err := planAccess(ctx, f, it, accessOpts, opts.AllowAccessRemovals); err != nil {
			it.res.fail(err)
		}
		return
	}
	d, err := pr.Plan(ctx, f, t, it.prOptions(prOpts))
	if err != nil {
		it.res.fail(err)
		return
	}
	it.decision = d
	it.res.fromDecision(d)
	if t.Kind == fanout.KindManagement {
		lines, destroyed, err := provisionPlan(ctx, f, t, d)
		if err != nil {
			it.res.fail(err)
			return
		}
		it.res.Provision, it.destroys, d.Notes = lines, destroyed, lines
	}
	if t.Removed || d.CreateRepo {
		return
	}
	if err := planAccess(ctx, f, it, accessOpts, opts.AllowAccessRemovals); err != nil {
		it.res.fail(err)
		return
	}
	checkCodeowners(ctx, f, it, it.observed, false)
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

// removesComponent reports whether a cluster repo's plan deletes a rendered platform
// component, which Flux then prunes from the cluster: every file of the component goes and
// none comes. Moving a component's file into its directory (platform/<app>.yaml before
// per-component Kustomizations, platform/<app>/ since) removes nothing.
func removesComponent(d *pr.Decision) bool {
	removed, kept := map[string]bool{}, map[string]bool{}
	for _, f := range d.Files {
		c := platformComponent(f.Path)
		if c == "" {
			continue
		}
		if f.Op == pr.FileRemoved {
			removed[c] = true
		} else {
			kept[c] = true
		}
	}
	for c := range removed {
		if !kept[c] {
			return true
		}
	}
	return false
}

// platformComponent returns the platform component (or the tenancy policy) a cluster
// repo path belongs to, in today's layout (platform/<app>/...) or the one before
// (platform/<app>.yaml); "" for every other path.
func platformComponent(p string) string {
	rest, ok := strings.CutPrefix(p, "platform/")
	if !ok {
		return ""
	}
	if c, _, ok := strings.Cut(rest, "/"); ok {
		return c
	}
	if rest == "kustomization.yaml" {
		return ""
	}
	return strings.TrimSuffix(rest, ".yaml")
}
