package reconcile

import (
	"context"
	"fmt"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// repoPlan is one repo of the run once decided: its role, the decisions the run executes there
// and its result so far. The gate reads it, the guard weighs it, execute carries it out.
type repoPlan struct {
	role role
	// content is the pull-request decision (a no-op for the control repo and an archived repo);
	// nil when the repo could not be planned.
	content *pr.Decision
	// access is the repo's access as read and the plan that converges it; nil when access is
	// not planned (a new, removed or archived repo, or one whose access could not be read).
	access *accessPlan
	// destroys counts the provisioned clusters a management repo's plan deletes (deletion
	// policy Delete): each counts against maxRemovals.
	destroys int
	res      Result
}

// accessPlan is a repo's access as observed and the policy.Diff plan that converges it.
type accessPlan struct {
	observed policy.Access
	plan     policy.Plan
}

// target is the repo as its role sees it.
func (p *repoPlan) target() *fanout.Target { return p.role.target() }

// decideEnv is what every repo's decisions share: the owner's org, the run's pull request and
// access options, and whether the gate needs its observers' changes.
type decideEnv struct {
	repo          *control.Repo
	rollouts      *rollout.Rollouts
	org           policy.Org
	prOpts        pr.Options
	accessOpts    policy.DiffOptions
	allowAccess   bool
	readObservers bool
}

// newDecideEnv is the decide phase's environment for a run over sc.
func newDecideEnv(in runInput, sc *scoped) *decideEnv {
	return &decideEnv{
		repo: in.repo, rollouts: in.rollouts, org: sc.org, prOpts: prOptions(in.repo, in.opts),
		accessOpts: accessOptions(sc.fleet, sc.org), allowAccess: in.opts.AllowAccessRemovals,
		// A run limited by Only does not plan its observers, unless a component declares its
		// own waves: which waves the revision takes depends on every cluster's change. In a
		// sharded full run the owner's scan already holds every repo's heads, so an observer's
		// plan (content only, no access) costs no request on GitHub.
		readObservers: in.opts.Only == nil || in.rollouts.NeedsEveryChange(),
	}
}

// prOptions is the pull request options a repo is decided with: the run's, with a cluster's own
// merge mode when the fleet rolls out in waves (what Cost prices for opening its pull request).
func (e *decideEnv) prOptions(t *fanout.Target) pr.Options {
	o := e.prOpts
	if e.rollouts.Enabled() && t.Kind == fanout.KindCluster && !t.Removed {
		o.AutoMerge = e.repo.ClusterAutoMerge(t.Name)
	}
	return o
}

// decideAll observes and decides every repo of the run's scope, at most opts.Concurrency at a
// time, and returns the run's repos and, apart, the gate's observers. A repo the run did not
// reach (the context ended) fails as not planned.
func decideAll(ctx context.Context, f Forge, in runInput, sc *scoped) (repos, observers []*repoPlan) {
	env := newDecideEnv(in, sc)
	plans := make([]*repoPlan, len(sc.roles))
	steps := newStepper(in.opts.Step, PhasePlan, len(plans))
	each(ctx, len(plans), in.opts.Concurrency, func(i int) {
		plans[i] = planRepo(ctx, f, sc.roles[i], env)
		steps.step()
	})
	for i, p := range plans {
		if p == nil {
			p = &repoPlan{role: sc.roles[i], res: newResult(sc.roles[i].target())}
			if _, ok := p.role.(gateObserver); !ok {
				p.res.fail(fmt.Errorf("%s: not planned: %w", p.target().FullName(), context.Cause(ctx)))
			}
		}
		if _, ok := p.role.(gateObserver); ok {
			observers = append(observers, p)
		} else {
			repos = append(repos, p)
		}
	}
	return repos, observers
}

// planRepo observes and decides one repo as its role asks. A panic fails that repo alone
// instead of the run (and, in serve, the process).
func planRepo(ctx context.Context, f Forge, r role, env *decideEnv) *repoPlan {
	p := &repoPlan{role: r, res: newResult(r.target())}
	if err := recovered(func() { decide(ctx, f, p, observe(ctx, f, r, env), env) }); err != nil {
		p.res.fail(fmt.Errorf("%s: %w", r.target().FullName(), err))
	}
	return p
}

// observation is what the forge shows of one repo before anything about it is decided.
type observation struct {
	// archived repos are left alone: nothing else is read.
	archived bool
	// snapshot is what pr.Decide needs (roles with content).
	snapshot *pr.Snapshot
	snapErr  error
	// access is the repo's access settings (roles whose access converges, once the repo
	// exists: a new repo gets its access as it is created).
	access    *policy.Access
	accessErr error
}

// observe reads what a role's decisions start from, and nothing more: no snapshot of the
// control repo, whose content is never written; no access of a tombstone, which keeps its
// access, nor of a gate observer, of which the gate needs only the change; nothing of an
// archived repo, nor of an observer whose change the gate does not need.
func observe(ctx context.Context, f Forge, r role, env *decideEnv) observation {
	t := r.target()
	var o observation
	switch r.(type) {
	case gateObserver:
		if env.readObservers {
			o.snapshot, o.snapErr = pr.ReadSnapshot(ctx, f, t, env.prOptions(t))
		}
		return o
	}
	if env.org.IsArchived(t.Repo) {
		o.archived = true
		return o
	}
	switch r.(type) {
	case accessEntry:
		o.readAccess(ctx, f, t)
	case tombstone:
		o.snapshot, o.snapErr = pr.ReadSnapshot(ctx, f, t, env.prOptions(t))
	case contentTarget:
		o.snapshot, o.snapErr = pr.ReadSnapshot(ctx, f, t, env.prOptions(t))
		if o.snapErr == nil && o.snapshot.Exists {
			o.readAccess(ctx, f, t)
		}
	}
	return o
}

// readAccess reads the repo's access settings into the observation.
func (o *observation) readAccess(ctx context.Context, f Forge, t *fanout.Target) {
	observed, err := f.Access(ctx, t.Owner, t.Repo, t.Access)
	if err != nil {
		o.accessErr = fmt.Errorf("%s: reading access: %w", t.FullName(), err)
		return
	}
	o.access = &observed
}

// decide makes a role's decisions from what observe read: the pull request (pr.Decide) and
// what it changes (the objects of its manifests, a management repo's provisioned clusters),
// and the access plan (policy.Diff), then checks the CODEOWNERS on the default branch. The
// reads decide still makes are those the decision itself names (the old content of the
// files it changes, GitHub's verdict on a CODEOWNERS blob), so an unchanged repo costs none.
func decide(ctx context.Context, f Forge, p *repoPlan, o observation, env *decideEnv) {
	t := p.target()
	switch p.role.(type) {
	case gateObserver:
		if o.snapshot == nil || o.snapErr != nil {
			return
		}
		// Errors leave the observer unplanned: the gate takes it for changed.
		if d, err := pr.Decide(o.snapshot, t, env.prOptions(t)); err == nil && pr.Describe(ctx, f, t, d) == nil {
			p.content = d
		}
		return
	case accessEntry:
		if o.archived {
			p.archive()
			return
		}
		p.content = noop(t)
		p.res.Action, p.res.Reason = pr.ActionNoop, "control repo: access only"
		p.decideAccess(o, env)
		return
	}
	if o.archived {
		p.archive()
		return
	}
	if !p.decideContent(ctx, f, o, env) {
		return
	}
	if p.decideAccess(o, env) {
		checkCodeowners(ctx, f, p, p.access.observed, false)
	}
}

// decideContent decides a repo's pull request from its snapshot and explains it: the objects
// it changes and, in a management repo, what it does to each provisioned cluster. It reports
// whether the repo could be decided.
func (p *repoPlan) decideContent(ctx context.Context, f Forge, o observation, env *decideEnv) bool {
	t := p.target()
	if o.snapErr != nil {
		p.res.fail(o.snapErr)
		return false
	}
	d, err := pr.Decide(o.snapshot, t, env.prOptions(t))
	if err == nil {
		err = pr.Describe(ctx, f, t, d)
	}
	if err != nil {
		p.res.fail(err)
		return false
	}
	p.content = d
	p.res.fromDecision(d)
	if t.Kind != fanout.KindManagement {
		return true
	}
	lines, destroyed, err := provisionPlan(ctx, f, t, d)
	if err != nil {
		p.res.fail(err)
		return false
	}
	p.res.Provision, p.destroys, d.Notes = lines, destroyed, lines
	return true
}

// decideAccess diffs the access observe read against the persona matrix (nothing to do for a
// role or a repo whose access was not read) and reports whether an access plan was made.
func (p *repoPlan) decideAccess(o observation, env *decideEnv) bool {
	if o.accessErr != nil {
		p.res.fail(o.accessErr)
		return false
	}
	if o.access == nil {
		return false
	}
	t := p.target()
	plan := policy.Diff(t.Access, *o.access, env.accessOpts)
	p.access = &accessPlan{observed: *o.access, plan: plan}
	if o.access.ProtectionUnavailable != "" && t.Access.Protection != nil {
		p.res.warn(protectionWarning(t, o.access.ProtectionUnavailable))
	}
	if rep := accessReport(t, plan, p.content, env.allowAccess); rep != nil {
		p.res.Access = rep
	}
	p.res.AccessChanged = !plan.Empty()
	return true
}

// archive decides an archived repo: GitHub refuses every write to it, so it is left alone,
// and the result says so rather than fail.
func (p *repoPlan) archive() {
	p.content = noop(p.target())
	p.res.Skipped = SkippedArchived
	p.res.Action, p.res.Reason = pr.ActionNoop, "archived: not reconciled"
}

// noop is the decision of a repo whose content the run leaves as it is.
func noop(t *fanout.Target) *pr.Decision {
	return &pr.Decision{Owner: t.Owner, Repo: t.Repo, Kind: t.Kind, Name: t.Name, Action: pr.ActionNoop}
}

// newResult is the result of a repo before anything is known of it.
func newResult(t *fanout.Target) Result {
	return Result{Repo: t.FullName(), Kind: t.Kind, Name: t.Name}
}

// prOptions is the run's pull request options from the platform's settings.
func prOptions(repo *control.Repo, opts Options) pr.Options {
	fl := repo.Fleet()
	return pr.Options{
		Branch:    fl.PRBranch,
		Labels:    fl.Labels,
		Source:    opts.Source,
		AutoMerge: fl.AutoMerge,
	}
}

// isAccessEntry reports whether a repo of the run is the control repo, whose content fleetbot
// never writes.
func isAccessEntry(p *repoPlan) bool {
	_, ok := p.role.(accessEntry)
	return ok
}

// archived reports whether execute leaves the repo alone entirely.
func (p *repoPlan) archived() bool { return p.res.Skipped == SkippedArchived }
