package rollout

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// FluxStatusPrefix starts the context of every commit status Flux's notification-controller
// posts for a Kustomization with a github Provider ("kustomization/<name>/<uid prefix>"): only
// those count as a cluster's health.
const FluxStatusPrefix = "kustomization/"

// CountsAsHealth reports whether a commit status context is one the gate weighs (HealthOf):
// a Flux Kustomization's (FluxStatusPrefix) or HelmRelease's (HelmStatusPrefix). It is the one
// definition: serve's ingress wakes the rollout on a status delivery of exactly these.
func CountsAsHealth(context string) bool {
	return strings.HasPrefix(context, FluxStatusPrefix) || strings.HasPrefix(context, HelmStatusPrefix)
}

// Cluster is one cluster repo the gate weighs, as the run decided it and the forge shows it.
type Cluster struct {
	// Name is the cluster's name in the control repo, Repo its repo (without the owner).
	Name, Repo string
	// Decision is the run's pull-request decision for the repo (nil: not planned, taken for
	// changed, so its wave is not done: such a run may hold what a full run admits, never the
	// reverse).
	Decision *pr.Decision
	// PR is fleetbot's newest pull request of the repo when Found.
	PR    pr.RolloutPR
	Found bool
}

// MergeSettings are what a cluster's wave decides of its pull request: whether it merges
// automatically (never while the rollout is paused), and the lists of waves the revision
// takes, recorded in its body (pr.Options.AutoMerge, pr.Options.Waves).
type MergeSettings struct {
	AutoMerge bool
	Waves     []string
}

// Verdict is the gate's answer for one run: the rollout's status, and how each cluster's pull
// request merges.
type Verdict struct {
	// Status is the rollout's status for the revision.
	Status *Status
	// Merge is, by cluster repo, how its pull request merges.
	Merge map[string]MergeSettings

	control *control.Repo
}

// Gate plans the waves of revision from the control repo (the components with their own waves
// that its changes touch, spec.rollout.waves for anything else: Plan) and evaluates them on
// what the forge shows of the clusters and of the run's workspace repos (see Workspace)
// (Evaluate) at the clock's time. It is pure: the same control repo, revision, repos and time
// give the same verdict.
func (r *Rollouts) Gate(revision string, clusters []Cluster, workspaces []Workspace) Verdict {
	obs := map[string]Observed{}
	var recorded [][]string
	for _, c := range clusters {
		o, waves := observe(c, revision)
		obs[c.Name] = o
		if waves != nil {
			recorded = append(recorded, waves)
		}
	}
	if workspaceChanged(workspaces, revision) {
		recorded = append(recorded, []string{FleetWaves})
	}
	plan := r.revisionPlan(clusters, recorded)
	attachWorkspaces(r.control, plan, workspaces, revision, obs)
	opts := options(r.control)
	if opts.Failed == nil {
		all := slices.Clone(clusters)
		for _, w := range workspaces {
			all = append(all, w.asCluster())
		}
		opts.Failed = rolledBackFailure(all)
	}
	st := Evaluate(revision, waves(plan), obs, r.now(), opts)
	st.Lists = plan.Lists
	return Verdict{Status: &st, Merge: mergeByWave(plan, clusters, st.MergesAllowed()), control: r.control}
}

// options are the rollout settings and records the control repo holds, for Evaluate: the
// health timeout, a pause, the change windows, the approvals and skips recorded for its
// content (rollout/approvals, rollout/skips) and a rollback recorded for it
// (rollout/rollback.yaml): each record applies while the control repo renders what it
// rendered when the record was written (control.RolloutRecord.Current).
func options(repo *control.Repo) Options {
	ro := Options{HealthTimeout: repo.HealthTimeout(), Paused: repo.Paused != nil, Schedule: repo.Schedule(),
		Approved: repo.ApprovedWaves(), Skipped: repo.SkippedClusters()}
	if repo.Paused != nil {
		ro.PauseNote = repo.Paused.Reason
	}
	if rb := repo.RolledBack(); rb != nil {
		ro.Failed = &Failure{Revision: rb.Revision, Recorded: true, Note: rb.Note}
	}
	return ro
}

