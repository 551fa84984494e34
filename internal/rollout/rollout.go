// Package rollout decides how far a control-repo revision may go through the fleet: in
// waves, each gated on the previous wave merged, reported healthy by Flux and soaked.
//
// It is pure: Evaluate reads what was observed on the forge (pull requests, their merge
// commits' statuses) and the time, and returns which clusters may have a pull request now
// and why the others wait. Nothing is remembered between calls, so a restarted service or a
// scheduled Action run continues where the last one was, from the same observations.
//
// The package owns rollouts end to end, as one slice, behind one entry: Rollouts, built once
// from the control model and a clock (New). The other floors only call it:
//
//   - plan and gate: Rollouts.Plan plans a revision's waves from the control model (the
//     components with their own waves its changes touch, spec.rollout.waves for the rest);
//     Rollouts.Gate plans the revision's and evaluates them (Evaluate) on what the forge shows
//     (the clusters' decisions and newest pull requests) at the clock's time; Verdict.Holds
//     says which target repos wait, Verdict.Merge how each cluster's pull request merges
//     (reconcile's gate phase reads the forge and calls it);
//   - the next wake-up: Rollouts.NextWake (a held repo's retry time; serve's rollout watch
//     schedules a full apply then);
//   - the words: Rollouts.CheckRun (the control commit's rollout check run), Status.Report
//     (the report's rollout section, `fleetbot rollout status`);
//   - the picture: Rollouts.View, Rollouts.Windows and Bar (the status page's bar per wave;
//     internal/status draws it).
package rollout

import (
	"fmt"
	"sort"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/window"
)

// DefaultHealthTimeout is how long a merged change may wait for Flux's healthy status
// before the rollout halts.
const DefaultHealthTimeout = 30 * time.Minute

// Wave is one step of a rollout, its clusters resolved.
type Wave struct {
	Name string
	// Clusters are the names of the wave's clusters.
	Clusters []string
	// MaxParallel caps the wave's open pull requests (0: no cap).
	MaxParallel int
	// Soak is how long the wave must stay healthy before the next wave starts.
	Soak time.Duration
	// Budget is how many of its clusters may fail or stay silent while the rollout goes on
	// (zero: none).
	Budget Budget
	// Rollback: when the wave goes over its budget the rollout rolls back (Halt.Rollback),
	// not only halts.
	Rollback bool
	// Approvals name the approvals the wave waits for before its first pull request opens
	// (approval: required); none: it starts as soon as the waves before it are done.
	Approvals []string
}

// Health is Flux's verdict on the commit a cluster applied, from its commit status.
type Health int

const (
	// HealthUnknown: no status yet (Flux has not applied the commit, or reports nothing).
	HealthUnknown Health = iota
	// HealthPending: Flux reports progress.
	HealthPending
	// HealthSuccess: every Kustomization reported healthy for the commit.
	HealthSuccess
	// HealthFailure: a Kustomization failed for the commit.
	HealthFailure
)

func (h Health) String() string {
	return [...]string{"unknown", "pending", "success", "failure"}[h]
}

// Observed is what the forge shows for one cluster's repo.
type Observed struct {
	// Changed: the repo's default branch differs from what the revision renders for it.
	// A cluster that is not changed is done for this revision without a pull request.
	Changed bool
	// PR is fleetbot's pull request of the repo, if one exists.
	PR *PR
}

// PR is fleetbot's pull request in one cluster repo.
type PR struct {
	Number int
	// Repo names the repo of a workspace's pull request weighed for the cluster (see
	// Workspace); "" for the cluster's own repo.
	Repo string
	// Revision is the control-repo revision the pull request carries (its body's marker).
	Revision string
	// Open is true until it is merged or closed.
	Open bool
	// Merged and MergedAt: merged into the default branch, and when.
	Merged   bool
	MergedAt time.Time
	// Health of the merge commit, and when that verdict was posted.
	Health   Health
	HealthAt time.Time
	// FailedBy names the Flux objects that failed, and what each applies (FailedObjects).
	FailedBy string
}

// ref names the pull request: #N in the cluster's repo, repo#N in a workspace's.
func (p *PR) ref() string {
	return fmt.Sprintf("%s#%d", p.Repo, p.Number)
}

