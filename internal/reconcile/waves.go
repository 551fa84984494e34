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
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// ErrHeld marks a repo whose change waits for its rollout wave (platform spec.rollout.waves):
// the repo is reported deferred, nothing is written to its pull request, and a later run
// (a webhook, the Action's schedule) opens it once the gate admits it.
var ErrHeld = errors.New("held by the rollout")

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
func revisionPlan(repo *control.Repo, clusters []*item, recorded [][]string) control.RolloutPlan {
	own := map[string]bool{}
	for _, c := range repo.Platform.Spec.Components {
		if c.Rollout != nil {
			own[c.App] = true
		}
	}
	touched := map[string]bool{}
	fleet := false
	for _, it := range clusters {
		if it.decision == nil {
			fleet = true
			for app := range own {
				touched[app] = true
			}
			continue
		}
		for _, f := range it.decision.Files {
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

// gateRollout evaluates the rollout of the run's revision over every cluster repo and holds
// the items the gate does not admit: a cluster repo whose change would open a pull request
// while its wave has not started, and a workspace repo while any cluster of the workspace is
// held (a workspace repo serves all its clusters at once, so its change goes with the last
// wave of its clusters). An open pull request is always updated in place. Without declared
// waves it does nothing.
func gateRollout(ctx context.Context, f Forge, repo *control.Repo, items []*item, opts Options) (*rollout.Status, error) {
	if !hasWaves(repo) {
		return nil, nil
	}
	fl := repo.Fleet()
	rd := f.Capabilities().Rollout
	var clusters []*item
	for _, it := range items {
		if it.target.Kind == fanout.KindCluster && !it.target.Removed && !it.accessOnly {
			clusters = append(clusters, it)
		}
	}
	if rd == nil {
		return nil, fmt.Errorf("platform spec.rollout.waves: this forge cannot read pull request merges and commit statuses " +
			"(it declares no rollout reader), which a rollout in waves is gated on; use the github or local forge, or remove spec.rollout")
	}
	names := make([]string, len(clusters))
	for i, it := range clusters {
		names[i] = it.target.Repo
	}
	prs, err := rd.RolloutPRs(ctx, fl.Owner, names, fl.DefaultBranch, fl.PRBranch)
	if err != nil {
		return nil, fmt.Errorf("reading the rollout state of %d cluster repos: %w", len(names), err)
	}
	obs := map[string]rollout.Observed{}
	var recorded [][]string
	for _, it := range clusters {
		var o rollout.Observed
		if it.decision != nil {
			o.Changed = it.decision.Action != pr.ActionNoop && it.decision.Action != pr.ActionClose
		} else {
			// Not planned (outside a run limited to some repos, or failed): taken for
			// changed, so its wave is not done. Such a run may hold what a full run
			// admits, never the reverse; the next full run decides.
			o.Changed = true
		}
		p, ok := prs[it.target.Repo]
		// A merged pull request belongs to this rollout when it carried this revision, or
		// exactly the tree this revision renders (a later control-repo commit that leaves
		// the cluster alone must not let it skip its health check and soak).
		current := ok && (p.Source == opts.Source || (p.State == pr.StateMerged && it.decision != nil &&
			it.decision.Action == pr.ActionNoop && p.Tree != "" && p.Tree == it.decision.Tree))
		if ok && (p.State == pr.StateOpen || current) {
			rp := &rollout.PR{Number: p.Number, Revision: p.Source, Open: p.State == pr.StateOpen}
			if current {
				rp.Revision = opts.Source
			}
			if rp.Open && it.decision != nil && it.decision.Action != pr.ActionClose {
				// An open pull request that already carries the desired tree plans as a
				// no-op, yet the repo still differs from its default branch.
				o.Changed = true
			}
			if p.State == pr.StateMerged {
				if p.Source == opts.Source {
					recorded = append(recorded, p.Waves)
				}
				rp.Merged, rp.MergedAt = true, p.MergedAt
				rp.Health, rp.HealthAt = health(p.Statuses)
				if rp.Health == rollout.HealthUnknown && p.Head != "" {
					// The default branch moved on before Flux reported (a cluster admin's
					// commit): Flux applies, and reports on, the newer head, which holds
					// the merge (a protected default branch is never rewritten).
					rp.Health, rp.HealthAt = health(p.HeadStatuses)
				}
				// The revision's change reached the default branch through this pull
				// request: the cluster is part of the rollout even though it matches now.
				o.Changed = true
			}
			o.PR = rp
		}
		obs[it.target.Name] = o
	}
	plan := revisionPlan(repo, clusters, recorded)
	ro := rollout.Options{HealthTimeout: repo.HealthTimeout(), Paused: repo.Paused != nil}
	if repo.Paused != nil {
		ro.PauseNote = repo.Paused.Reason
	}
	st := rollout.Evaluate(opts.Source, rolloutWaves(plan), obs, opts.Now(), ro)
	st.Lists = plan.Lists
	// A pull request opened now merges automatically when its wave says so; paused, fleetbot
	// merges nothing (and enables no auto-merge).
	byName := make(map[string]*item, len(clusters))
	for _, it := range clusters {
		byName[it.target.Name] = it
	}
	for _, w := range plan.Waves {
		auto := w.AutoMerge && repo.Paused == nil
		for _, c := range w.Clusters {
			if it, ok := byName[c]; ok {
				it.autoMerge, it.waves = &auto, plan.Lists
			}
		}
	}
	hold := func(it *item, why string) {
		if it.decision == nil || !it.decision.Writes() || it.res.Err != nil {
			return
		}
		it.held = fmt.Errorf("%s: %w: %s", it.target.FullName(), ErrHeld, why)
		it.res.Err, it.res.Deferred = it.held, true
	}
	for _, it := range clusters {
		if why, ok := st.Held[it.target.Name]; ok && opensPR(it.decision) {
			hold(it, why)
		}
	}
	for _, it := range items {
		if it.target.Kind != fanout.KindWorkspace || it.target.Removed {
			continue
		}
		var waiting []string
		for _, c := range repo.Clusters {
			if c.Spec.Workspace != it.target.Name {
				continue
			}
			if _, held := st.Held[c.Metadata.Name]; held {
				waiting = append(waiting, c.Metadata.Name)
			}
		}
		if len(waiting) > 0 && opensPR(it.decision) {
			sort.Strings(waiting)
			hold(it, fmt.Sprintf("the workspace's change goes with the last wave of its clusters; waiting for %s", strings.Join(waiting, ", ")))
		}
	}
	return &st, nil
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
