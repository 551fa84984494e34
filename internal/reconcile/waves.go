package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// ErrHeld marks a repo whose change waits for its rollout wave (platform spec.rollout.waves):
// the repo is reported deferred, nothing is written to its pull request, and a later run
// (a webhook, the Action's schedule) opens it once the gate admits it.
var ErrHeld = report.Classify(errors.New("held by the rollout"), report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonHeldByRollout})

// FluxStatusPrefix starts the context of every commit status Flux's notification-controller
// posts for a Kustomization with a github Provider ("kustomization/<name>/<uid prefix>"): only
// those count as a cluster's health.
const FluxStatusPrefix = "kustomization/"

// hasWaves reports whether the control repo declares a rollout in waves (the fleet's, or a
// component's own).
func hasWaves(repo *control.Repo) bool {
	return repo.HasRollout()
}

// hasComponentWaves reports whether a platform component declares its own waves: then the
// gate needs every cluster's change to know which waves the revision takes.
func hasComponentWaves(repo *control.Repo) bool {
	if repo == nil || repo.Platform == nil {
		return false
	}
	for _, c := range repo.Platform.Spec.Components {
		if c.Rollout != nil {
			return true
		}
	}
	return false
}

// revisionPlan is the waves the run's revision takes (control.Repo.RolloutPlan): the
// components with their own waves that its changes touch, and spec.rollout.waves when they
// touch anything else. A change is read from each cluster's pending files (the default
// branch against the desired tree) and, for the clusters that merged it, from the lists their
// pull request recorded (recorded), so the plan does not change as the rollout progresses. A
// cluster that could not be planned counts as touching every list.
func revisionPlan(repo *control.Repo, clusters []*repoPlan, recorded [][]string) control.RolloutPlan {
	own := map[string]bool{}
	for _, c := range repo.Platform.Spec.Components {
		if c.Rollout != nil {
			own[c.App] = true
		}
	}
	touched := map[string]bool{}
	fleet := false
	for _, c := range clusters {
		if c.content == nil {
			fleet = true
			for app := range own {
				touched[app] = true
			}
			continue
		}
		for _, f := range c.content.Files {
			if app, ok := fanout.ComponentOfPath(f.Path); ok && own[app] {
				touched[app] = true
			} else {
				fleet = true
			}
		}
	}
	for _, lists := range recorded {
		for _, l := range lists {
			if app, ok := strings.CutPrefix(l, control.ComponentWaves("")); ok && own[app] {
				touched[app] = true
			} else if l == control.FleetWaves {
				fleet = true
			}
		}
	}
	return repo.RolloutPlan(slices.Sorted(maps.Keys(touched)), fleet)
}

// rolloutWaves resolves a plan's waves for rollout.Evaluate.
func rolloutWaves(plan control.RolloutPlan) []rollout.Wave {
	out := make([]rollout.Wave, 0, len(plan.Waves))
	for _, w := range plan.Waves {
		out = append(out, rollout.Wave{Name: w.Name, Clusters: w.Clusters, MaxParallel: w.MaxParallel, Soak: w.Soak})
	}
	return out
}

// health is Flux's verdict on a merge commit, from the newest status of each of its
// kustomization/ contexts: a failure (or error) wins, then pending; success needs every one
// to be success, and is dated by the last of them.
func health(statuses []pr.CommitStatus) (rollout.Health, time.Time) {
	h, at := rollout.HealthUnknown, time.Time{}
	newest := map[string]pr.CommitStatus{}
	for _, s := range statuses {
		if !strings.HasPrefix(s.Context, FluxStatusPrefix) {
			continue
		}
		if o, ok := newest[s.Context]; !ok || s.CreatedAt.After(o.CreatedAt) {
			newest[s.Context] = s
		}
	}
	if len(newest) == 0 {
		return h, at
	}
	h = rollout.HealthSuccess
	for _, s := range newest {
		switch s.State {
		case pr.StatusFailure, pr.StatusError:
			if h != rollout.HealthFailure || s.CreatedAt.Before(at) {
				at = s.CreatedAt
			}
			h = rollout.HealthFailure
		case pr.StatusSuccess:
			if h == rollout.HealthSuccess && s.CreatedAt.After(at) {
				at = s.CreatedAt
			}
		default:
			if h == rollout.HealthSuccess {
				h, at = rollout.HealthPending, s.CreatedAt
			}
		}
	}
	return h, at
}

// rolloutVerdict is the gate phase's output: the rollout's status for the run's revision (nil
// without waves), the repos it holds and why, and what the revision's waves say of each
// cluster's pull request.
type rolloutVerdict struct {
	status *rollout.Status
	// held is, by repo name, why the gate holds the repo's new pull request (an error wrapping
	// ErrHeld, deferred until the rollout's next check); the repo's access still converges.
	held map[string]error
	// merge is, by repo name, how a cluster's pull request merges and which lists of waves it
	// records (pr.Options.AutoMerge, pr.Options.Waves).
	merge map[string]mergeSettings
}