// Options tune Evaluate.
type Options struct {
	// HealthTimeout bounds the wait for a healthy status after a merge (0: the default).
	HealthTimeout time.Duration
	// Paused stops every new pull request; open ones are still updated. PauseNote says why
	// (the held clusters' reason carries it).
	Paused    bool
	PauseNote string
	// Schedule is the change windows: outside them no new pull request opens (open ones are
	// still updated) and Status.MergesAllowed is false. Nil: always open.
	Schedule window.Schedule
	// Approved are the approvals recorded for the revision's content (see Wave.Approvals).
	Approved map[string]bool
	// Skipped are the clusters the revision's rollout leaves out: no new pull request, no
	// wait for their health, not counted against a budget (an open pull request is still
	// updated).
	Skipped map[string]bool
	// Failed, when set, is the failure the revision repeats (Failure.Repeats): it was rolled
	// back, so no new pull request opens for it anywhere until a control-repo commit changes
	// what it renders where it failed.
	Failed *Failure
}

// WaveState is where one wave stands.
type WaveState string

const (
	WaveDone    WaveState = "done"    // merged, healthy and soaked (or nothing to change)
	WaveSoaking WaveState = "soaking" // merged and healthy, waiting for the soak to pass
	WaveActive  WaveState = "active"  // pull requests may be open
	WaveWaiting WaveState = "waiting" // an earlier wave is not done yet
	WaveHalted  WaveState = "halted"  // over its failure budget; nothing new starts
	WavePaused  WaveState = "paused"  // the rollout is paused before this wave's next pull request
	// WaveAwaitingApproval: the waves before it are done; it waits for its approval.
	WaveAwaitingApproval WaveState = "awaiting-approval"
	// WaveClosed: outside the change windows before this wave's next pull request.
	WaveClosed WaveState = "closed"
)

// WaveStatus is the progress of one wave.
type WaveStatus struct {
	Name  string
	State WaveState
	// Total clusters, Changed by the revision, and of those Merged and Healthy.
	Total, Changed, Merged, Healthy int
	// SoakUntil is when the wave's soak ends (WaveSoaking).
	SoakUntil time.Time
	// Failed are the clusters Flux reported failed for the revision, Unreported those with no
	// healthy verdict within the health timeout: both count against the budget
	// (MaxUnavailable of them, MaxFailures of the failed, for the clusters taking part).
	// Skipped are the changed clusters the rollout leaves out. Each is in cluster order.
	Failed, Unreported, Skipped []string
	MaxUnavailable, MaxFailures int
	// Awaiting are the approvals the wave waits for (WaveAwaitingApproval).
	Awaiting []string
}

// Halt says why a rollout stopped.
type Halt struct {
	Wave    string
	Cluster string
	Reason  string
	// Rollback: the wave rolls back on failure; the caller plans it (PlanRollback).
	Rollback bool
	// RolledBack: the revision repeats a failure that was rolled back (Options.Failed), the
	// revision Failed ("" for a rollback by hand of a working tree's content).
	RolledBack bool
	Failed     string
	// FailedBy names what failed on Cluster: the Flux objects whose failure Flux reported on
	// its merge, with the component or workspace each applies (FailedObjects); "" when the
	// statuses name none (or the cluster did not report).
	FailedBy string
}

// Status is the outcome of Evaluate.
type Status struct {
	Revision string
	// Lists names the lists of waves the revision's waves come from (spec.rollout.waves,
	// a component's own), set by the caller that resolved them.
	Lists []string
	Waves []WaveStatus
	// Admitted are the changed clusters that may have a pull request for the revision now
	// (new ones to open, and open ones to update in place), sorted.
	Admitted []string
	// Held are the changed clusters that must not get a new pull request yet, with why.
	Held map[string]string
	// Halted is set when a failure or timeout stopped the rollout.
	Halted *Halt
	// Paused: the rollout is paused (Options.Paused); PauseNote says why.
	Paused    bool
	PauseNote string
	// Done: every wave is done.
	Done bool
	// NextCheck is the earliest time the verdict can change by time alone (a soak ending, a
	// health timeout, a change window opening or closing), zero when only a new observation
	// can change it.
	NextCheck time.Time
	// Window is where the change windows stand at the time of the verdict; nil without
	// windows.
	Window *WindowStatus
	// Rollback is what rolling the revision back did, when the caller rolled it back
	// (Halt.Rollback, Halt.RolledBack); nil otherwise.
	Rollback *RollbackStatus
}

