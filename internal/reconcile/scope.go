package reconcile

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// A repo's role in a run decides what the run reads, decides and writes there. There are four,
// one type each, instead of flags on one record: the phases after scope ask a repo's role, and
// a role that does not have a step never reaches it.
type role interface {
	// target is the repo as the run sees it: a rendered target, a tombstone's removal, the
	// control repo's access-only target.
	target() *fanout.Target
}

// contentTarget is a cluster, workspace or management repo of the run: its content converges
// through fleetbot's pull request, its access to the persona matrix.
type contentTarget struct{ *fanout.Target }

// tombstone is a repo fleetbot manages that left the control repo: a pull request removes its
// managed content (Flux prunes what it applied), its access is left as it is, and it counts
// against maxRemovals.
type tombstone struct{ *fanout.Target }

// accessEntry is the control repo (platform spec.repos.control): fleetbot converges its access
// and never writes its content.
type accessEntry struct{ *fanout.Target }

// gateObserver is a cluster repo outside the run (Options.Only, Options.Shard) that the rollout
// gate weighs all the same, since a wave is done only when all its clusters are: its pull
// request is read, nothing is written there, and it is not reported.
type gateObserver struct{ *fanout.Target }

// The roles' targets: what every phase needs of a repo whatever its role (its name, owner,
// kind, rendered files and access), and what seals role to these four types.
func (r contentTarget) target() *fanout.Target { return r.Target }
func (r tombstone) target() *fanout.Target     { return r.Target }
func (r accessEntry) target() *fanout.Target   { return r.Target }
func (r gateObserver) target() *fanout.Target  { return r.Target }

// scoped is the scope phase's output: the platform's fleet settings, what the owner's org
// holds, and the run's repos in their roles, sorted by repo.
type scoped struct {
	fleet control.Fleet
	org   policy.Org
	roles []role
}

// scope decides which repos the run plans, and in which role, after reading the owner once:
// its teams, its archived repos and, for a run over the whole fleet, the repos fleetbot manages
// there (those no target renders any more become tombstones). A control repo that names a team
// the org lacks stops the run here, before any repo is read: nothing is planned or written, and
// the report carries the issues (invalid input, ReasonTeamNotFound).
func scope(ctx context.Context, f Forge, in runInput, started time.Time) (*scoped, *Report, error) {
	if err := checkInput(in); err != nil {
		return nil, nil, err
	}
	fl := in.repo.Fleet()
	newStepper(in.opts.Step, PhaseRead, -1)
	org, managed, err := readOwner(ctx, f, fl.Owner, fl.DefaultBranch, fl.PRBranch, in.opts.Only)
	if err != nil {
		return nil, nil, err
	}
	if br, ok := f.(BaseRoleReader); ok && fl.BranchRules != nil && fl.BranchRules.Organization {
		// Organization administration is opted in: the base permission is readable, and the
		// read-only grants it covers are left out (policy.CoveredByBase).
		if org.BaseRole, err = br.BaseRole(ctx, fl.Owner); err != nil {
			return nil, nil, fmt.Errorf("reading the base permission of %s: %w", fl.Owner, err)
		}
	}
	if is := in.repo.MissingTeams(fl.Owner, org.HasTeam); len(is) > 0 {
		rep := &Report{Source: in.opts.Source, Issues: is, started: started}
		rep.finish(in.opts.Now())
		return nil, rep, report.Classify(is, report.Outcome{Class: report.ClassInvalidInput, Reason: report.ReasonTeamNotFound})
	}
	roles, err := assignRoles(in, fl, managed)
	if err != nil {
		return nil, nil, err
	}
	return &scoped{fleet: fl, org: org, roles: roles}, nil, nil
}

// checkInput refuses a run over nothing: an empty or unloaded control repo never means "remove
// everything"; and a shard that cannot own any repo.
func checkInput(in runInput) error {
	if in.repo == nil || in.repo.Platform == nil {
		return fmt.Errorf("%w: no platform loaded", ErrNoTargets)
	}
	if len(in.targets) == 0 {
		return fmt.Errorf("%w (%d clusters, %d workspaces): refusing to treat it as \"remove everything\"; check --control",
			ErrNoTargets, len(in.repo.Clusters), len(in.repo.Workspaces))
	}
	return in.opts.Shard.Validate()
}

// assignRoles gives every repo of the run its role: a target in the run's scope (Only, Shard)
// is a contentTarget; a cluster outside it a gateObserver when the fleet rolls out in waves; a
// managed repo of this shard that no target renders a tombstone; the control repo an
// accessEntry when it is in scope. It refuses a target of another owner, two targets of one
// repo, and a control repo that is also a target.
func assignRoles(in runInput, fl control.Fleet, managed []pr.ManagedRepo) ([]role, error) {
	inScope := scopeOf(in.opts)
	waves := in.rollouts.Enabled()
	roles := make([]role, 0, len(in.targets)+len(managed)+1)
	wanted := map[string]bool{}
	for _, t := range in.targets {
		if t.Owner != fl.Owner {
			return nil, fmt.Errorf("target %s is not owned by the platform owner %s", t.FullName(), fl.Owner)
		}
		if wanted[t.Repo] {
			return nil, fmt.Errorf("two targets render the same repo %s", t.FullName())
		}
		wanted[t.Repo] = true
		switch {
		case inScope(t.Repo):
			roles = append(roles, contentTarget{t})
		case waves && t.Kind == fanout.KindCluster:
			roles = append(roles, gateObserver{t})
		}
	}
	for _, m := range managed {
		if !wanted[m.Repo] && in.opts.Shard.Owns(m.Repo) {
			roles = append(roles, tombstone{fanout.Tombstone(fl.Owner, fl.Admins, fl.DefaultBranch, m.Kind, m.Name, m.Repo)})
		}
	}
	if ctl := fl.ControlRepo; ctl != "" && inScope(ctl) {
		if wanted[ctl] {
			return nil, fmt.Errorf("the control repo %s/%s is also a target repo", fl.Owner, ctl)
		}
		roles = append(roles, controlEntry(fl))
	}
	sort.Slice(roles, func(a, b int) bool { return roles[a].target().Repo < roles[b].target().Repo })
	return roles, nil
}

// scopeOf is whether a repo (a name without the owner) is in the run's scope: listed in Only
// (case does not matter, as on GitHub) or Only unset, and owned by the run's shard.
func scopeOf(opts Options) func(repo string) bool {
	only := map[string]bool{}
	for _, r := range opts.Only {
		only[strings.ToLower(r)] = true
	}
	return func(repo string) bool {
		return (opts.Only == nil || only[strings.ToLower(repo)]) && opts.Shard.Owns(repo)
	}
}

// controlEntry is the control repo's role, when the platform names it: its access only.
func controlEntry(fl control.Fleet) accessEntry {
	return accessEntry{&fanout.Target{
		Kind: KindControl, Name: fl.ControlRepo, Owner: fl.Owner, Repo: fl.ControlRepo,
		DefaultBranch: fl.DefaultBranch, Access: policy.ControlRepoAccess(fl.Admins, fl.DefaultBranch),
	}}
}

// readOwner reads, once per run, what the owner's org holds (teams, archived repos, logins) and,
// for a run over the whole fleet, the repos fleetbot manages there: with one batched scan when
// the forge can (see Scanner), else with Org and ListManaged.
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