// rolledBackFailure is the failure the run repeats, read from the rollback pull requests the
// clusters show (pr.RolloutPR.RollbackOf): a revision was rolled back, and every cluster it was
// rolled back on whose desired tree is known gets the very tree that failed there again. Nil
// when no cluster shows a rollback, or the run renders something else for any of them (a newer
// control-repo commit that changes them: a new rollout).
func rolledBackFailure(clusters []Cluster) *Failure {
	byRevision := map[string]*Failure{}
	desired := map[string]string{}
	for _, c := range clusters {
		if c.Decision != nil {
			desired[c.Repo] = c.Decision.Tree
		}
		if !c.Found || c.PR.RollbackOf == "" || c.PR.FailedTree == "" {
			continue
		}
		f := byRevision[c.PR.RollbackOf]
		if f == nil {
			f = &Failure{Revision: c.PR.RollbackOf, Trees: map[string]string{}}
			byRevision[c.PR.RollbackOf] = f
		}
		f.Trees[c.Repo] = c.PR.FailedTree
	}
	for _, rev := range slices.Sorted(maps.Keys(byRevision)) {
		f := byRevision[rev]
		known := map[string]string{}
		for repo, tree := range f.Trees {
			if _, ok := desired[repo]; ok {
				known[repo] = tree
			}
		}
		if len(known) == 0 {
			continue
		}
		if (&Failure{Revision: rev, Trees: known}).Repeats(desired) {
			return f
		}
	}
	return nil
}

// revisionPlan is the waves the run's revision takes (Plan): the
// components with their own waves that its changes touch, and spec.rollout.waves when they
// touch anything else. A change is read from each cluster's pending files (the default
// branch against the desired tree) and, for the clusters that merged it, from the lists their
// pull request recorded (recorded), so the plan does not change as the rollout progresses. A
// cluster that could not be planned counts as touching every list.
func (r *Rollouts) revisionPlan(clusters []Cluster, recorded [][]string) Plan {
	own := map[string]bool{}
	if r.platform() != nil {
		for _, c := range r.platform().Spec.Components {
			if c.Rollout != nil {
				own[c.App] = true
			}
		}
	}
	touched := map[string]bool{}
	fleet := false
	for _, c := range clusters {
		if c.Decision == nil {
			fleet = true
			for app := range own {
				touched[app] = true
			}
			continue
		}
		for _, f := range c.Decision.Files {
			if app, ok := fanout.ComponentOfPath(f.Path); ok && own[app] {
				touched[app] = true
			} else {
				fleet = true
			}
		}
	}
	for _, lists := range recorded {
		for _, l := range lists {
			if app, ok := strings.CutPrefix(l, ComponentWaves("")); ok && own[app] {
				touched[app] = true
			} else if l == FleetWaves {
				fleet = true
			}
		}
	}
	return r.Plan(slices.Sorted(maps.Keys(touched)), fleet)
}

// waves resolves a plan's waves for Evaluate.
func waves(plan Plan) []Wave {
	out := make([]Wave, 0, len(plan.Waves))
	for _, w := range plan.Waves {
		out = append(out, Wave{Name: w.Name, Clusters: w.Clusters, MaxParallel: w.MaxParallel, Soak: w.Soak,
			Budget: Budget{MaxUnavailable: w.MaxUnavailable, MaxFailures: w.MaxFailures}, Rollback: w.Rollback, Approvals: w.Approvals})
	}
	return out
}

// HealthOf is Flux's verdict on a merge commit, from the newest status of each of its
// kustomization/ and helmrelease/ contexts (FluxStatusPrefix, HelmStatusPrefix): a failure (or
// error) wins, then pending; success needs every one to be success, and is dated by the last
// of them.
func HealthOf(statuses []pr.CommitStatus) (Health, time.Time) {
	h, at := HealthUnknown, time.Time{}
	newest := map[string]pr.CommitStatus{}
	for _, s := range statuses {
		if !CountsAsHealth(s.Context) {
			continue
		}
		if o, ok := newest[s.Context]; !ok || s.CreatedAt.After(o.CreatedAt) {
			newest[s.Context] = s
		}
	}
	if len(newest) == 0 {
		return h, at
	}
	h = HealthSuccess
	for _, s := range newest {
		switch s.State {
		case pr.StatusFailure, pr.StatusError:
			if h != HealthFailure || s.CreatedAt.Before(at) {
				at = s.CreatedAt
			}
			h = HealthFailure
		case pr.StatusSuccess:
			if h == HealthSuccess && s.CreatedAt.After(at) {
				at = s.CreatedAt
			}
		default:
			if h == HealthSuccess {
				h, at = HealthPending, s.CreatedAt
			}
		}
	}
	return h, at
}