// Evaluate decides, for revision, which clusters may have a pull request at now.
//
// A wave is done when each of its changed clusters (skipped ones left out) has merged the
// revision and Flux reported it healthy, or counts against the wave's failure budget (failed,
// or no healthy verdict within the health timeout), and the wave's soak has passed since the
// last of those verdicts. Waves start in order; a wave that requires approval starts once it
// is approved. A wave over its budget halts the rollout (Halt.Rollback says whether it rolls
// back): no new pull request opens anywhere. An open pull request of another revision is
// updated in place wherever it is (that is how a new revision supersedes a halted one); a new
// pull request opens only in a started wave, at most MaxParallel are open in it, and none
// while the rollout is paused or outside the change windows.
func Evaluate(revision string, waves []Wave, observed map[string]Observed, now time.Time, opts Options) Status {
	if opts.HealthTimeout <= 0 {
		opts.HealthTimeout = DefaultHealthTimeout
	}
	e := &evaluation{
		Status:   Status{Revision: revision, Held: map[string]string{}, Paused: opts.Paused, PauseNote: opts.PauseNote},
		observed: observed, now: now, opts: opts, admitted: map[string]bool{},
	}
	e.Window = windowStatus(opts.Schedule, now)
	e.repeatsFailure()
	for _, w := range waves {
		t := e.tally(w)
		e.Waves = append(e.Waves, e.settle(w, t))
	}
	e.haltEverywhere()
	for c := range e.admitted {
		e.Admitted = append(e.Admitted, c)
	}
	sort.Strings(e.Admitted)
	e.windowCheck()
	e.Done = e.Halted == nil && e.blocked == ""
	if e.Halted != nil || e.Done {
		e.NextCheck = time.Time{}
	}
	return e.Status
}

// evaluation is one Evaluate in progress: the status so far, the clusters admitted so far, and
// why the waves after the current one wait ("" while they may start).
type evaluation struct {
	Status
	observed map[string]Observed
	now      time.Time
	opts     Options
	admitted map[string]bool
	blocked  string
}

// waveTally is what one wave's clusters show before the wave's state is decided: its counts,
// the newest healthy verdict (when its soak starts), its open pull requests, and the changed
// clusters that have none yet (candidates for a new one).
type waveTally struct {
	status      WaveStatus
	lastHealthy time.Time
	open        int
	candidates  []string
	// counted are the clusters counting against the budget, in cluster order.
	counted []counted
}

// tally counts a wave's changed clusters by where their pull request stands. An open pull
// request, of this revision or an older one, is admitted at once: it is updated in place. A
// merge of this revision counts toward the wave's health; a failure, or no healthy verdict
// within the health timeout, halts the rollout.
func (e *evaluation) tally(w Wave) waveTally {
	t := waveTally{status: WaveStatus{Name: w.Name, Total: len(w.Clusters)}}
	for _, c := range w.Clusters {
		o := e.observed[c]
		if !o.Changed {
			continue
		}
		if e.opts.Skipped[c] {
			t.status.Skipped = append(t.status.Skipped, c)
			if o.PR != nil && o.PR.Open {
				e.admitted[c] = true // updated in place, never a new one
			}
			continue
		}
		t.status.Changed++
		pr := o.PR
		switch {
		case pr != nil && pr.Revision == e.Revision && pr.Merged:
			t.status.Merged++
			e.weighMerge(c, pr, &t)
		case pr != nil && pr.Open:
			t.open++
			e.admitted[c] = true
		default:
			t.candidates = append(t.candidates, c)
		}
	}
	e.weighBudget(w, &t)
	return t
}

// weighMerge counts a cluster that merged the revision: healthy (its verdict dates the wave's
// soak), failed, or still waiting for Flux, which counts as not reported once the health
// timeout passes (until then the timeout is when the verdict can change by time alone).
// Failed and not reported clusters count against the wave's budget (weighBudget).
func (e *evaluation) weighMerge(c string, pr *PR, t *waveTally) {
	switch pr.Health {
	case HealthSuccess:
		t.status.Healthy++
		if pr.HealthAt.After(t.lastHealthy) {
			t.lastHealthy = pr.HealthAt
		}
	case HealthFailure:
		t.counted = append(t.counted, counted{cluster: c, failed: true, at: pr.HealthAt, failedBy: pr.FailedBy,
			reason: fmt.Sprintf("Flux reported a failure for the merge of %s", pr.ref())})
	default:
		deadline := pr.MergedAt.Add(e.opts.HealthTimeout)
		if !e.now.Before(deadline) {
			t.counted = append(t.counted, counted{cluster: c, at: deadline,
				reason: fmt.Sprintf("no healthy status from Flux within %s of the merge of %s (last: %s)", e.opts.HealthTimeout, pr.ref(), pr.Health)})
		} else {
			e.NextCheck = earliest(e.NextCheck, deadline)
		}
	}
}

