package reconcile

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// rollBack is the rollback phase of an Apply, after execute: when the gate halted the rollout
// over a wave's budget with onFailure: rollback (rollout.Halt.Rollback), or the run repeats a
// rolled-back failure (Halt.RolledBack: a rollback by hand, rollout/rollback.yaml, or an
// automatic one whose restores may not all have merged), it reads what fleetbot merged in every
// cluster and workspace repo of the run (pr.Restorer.MergeHistory), plans the restores
// (rollout.PlanRollback: a pure function of those histories, so a later run continues where
// this one stopped) and opens each repo's rollback pull request (pr.Restore). What it did is
// the verdict's Status.Rollback: the check run, the report and the status page say it.
//
// Nothing is remembered: the rollback is recorded in the repos themselves (the rollback pull
// requests' markers), which the gate and pr.Decide read on every later run.
func rollBack(ctx context.Context, f Forge, in runInput, pl *planned) {
	st := pl.verdict.Status
	if st == nil || st.Halted == nil || !(st.Halted.Rollback || st.Halted.RolledBack) {
		return
	}
	rb := &rollout.RollbackStatus{Revision: in.opts.Source, Reason: st.Halted.Reason}
	st.Rollback = rb
	switch {
	case st.Halted.Cluster != "":
		rb.Reason = st.Halted.Cluster + ": " + st.Halted.Reason
		if st.Halted.FailedBy != "" {
			rb.Reason += " (failing there: " + st.Halted.FailedBy + ")"
		}
	case st.Halted.RolledBack && in.repo.RolledBack() == nil:
		// A later run of a revision rolled back automatically: why is in the rollback pull
		// requests the run that halted opened.
		rb.Reason = "it went over a wave's failure budget (the rollback pull requests say where)"
	}
	rs := f.Capabilities().Restorer
	if rs == nil {
		rb.Stuck = map[string]string{"*": "this forge cannot commit an earlier tree (it declares no Restorer): revert the change in the control repo"}
		return
	}
	targets := restoreTargets(in)
	names := make([]string, 0, len(targets))
	for name := range targets {
		names = append(names, name)
	}
	fl := in.repo.Fleet()
	hist, err := rs.MergeHistory(ctx, fl.Owner, names, fl.DefaultBranch, fl.PRBranch)
	if err != nil {
		rb.Stuck = map[string]string{"*": "reading the merge histories: " + err.Error() + " (the next run tries again)"}
		return
	}
	histories := historiesOf(hist)
	plan := rollbackPlan(in, pl, st.Halted, histories)
	rb.Revision, rb.Stuck = plan.Failed.Revision, plan.Stuck
	rb.Restores = append(rb.Restores, restoredAlready(plan.Failed.Revision, histories)...)
	rb.Restores = append(rb.Restores, openRestores(ctx, f, in, st, targets, plan)...)
	sort.Slice(rb.Restores, func(a, b int) bool { return rb.Restores[a].Repo < rb.Restores[b].Repo })
}

// rollbackPlan plans the rollback the halt calls for: of the run's revision when it just went
// over its budget; of the failed revision a rolled-back failure names; by hand
// (rollout/rollback.yaml), of every repo whose newest merge left the tree the control repo
// renders there now, whichever revision carried it.
func rollbackPlan(in runInput, pl *planned, h *rollout.Halt, histories []rollout.History) rollout.RollbackPlan {
	switch {
	case h.Rollback:
		return rollout.PlanRollback(in.opts.Source, histories)
	case in.repo.RolledBack() != nil:
		desired := map[string]string{}
		for _, p := range pl.repos {
			if p.content != nil {
				desired[p.target().Repo] = p.content.Tree
			}
		}
		revision := h.Failed
		if revision == "" {
			revision = in.opts.Source
		}
		return rollout.PlanRollbackWhere(revision, func(repo string, m rollout.Merge) bool {
			return desired[repo] != "" && m.Tree == desired[repo]
		}, histories)
	}
	return rollout.PlanRollback(h.Failed, histories)
}

// restoreTargets are the run's cluster and workspace repos, by repo name: what a rollback may
// restore.
func restoreTargets(in runInput) map[string]*fanout.Target {
	out := map[string]*fanout.Target{}
	for _, t := range in.targets {
		if t.Removed || (t.Kind != fanout.KindCluster && t.Kind != fanout.KindWorkspace) {
			continue
		}
		if in.opts.Only != nil && !slices.Contains(in.opts.Only, t.Repo) {
			continue
		}
		out[t.Repo] = t
	}
	return out
}

