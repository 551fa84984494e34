// Package rollout decides how far a control-repo revision may go through the fleet: in
// waves, each gated on the previous wave merged, reported healthy by Flux and soaked.
//
// It is pure: Evaluate reads what was observed on the forge (pull requests, their merge
// commits' statuses) and the time, and returns which clusters may have a pull request now
// and why the others wait. Nothing is remembered between calls, so a restarted service or a
// scheduled Action run continues where the last one was, from the same observations.
package rollout

import (
	"fmt"
	"sort"
	"time"
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
}

// Options tune Evaluate.
type Options struct {
	// HealthTimeout bounds the wait for a healthy status after a merge (0: the default).
	HealthTimeout time.Duration
	// Paused stops every new pull request; open ones are still updated. PauseNote says why
	// (the held clusters' reason carries it).
	Paused    bool
	PauseNote string
}

// WaveState is where one wave stands.
type WaveState string

const (
	WaveDone    WaveState = "done"    // merged, healthy and soaked (or nothing to change)
	WaveSoaking WaveState = "soaking" // merged and healthy, waiting for the soak to pass
	WaveActive  WaveState = "active"  // pull requests may be open
	WaveWaiting WaveState = "waiting" // an earlier wave is not done yet
	WaveHalted  WaveState = "halted"  // a cluster failed or timed out; nothing new starts
	WavePaused  WaveState = "paused"  // the rollout is paused before this wave's next pull request
)

// WaveStatus is the progress of one wave.
type WaveStatus struct {
	Name  string
	State WaveState
	// Total clusters, Changed by the revision, and of those Merged and Healthy.
	Total, Changed, Merged, Healthy int
	// SoakUntil is when the wave's soak ends (WaveSoaking).
	SoakUntil time.Time
}

// Halt says why a rollout stopped.
type Halt struct {
	Wave    string
	Cluster string
	Reason  string
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
	// health timeout), zero when only a new observation can change it.
	NextCheck time.Time
}

// Evaluate decides, for revision, which clusters may have a pull request at now.
//
// A wave is done when each of its changed clusters has merged the revision and Flux reported
// it healthy, and the wave's soak has passed since the last of those verdicts. Waves start
// in order. A failure, or a merge with no healthy verdict within the health timeout, halts
// the rollout: no new pull request opens anywhere. An open pull request of another revision
// is updated in place wherever it is (that is how a new revision supersedes a halted one); a
// new pull request opens only in a started wave, and at most MaxParallel are open in it.
func Evaluate(revision string, waves []Wave, observed map[string]Observed, now time.Time, opts Options) Status {
	if opts.HealthTimeout <= 0 {
		opts.HealthTimeout = DefaultHealthTimeout
	}
	st := Status{Revision: revision, Held: map[string]string{}, Paused: opts.Paused, PauseNote: opts.PauseNote}
	paused := "rollout paused"
	if opts.PauseNote != "" {
		paused += ": " + opts.PauseNote
	}
	admitted := map[string]bool{}
	blocked := "" // why waves after the current one wait
	for _, w := range waves {
		ws := WaveStatus{Name: w.Name, Total: len(w.Clusters)}
		var lastHealthy time.Time
		open := 0
		var candidates []string
		for _, c := range w.Clusters {
			o := observed[c]
			if !o.Changed {
				continue
			}
			ws.Changed++
			pr := o.PR
			current := pr != nil && pr.Revision == revision
			switch {
			case current && pr.Merged:
				ws.Merged++
				switch {
				case pr.Health == HealthSuccess:
					ws.Healthy++
					if pr.HealthAt.After(lastHealthy) {
						lastHealthy = pr.HealthAt
					}
				case pr.Health == HealthFailure:
					if st.Halted == nil {
						st.Halted = &Halt{Wave: w.Name, Cluster: c, Reason: fmt.Sprintf("Flux reported a failure for the merge of #%d", pr.Number)}
					}
				default:
					deadline := pr.MergedAt.Add(opts.HealthTimeout)
					if !now.Before(deadline) {
						if st.Halted == nil {
							st.Halted = &Halt{Wave: w.Name, Cluster: c, Reason: fmt.Sprintf(
								"no healthy status from Flux within %s of the merge of #%d (last: %s)", opts.HealthTimeout, pr.Number, pr.Health)}
						}
					} else {
						st.NextCheck = earliest(st.NextCheck, deadline)
					}
				}
			case pr != nil && pr.Open:
				// Open, of this revision or an older one: updated in place.
				open++
				admitted[c] = true
			default:
				candidates = append(candidates, c)
			}
		}
		switch {
		case blocked != "":
			ws.State = WaveWaiting
			for _, c := range candidates {
				st.Held[c] = blocked
			}
		case st.Halted != nil && st.Halted.Wave == w.Name:
			ws.State = WaveHalted
			for _, c := range candidates {
				st.Held[c] = "rollout halted: " + st.Halted.Cluster + ": " + st.Halted.Reason
			}
			blocked = fmt.Sprintf("wave %s halted", w.Name)
		case opts.Paused && len(candidates) > 0:
			ws.State = WavePaused
			for _, c := range candidates {
				st.Held[c] = paused
			}
			blocked = paused
		case len(candidates) > 0 || open > 0 || ws.Merged > ws.Healthy:
			ws.State = WaveActive
			for _, c := range candidates {
				if w.MaxParallel > 0 && open >= w.MaxParallel {
					st.Held[c] = fmt.Sprintf("wave %s: %d pull requests open (maxParallel %d)", w.Name, open, w.MaxParallel)
					continue
				}
				open++
				admitted[c] = true
			}
			blocked = fmt.Sprintf("wave %s is not done (%d of %d changed clusters healthy)", w.Name, ws.Healthy, ws.Changed)
		case ws.Changed > 0 && now.Before(lastHealthy.Add(w.Soak)):
			ws.State = WaveSoaking
			ws.SoakUntil = lastHealthy.Add(w.Soak)
			st.NextCheck = earliest(st.NextCheck, ws.SoakUntil)
			blocked = fmt.Sprintf("wave %s soaks until %s", w.Name, ws.SoakUntil.UTC().Format(time.RFC3339))
		default:
			ws.State = WaveDone
		}
		st.Waves = append(st.Waves, ws)
	}
	if st.Halted != nil {
		// A halt stops new pull requests in every wave, earlier ones included.
		for c := range admitted {
			if pr := observed[c].PR; pr == nil || !pr.Open {
				delete(admitted, c)
				st.Held[c] = "rollout halted"
			}
		}
	}
	for c := range admitted {
		st.Admitted = append(st.Admitted, c)
	}
	sort.Strings(st.Admitted)
	st.Done = st.Halted == nil && blocked == ""
	if st.Halted != nil || st.Done {
		st.NextCheck = time.Time{}
	}
	return st
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}
