package reconcile

import (
	"context"
	"errors"
	"fmt"
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

// hasWaves reports whether the control repo declares a rollout in waves.
func hasWaves(repo *control.Repo) bool {
	return repo != nil && repo.Platform != nil && len(repo.Platform.Spec.Rollout.Waves) > 0
}

// rolloutWaves resolves the control repo's waves for rollout.Evaluate.
func rolloutWaves(repo *control.Repo) []rollout.Wave {
	declared := repo.Platform.Spec.Rollout.Waves
	var out []rollout.Wave
	for _, g := range repo.Waves() {
		w := rollout.Wave{Name: g.Name, Clusters: g.Clusters}
		if g.Index >= 0 {
			w.MaxParallel, w.Soak = declared[g.Index].MaxParallel, declared[g.Index].SoakDuration()
		}
		out = append(out, w)
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
	st := rollout.Evaluate(opts.Source, rolloutWaves(repo), obs, opts.Now(), rollout.Options{})
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