// historiesOf turns the forge's merge histories into the rollout slice's.
func historiesOf(hist map[string][]pr.MergedPR) []rollout.History {
	out := make([]rollout.History, 0, len(hist))
	for repo, merges := range hist {
		h := rollout.History{Repo: repo}
		for _, m := range merges {
			health, _ := rollout.HealthOf(m.Statuses)
			h.Merges = append(h.Merges, rollout.Merge{Revision: m.Source, Tree: m.MergeTree, Commit: m.MergeCommit, MergedAt: m.MergedAt,
				Health: health, Rollback: m.RollbackOf != "", RollbackOf: m.RollbackOf, PR: m.Number})
		}
		out = append(out, h)
	}
	return out
}

// restoredAlready are the repos whose newest merge is the rollback of revision: merged, and
// healthy or failed as Flux reported it.
func restoredAlready(revision string, histories []rollout.History) []rollout.RestoreStatus {
	var out []rollout.RestoreStatus
	for _, h := range histories {
		if len(h.Merges) == 0 {
			continue
		}
		m := h.Merges[len(h.Merges)-1]
		if !m.Rollback || m.RollbackOf != revision {
			continue
		}
		s := rollout.RestoreStatus{Repo: h.Repo, To: m.Revision, PR: m.PR, State: rollout.RestoreMerged}
		switch m.Health {
		case rollout.HealthSuccess:
			s.State = rollout.RestoreHealthy
		case rollout.HealthFailure:
			s.State, s.Reason = rollout.RestoreFailed, "Flux reports the restored content failing too: a human decides"
		}
		out = append(out, s)
	}
	return out
}

// openRestores opens the planned restores, at most Concurrency at a time: each repo's rollback
// pull request, merged as the repo's pull requests merge (a cluster's wave, the fleet's merge
// policy for a workspace) while the change windows are open.
func openRestores(ctx context.Context, f Forge, in runInput, st *rollout.Status, targets map[string]*fanout.Target, plan rollout.RollbackPlan) []rollout.RestoreStatus {
	out := make([]rollout.RestoreStatus, len(plan.Restores))
	opts := prOptions(in.repo, in.opts)
	var mu sync.Mutex
	each(context.WithoutCancel(ctx), len(plan.Restores), in.opts.Concurrency, func(i int) {
		r := plan.Restores[i]
		s := rollout.RestoreStatus{Repo: r.Repo, To: r.To.Revision}
		t := targets[r.Repo]
		auto := opts.AutoMerge
		if t.Kind == fanout.KindCluster && in.rollouts.Enabled() {
			auto = in.repo.ClusterAutoMerge(t.Name)
		}
		// The gate's one rule of merges (pause, change windows) decides the auto-merge; the
		// restore opens either way.
		autoMerge, held := st.RestoreMerge(auto)
		var res pr.Restored
		var err error
		if perr := recovered(func() {
			res, err = pr.Restore(ctx, f, pr.RestoreRequest{Target: t, Branch: opts.Branch, Labels: opts.Labels,
				Failed: plan.Failed.Revision, FailedTree: r.From.Tree, To: r.To.Revision, Tree: r.To.Tree,
				Why: st.Rollback.Reason, AutoMerge: autoMerge, Held: held != ""})
		}); perr != nil {
			err = perr
		}
		s.PR, s.PRURL = res.Number, res.URL
		switch {
		case errors.Is(err, pr.ErrRestoreClosed):
			s.State, s.Reason = rollout.RestoreClosed, err.Error()
		case err != nil:
			s.State, s.Reason = rollout.RestoreError, err.Error()
		case res.Done == "already restored":
			s.State = rollout.RestoreDone
		case res.Done == "merged":
			s.State = rollout.RestoreMerged
		case res.Done == "opened" || res.Done == "already open":
			s.State, s.Reason = rollout.RestoreOpen, held
		default:
			s.State = rollout.RestoreOpen
		}
		in.opts.Logger.Info("rollback", "repo", t.FullName(), "to", r.To.Revision, "state", s.State, "pr", s.PR)
		mu.Lock()
		out[i] = s
		mu.Unlock()
	})
	return out
}