// mergeSettings are what a cluster's wave decides of its pull request: whether it merges
// automatically (never while the rollout is paused), and the lists of waves the revision
// takes, recorded in its body.
type mergeSettings struct {
	autoMerge bool
	waves     []string
}

// gate evaluates the rollout of the run's revision over every cluster repo (the run's and its
// observers) and holds the repos the gate does not admit: a cluster repo whose change would
// open a pull request while its wave has not started, and a workspace repo while any cluster
// of the workspace is held (a workspace repo serves all its clusters at once, so its change
// goes with the last wave of its clusters). An open pull request is always updated in place.
// Without declared waves it holds nothing.
func gate(ctx context.Context, f Forge, in runInput, repos, observers []*repoPlan) (*rolloutVerdict, error) {
	if !hasWaves(in.repo) {
		return &rolloutVerdict{}, nil
	}
	rd := f.Capabilities().Rollout
	if rd == nil {
		return nil, fmt.Errorf("platform spec.rollout.waves: this forge cannot read pull request merges and commit statuses " +
			"(it declares no rollout reader), which a rollout in waves is gated on; use the github or local forge, or remove spec.rollout")
	}
	clusters := gateClusters(repos, observers)
	fl := in.repo.Fleet()
	names := make([]string, len(clusters))
	for i, c := range clusters {
		names[i] = c.target().Repo
	}
	prs, err := rd.RolloutPRs(ctx, fl.Owner, names, fl.DefaultBranch, fl.PRBranch)
	if err != nil {
		return nil, fmt.Errorf("reading the rollout state of %d cluster repos: %w", len(names), err)
	}
	obs := map[string]rollout.Observed{}
	var recorded [][]string
	for _, c := range clusters {
		p, ok := prs[c.target().Repo]
		o, waves := observeRollout(c.content, p, ok, in.opts.Source)
		obs[c.target().Name] = o
		if waves != nil {
			recorded = append(recorded, waves)
		}
	}
	plan := revisionPlan(in.repo, clusters, recorded)
	ro := rollout.Options{HealthTimeout: in.repo.HealthTimeout(), Paused: in.repo.Paused != nil}
	if in.repo.Paused != nil {
		ro.PauseNote = in.repo.Paused.Reason
	}
	st := rollout.Evaluate(in.opts.Source, rolloutWaves(plan), obs, in.opts.Now(), ro)
	st.Lists = plan.Lists
	return &rolloutVerdict{status: &st, held: holds(in.repo, &st, repos), merge: mergeByWave(plan, clusters, in.repo.Paused == nil)}, nil
}

// gateClusters are the cluster repos the gate weighs: the run's own (content targets; a
// tombstone is removed and in no wave) and its observers, in the run's order.
func gateClusters(repos, observers []*repoPlan) []*repoPlan {
	var out []*repoPlan
	for _, p := range slices.Concat(repos, observers) {
		if _, ok := p.role.(accessEntry); ok || p.target().Kind != fanout.KindCluster || p.target().Removed {
			continue
		}
		out = append(out, p)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].target().Repo < out[b].target().Repo })
	return out
}

// observeRollout is what the gate sees of one cluster (rollout.Observed): whether the revision
// changes it, and its pull request when it is open or carried this revision (or exactly the
// tree this revision renders: a later control-repo commit that leaves the cluster alone must
// not let it skip its health check and soak). d is the cluster's decision (nil: not planned,
// taken for changed, so its wave is not done: such a run may hold what a full run admits, never
// the reverse); p its newest pull request when found. It also returns the lists of waves a
// merged pull request of this revision recorded.
func observeRollout(d *pr.Decision, p pr.RolloutPR, found bool, source string) (rollout.Observed, []string) {
	o := rollout.Observed{Changed: d == nil || (!d.Action.InSync() && d.Action != pr.ActionClose)}
	current := found && carriesRevision(p, d, source)
	if !found || (p.State != pr.StateOpen && !current) {
		return o, nil
	}
	rp := &rollout.PR{Number: p.Number, Revision: p.Source, Open: p.State == pr.StateOpen}
	if current {
		rp.Revision = source
	}
	o.PR = rp
	if rp.Open && d != nil && d.Action != pr.ActionClose {
		// An open pull request that already carries the desired tree plans as a no-op, yet
		// the repo still differs from its default branch.
		o.Changed = true
	}
	if p.State != pr.StateMerged {
		return o, nil
	}
	rp.Merged, rp.MergedAt = true, p.MergedAt
	rp.Health, rp.HealthAt = health(p.Statuses)
	if rp.Health == rollout.HealthUnknown && p.Head != "" {
		// The default branch moved on before Flux reported (a cluster admin's commit): Flux
		// applies, and reports on, the newer head, which holds the merge (a protected default
		// branch is never rewritten).
		rp.Health, rp.HealthAt = health(p.HeadStatuses)
	}
	// The revision's change reached the default branch through this pull request: the
	// cluster is part of the rollout even though it matches now.
	o.Changed = true
	if p.Source == source {
		return o, p.Waves
	}
	return o, nil
}