// FailedObjects names, from a merge commit's statuses, the Flux objects whose newest verdict
// is a failure, and what each applies (fanout.FluxOwner: a component, a workspace):
// "Kustomization platform-monitoring (component monitoring)"; "" when none failed. A
// context is Flux's "<kind>/<name>/<id>" (FluxStatusPrefix, HelmStatusPrefix).
func FailedObjects(statuses []pr.CommitStatus) string {
	newest := map[string]pr.CommitStatus{}
	for _, s := range statuses {
		if o, ok := newest[s.Context]; !ok || s.CreatedAt.After(o.CreatedAt) {
			newest[s.Context] = s
		}
	}
	var out []string
	for _, s := range pr.Failing(slices.Collect(maps.Values(newest))) {
		kind := ""
		switch {
		case strings.HasPrefix(s.Context, FluxStatusPrefix):
			kind = "Kustomization"
		case strings.HasPrefix(s.Context, HelmStatusPrefix):
			kind = "HelmRelease"
		default:
			continue
		}
		_, rest, _ := strings.Cut(s.Context, "/")
		name := rest
		if i := strings.LastIndexByte(rest, '/'); i > 0 {
			name = rest[:i]
		}
		w := kind + " " + name
		if owner := fanout.FluxOwner(name); owner != "" && kind == "Kustomization" {
			w += " (" + owner + ")"
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return strings.Join(out, ", ")
}

// observe is what the gate sees of one cluster (Observed): whether the revision changes it,
// and its pull request when it is open or carried this revision (or exactly the tree this
// revision renders: a later control-repo commit that leaves the cluster alone must not let it
// skip its health check and soak). It also returns the lists of waves a merged pull request
// of this revision recorded.
func observe(c Cluster, source string) (Observed, []string) {
	d, p := c.Decision, c.PR
	// A repo whose rollback keeps the failed content out (pr.ActionRolledBack) takes no part.
	o := Observed{Changed: d == nil || (!d.Action.InSync() && d.Action != pr.ActionClose && d.Action != pr.ActionRolledBack)}
	current := c.Found && carriesRevision(p, d, source)
	if !c.Found || (p.State != pr.StateOpen && !current) {
		return o, nil
	}
	rp := &PR{Number: p.Number, Revision: p.Source, Open: p.State == pr.StateOpen}
	if current {
		rp.Revision = source
	}
	o.PR = rp
	if rp.Open && d != nil && d.Action != pr.ActionClose && d.Action != pr.ActionRolledBack {
		// An open pull request that already carries the desired tree plans as a no-op, yet
		// the repo still differs from its default branch.
		o.Changed = true
	}
	if p.State != pr.StateMerged {
		return o, nil
	}
	rp.Merged, rp.MergedAt = true, p.MergedAt
	rp.Health, rp.HealthAt = HealthOf(p.Statuses)
	rp.FailedBy = FailedObjects(p.Statuses)
	if rp.Health == HealthUnknown && p.Head != "" {
		// The default branch moved on before Flux reported (a cluster admin's commit): Flux
		// applies, and reports on, the newer head, which holds the merge (a protected default
		// branch is never rewritten).
		rp.Health, rp.HealthAt = HealthOf(p.HeadStatuses)
		rp.FailedBy = FailedObjects(p.HeadStatuses)
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
// wave says, and never automatically while the rollout is paused or the change windows are
// closed (nor is auto-merge enabled then: Status.MergesAllowed).
func mergeByWave(plan Plan, clusters []Cluster, mergesAllowed bool) map[string]MergeSettings {
	byName := make(map[string]string, len(clusters))
	for _, c := range clusters {
		byName[c.Name] = c.Repo
	}
	out := map[string]MergeSettings{}
	for _, w := range plan.Waves {
		for _, c := range w.Clusters {
			if repo, ok := byName[c]; ok {
				out[repo] = MergeSettings{AutoMerge: w.AutoMerge && mergesAllowed, Waves: plan.Lists}
			}
		}
	}
	return out
}

// Holds reports why the gate holds a new pull request in target repo t, if it does: a cluster
// the rollout status holds, and a workspace while one of its clusters is held (a workspace
// repo serves all its clusters at once, so its change goes with the last wave of its
// clusters). A removed repo, and any other kind, is never held.
func (v *Verdict) Holds(t *fanout.Target) (string, bool) {
	if v == nil || v.Status == nil || t.Removed {
		return "", false
	}
	switch t.Kind {
	case fanout.KindCluster:
		why, ok := v.Status.Held[t.Name]
		return why, ok
	case fanout.KindWorkspace:
		if waiting := v.heldClusters(t.Name); len(waiting) > 0 {
			return fmt.Sprintf("the workspace's change goes with the last wave of its clusters; waiting for %s", strings.Join(waiting, ", ")), true
		}
	}
	return "", false
}

// heldClusters are the clusters of a workspace the rollout holds, sorted.
func (v *Verdict) heldClusters(workspace string) []string {
	var waiting []string
	for _, c := range v.control.Clusters {
		if _, held := v.Status.Held[c.Metadata.Name]; held && c.Spec.Workspace == workspace {
			waiting = append(waiting, c.Metadata.Name)
		}
	}
	sort.Strings(waiting)
	return waiting
}
