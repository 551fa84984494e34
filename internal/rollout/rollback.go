package rollout

import (
	"sort"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// noteOf is ": note", or "" without one.
func noteOf(note string) string {
	if note == "" {
		return ""
	}
	return ": " + note
}

// Merge is one merge of fleetbot's pull request into a target repo's default branch.
type Merge struct {
	// Revision is the control-repo revision the pull request carried.
	Revision string
	// Tree is the git tree the merge left on the default branch (the content to restore).
	Tree string
	// Commit is the merge commit.
	Commit   string
	MergedAt time.Time
	// Health is Flux's verdict on the merge (HealthSuccess: it was healthy there).
	Health Health
	// Rollback: the pull request was a rollback of a failed revision, RollbackOf.
	Rollback   bool
	RollbackOf string
	// PR is the pull request's number.
	PR int
}

// History is what fleetbot merged in one target repo (a cluster or workspace repo), oldest
// first.
type History struct {
	Repo   string
	Merges []Merge
}

// Restore is one pull request of a rollback: it puts back on Repo the content of To, the last
// merge that was healthy there, replacing From, the failed revision's merge.
type Restore struct {
	Repo     string
	From, To Merge
}

// RollbackPlan is what rolling back a failed revision does.
type RollbackPlan struct {
	// Failed marks the revision so it is not rolled out again (see Failure.Repeats).
	Failed Failure
	// Restores are the pull requests to open, by repo.
	Restores []Restore
	// Stuck are the repos the failed revision reached that have nothing to restore, with why
	// (a human decides: fix forward, or revert the control repo).
	Stuck map[string]string
}

// Failure is a revision that went over its budget and was rolled back: the trees it merged,
// by repo, where it reached.
type Failure struct {
	Revision string
	Trees    map[string]string
	// Recorded: the failure is the control repo's rollback record (rollout/rollback.yaml,
	// `fleetbot rollout rollback`), bound to the content it names rather than to trees; Note
	// says why.
	Recorded bool
	Note     string
}

// Repeats reports whether a revision that renders desired (tree by repo) would roll the
// failure out again: it renders, in every repo the failed revision reached, the very tree that
// failed there. A control-repo commit that changes what any of those repos gets is a new
// rollout; one that changes nothing there (a pause, an approval, a change elsewhere) is not.
func (f *Failure) Repeats(desired map[string]string) bool {
	if f == nil || len(f.Trees) == 0 {
		return false
	}
	for repo, tree := range f.Trees {
		if desired[repo] != tree {
			return false
		}
	}
	return true
}

// PlanRollback plans the rollback of the revision failed over the target repos' histories.
//
// A repo takes part when its newest merge is of the failed revision (a repo that moved on to a
// newer revision, or never merged the failed one, is left alone; one whose newest merge is
// already a rollback is done). Its restore target is its newest earlier merge that Flux
// reported healthy there and whose tree differs from the failed one: the last revision that
// was healthy in that repo, which may be a different one in each. A repo with no such merge
// (the failed revision was its first, or nothing before was reported healthy) is Stuck.
//
// It is a pure function of the histories: planned again after some restores merged, it plans
// the rest, so a restarted service continues where it was.
func PlanRollback(failed string, histories []History) RollbackPlan {
	plan := RollbackPlan{Failed: Failure{Revision: failed, Trees: map[string]string{}}, Stuck: map[string]string{}}
	for _, h := range histories {
		if len(h.Merges) == 0 {
			continue
		}
		newest := h.Merges[len(h.Merges)-1]
		// A failed merge whose rollback merged is still the failure's: its tree stays marked.
		if newest.Rollback {
			if m, ok := lastOf(h.Merges, failed); ok {
				plan.Failed.Trees[h.Repo] = m.Tree
			}
			continue
		}
		if newest.Revision != failed {
			continue
		}
		plan.Failed.Trees[h.Repo] = newest.Tree
		if to, ok := restoreTarget(h.Merges[:len(h.Merges)-1], newest.Tree); ok {
			plan.Restores = append(plan.Restores, Restore{Repo: h.Repo, From: newest, To: to})
		} else {
			plan.Stuck[h.Repo] = "no earlier merge was reported healthy here: nothing to restore (fix forward, or revert the control repo)"
		}
	}
	sort.Slice(plan.Restores, func(a, b int) bool { return plan.Restores[a].Repo < plan.Restores[b].Repo })
	return plan
}

// restoreTarget is the newest of merges that was healthy and left another tree than failed.
func restoreTarget(merges []Merge, failed string) (Merge, bool) {
	for i := len(merges) - 1; i >= 0; i-- {
		if m := merges[i]; m.Health == HealthSuccess && m.Tree != failed {
			return m, true
		}
	}
	return Merge{}, false
}

// lastOf is the newest merge of revision in merges.
func lastOf(merges []Merge, revision string) (Merge, bool) {
	for i := len(merges) - 1; i >= 0; i-- {
		if merges[i].Revision == revision && !merges[i].Rollback {
			return merges[i], true
		}
	}
	return Merge{}, false
}

// repeatsFailure holds every wave when the revision repeats a rolled-back failure
// (Options.Failed): no new pull request opens anywhere, open ones are still updated.
func (e *evaluation) repeatsFailure() {
	f := e.opts.Failed
	if f == nil {
		return
	}
	e.Halted = &Halt{RolledBack: true, Failed: f.Revision,
		Reason: "revision " + f.Revision + " failed and was rolled back; this revision renders the same where it failed: a control-repo commit that changes it starts a new rollout"}
	if f.Recorded {
		e.Halted.Reason = "rolled back by hand (" + control.RollbackFile + ")" + noteOf(f.Note) +
			": no new pull request opens for this content; a control-repo commit that changes what it renders starts a new rollout"
		if f.Revision != "" {
			e.Halted.Reason = "revision " + f.Revision + " " + e.Halted.Reason
		}
	}
	e.blocked = "rollout halted: " + e.Halted.Reason
}

// RollbackStatus is what a rollback did, for the check run, the report and the status page:
// the revision rolled back, why, and each repo's restore.
type RollbackStatus struct {
	Revision string
	Reason   string
	Restores []RestoreStatus
	// Stuck are the repos the revision reached with nothing to restore, with why.
	Stuck map[string]string
}

// RestoreStatus is one repo's restore: its pull request and where it stands.
type RestoreStatus struct {
	Repo string
	// To is the revision whose content is restored.
	To     string
	PR     int
	PRURL  string
	State  string
	Reason string
}

// Where a restore stands (RestoreStatus.State).
const (
	RestoreOpen    = "open"     // its pull request is open, waiting to merge
	RestoreMerged  = "merged"   // merged; Flux has not reported on it yet
	RestoreHealthy = "healthy"  // merged and reported healthy
	RestoreFailed  = "failed"   // merged and reported failed: a human decides
	RestoreError   = "error"    // could not be opened (Reason says why)
	RestoreDone    = "restored" // the default branch already holds the restored tree
	// RestoreClosed: a human closed the rollback pull request without merging it; fleetbot
	// neither reopens nor recreates it (Reason says what to do).
	RestoreClosed = "closed"
)

// Restored reports whether every restore merged and was reported healthy (or needed none).
func (r *RollbackStatus) Restored() bool {
	if r == nil {
		return false
	}
	for _, s := range r.Restores {
		if s.State != RestoreHealthy && s.State != RestoreDone {
			return false
		}
	}
	return len(r.Stuck) == 0
}

// PlanRollbackWhere plans a rollback like PlanRollback, taking part every repo whose newest
// merge failed says failed (a rollback by hand: the merge of the content the control repo
// renders now, whatever revision carried it). The plan's revision is revision.
func PlanRollbackWhere(revision string, failed func(repo string, m Merge) bool, histories []History) RollbackPlan {
	marked := make([]History, 0, len(histories))
	for _, h := range histories {
		if len(h.Merges) == 0 {
			continue
		}
		c := History{Repo: h.Repo, Merges: append([]Merge(nil), h.Merges...)}
		for i := range c.Merges {
			if !c.Merges[i].Rollback && failed(h.Repo, c.Merges[i]) {
				c.Merges[i].Revision = revision
			}
		}
		marked = append(marked, c)
	}
	return PlanRollback(revision, marked)
}