// carriesRevision reports whether a cluster's pull request belongs to the rollout of source:
// it carried the revision, or it was merged with exactly the tree the revision renders (d, the
// cluster's decision, finds the repo in sync with it).
func carriesRevision(p pr.RolloutPR, d *pr.Decision, source string) bool {
	if p.Source == source {
		return true
	}
	return p.State == pr.StateMerged && d != nil && d.Action.InSync() && p.Tree != "" && p.Tree == d.Tree
}

// mergeByWave is how the pull request of each cluster of the revision's waves merges: as its
// wave says, and never automatically while the rollout is paused (nor is auto-merge enabled).
func mergeByWave(plan control.RolloutPlan, clusters []*repoPlan, unpaused bool) map[string]mergeSettings {
	byName := make(map[string]string, len(clusters))
	for _, c := range clusters {
		byName[c.target().Name] = c.target().Repo
	}
	out := map[string]mergeSettings{}
	for _, w := range plan.Waves {
		for _, c := range w.Clusters {
			if repo, ok := byName[c]; ok {
				out[repo] = mergeSettings{autoMerge: w.AutoMerge && unpaused, waves: plan.Lists}
			}
		}
	}
	return out
}

// holds is, by repo name, why the gate holds each of the run's repos whose decision would open
// a new pull request: a cluster the rollout status holds, and a workspace while one of its
// clusters is held. A repo that failed, or whose decision writes nothing, is not held. The
// hold is deferred until the rollout's next check, when time alone can change the verdict.
func holds(repo *control.Repo, st *rollout.Status, repos []*repoPlan) map[string]error {
	held := map[string]error{}
	hold := func(p *repoPlan, why string) {
		if p.content == nil || !p.content.Writes() || p.res.Err != nil || !opensPR(p.content) {
			return
		}
		err := fmt.Errorf("%s: %w: %s", p.target().FullName(), ErrHeld, why)
		held[p.target().Repo] = report.Classify(err, report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonHeldByRollout, RetryAt: st.NextCheck})
	}
	for _, p := range repos {
		t := p.target()
		switch {
		case t.Removed:
		case t.Kind == fanout.KindCluster:
			if why, ok := st.Held[t.Name]; ok {
				hold(p, why)
			}
		case t.Kind == fanout.KindWorkspace:
			if waiting := heldClusters(repo, st, t.Name); len(waiting) > 0 {
				hold(p, fmt.Sprintf("the workspace's change goes with the last wave of its clusters; waiting for %s", strings.Join(waiting, ", ")))
			}
		}
	}
	return held
}

// heldClusters are the clusters of a workspace the rollout holds, sorted.
func heldClusters(repo *control.Repo, st *rollout.Status, workspace string) []string {
	var waiting []string
	for _, c := range repo.Clusters {
		if _, held := st.Held[c.Metadata.Name]; held && c.Spec.Workspace == workspace {
			waiting = append(waiting, c.Metadata.Name)
		}
	}
	sort.Strings(waiting)
	return waiting
}

// holdAll marks the result of every repo the gate holds deferred (its Err the hold).
func (v *rolloutVerdict) holdAll(repos []*repoPlan) {
	for _, p := range repos {
		if err, ok := v.held[p.target().Repo]; ok {
			p.res.Err = err
		}
	}
}

// prOptions is the pull request options a repo is executed with: the run's, a cluster's own
// merge mode when the fleet rolls out in waves, and what its wave says of its pull request.
func (v *rolloutVerdict) prOptions(env *decideEnv, t *fanout.Target) pr.Options {
	o := env.prOptions(t)
	if m, ok := v.merge[t.Repo]; ok {
		o.AutoMerge, o.Waves = m.autoMerge, m.waves
	}
	return o
}

// opensPR reports whether a decision would open a new pull request (or create the repo):
// what the gate holds. Updating, closing or blocking an open one is never held.
func opensPR(d *pr.Decision) bool {
	return d != nil && (d.OpenPR || d.CreateRepo || len(d.Bootstrap) > 0)
}

// withoutContent is d without its content writes (repo creation, bootstrap, bot branch and
// pull request): what a held repo still executes, i.e. its access plan.
func withoutContent(d *pr.Decision) *pr.Decision {
	c := *d
	c.CreateRepo, c.Bootstrap, c.Changes = false, nil, nil
	c.PushBranch, c.OpenPR, c.UpdatePR = false, false, false
	return &c
}
