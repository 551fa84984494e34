package rollout

import (
	"time"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// Rollouts is the rollout slice's one entry: the rollouts of one control-repo revision, built
// once from the control model and a clock (New). Every floor that touches rollouts calls it:
//
//   - Plan: the waves a revision takes (reconcile's gate through Gate; `fleetbot plan`'s
//     offline list of waves);
//   - Gate: the verdict on what the forge shows, at the clock's time (reconcile's gate phase);
//   - NextWake: when time alone changes a verdict (reconcile's retry time of a held repo; serve's
//     rollout watch subscribes to it);
//   - CheckRun: a verdict worded for the control commit's check run (serve);
//   - View, Windows: the status page's and `fleetbot status`'s picture (internal/status).
//
// A nil *Rollouts reads as an empty control repo (Enabled is false, Plan and Waves hold no
// cluster, View draws no bar, Windows is nil); Gate needs a control repo that declares waves
// (Enabled), as reconcile's gate phase checks first.
type Rollouts struct {
	control *control.Repo
	now     func() time.Time
}

// New returns the rollouts of the control repo repo, timed by now (nil: time.Now).
func New(repo *control.Repo, now func() time.Time) *Rollouts {
	if now == nil {
		now = time.Now
	}
	return &Rollouts{control: repo, now: now}
}

// Enabled reports whether the control repo declares a rollout in waves (the fleet's, or a
// component's own): without it there is nothing to gate.
func (r *Rollouts) Enabled() bool {
	return r != nil && r.control.HasRollout()
}

// NeedsEveryChange reports whether a platform component declares its own waves: then the gate
// needs every cluster's change (also of the clusters outside a limited run) to know which
// waves the revision takes.
func (r *Rollouts) NeedsEveryChange() bool {
	if r.platform() == nil {
		return false
	}
	for _, c := range r.platform().Spec.Components {
		if c.Rollout != nil {
			return true
		}
	}
	return false
}

// NextWake is when a service should evaluate the rollout again although nothing new was
// observed: the earliest time the verdict st changes by time alone (a soak ending, a health
// timeout, a change window opening or closing). Zero when only a new observation can change
// it: the rollout is done or halted, or waits for a merge or a health verdict. A nil status (no
// waves) never wakes.
func (r *Rollouts) NextWake(st *Status) time.Time {
	return st.nextWake()
}

// CheckRun words the verdict st for the control commit's rollout check run (and the plan
// check's rollout section).
func (r *Rollouts) CheckRun(st *Status) CheckRun {
	return st.checkRun()
}

// View is the status page's model of the fleet's rollout: the control repo's clusters assigned
// to waves as the gate does (through cache when given), with the gate's verdict st (nil: none
// evaluated).
func (r *Rollouts) View(st *Status, cache *ViewCache) View {
	return newView(r, st, cache)
}

// Windows is where the control repo's change windows stand at the clock's time (nil without
// windows): what `fleetbot status` and the status page show even when no rollout was
// evaluated.
func (r *Rollouts) Windows() *WindowStatus {
	return windowStatus(r.repo().Schedule(), r.now())
}

// repo is the control repo (nil for a nil *Rollouts).
func (r *Rollouts) repo() *control.Repo {
	if r == nil {
		return nil
	}
	return r.control
}

// platform is the control repo's platform, nil when there is none.
func (r *Rollouts) platform() *control.Platform {
	if r.repo() == nil {
		return nil
	}
	return r.control.Platform
}

// fleetWaves are spec.rollout.waves as declared.
func (r *Rollouts) fleetWaves() []control.Wave {
	if r.platform() == nil {
		return nil
	}
	return r.platform().Spec.Rollout.Waves
}

// clusters are the control repo's clusters, sorted by name.
func (r *Rollouts) clusters() []*control.Cluster {
	if r.repo() == nil {
		return nil
	}
	return r.control.Clusters
}