// halt records the first wave of the rollout to go over its budget; later ones change nothing.
func (e *evaluation) halt(w Wave, c, reason string) {
	if e.Halted == nil {
		e.Halted = &Halt{Wave: w.Name, Cluster: c, Reason: reason, Rollback: w.Rollback}
	}
}

// settle decides a tallied wave's state, which of its candidates may open a pull request now
// and why the others wait, and what holds the waves after it: an earlier wave not done, this
// wave halted or paused, still active, or soaking.
func (e *evaluation) settle(w Wave, t waveTally) WaveStatus {
	ws := t.status
	hold := func(why string) {
		for _, c := range t.candidates {
			e.Held[c] = why
		}
	}
	switch {
	case e.blocked != "":
		ws.State = WaveWaiting
		hold(e.blocked)
	case e.Halted != nil && e.Halted.Wave == w.Name:
		ws.State = WaveHalted
		hold("rollout halted: " + e.Halted.Cluster + ": " + e.Halted.Reason)
		e.blocked = fmt.Sprintf("wave %s halted", w.Name)
	case e.opts.Paused && len(t.candidates) > 0:
		ws.State = WavePaused
		hold(e.pauseReason())
		e.blocked = e.pauseReason()
	case e.Window != nil && !e.Window.Open && len(t.candidates) > 0:
		ws.State = WaveClosed
		hold(e.Window.reason())
		e.blocked = e.Window.reason()
	case len(t.candidates) > 0 && len(e.awaiting(w)) > 0:
		ws.State, ws.Awaiting = WaveAwaitingApproval, e.awaiting(w)
		hold(approvalReason(w, ws.Awaiting))
		e.blocked = approvalReason(w, ws.Awaiting)
	case len(t.candidates) > 0 || t.open > 0 || t.awaiting():
		ws.State = WaveActive
		e.admit(w, t)
		e.blocked = fmt.Sprintf("wave %s is not done (%d of %d changed clusters healthy)", w.Name, ws.Healthy, ws.Changed)
	case ws.Changed > 0 && e.now.Before(t.lastVerdict().Add(w.Soak)):
		ws.State = WaveSoaking
		ws.SoakUntil = t.lastVerdict().Add(w.Soak)
		e.NextCheck = earliest(e.NextCheck, ws.SoakUntil)
		e.blocked = fmt.Sprintf("wave %s soaks until %s", w.Name, ws.SoakUntil.UTC().Format(time.RFC3339))
	default:
		ws.State = WaveDone
	}
	return ws
}

// admit opens an active wave's candidates up to its MaxParallel open pull requests; the rest
// wait for one of those to merge.
func (e *evaluation) admit(w Wave, t waveTally) {
	open := t.open
	for _, c := range t.candidates {
		if w.MaxParallel > 0 && open >= w.MaxParallel {
			e.Held[c] = fmt.Sprintf("wave %s: %d pull requests open (maxParallel %d)", w.Name, open, w.MaxParallel)
			continue
		}
		open++
		e.admitted[c] = true
	}
}

// pauseReason is why a paused rollout holds its clusters, with the pause's note.
func (e *evaluation) pauseReason() string {
	if e.opts.PauseNote != "" {
		return "rollout paused: " + e.opts.PauseNote
	}
	return "rollout paused"
}

// haltEverywhere withdraws, once the rollout halted, every admission of a new pull request,
// in earlier waves too; open pull requests are still updated in place.
func (e *evaluation) haltEverywhere() {
	if e.Halted == nil {
		return
	}
	for c := range e.admitted {
		if pr := e.observed[c].PR; pr == nil || !pr.Open {
			delete(e.admitted, c)
			e.Held[c] = "rollout halted"
		}
	}
}

// earliest is the earlier of two times, a zero a meaning none yet.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
