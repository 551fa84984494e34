package rollout

import (
	"time"

	"github.com/fleetbot-io/fleetbot/internal/report"
)

// nextWake is Rollouts.NextWake: the status's next check, zero for nil.
func (s *Status) nextWake() time.Time {
	if s == nil {
		return time.Time{}
	}
	return s.NextCheck
}

// Report is the verdict as the report shows it (`fleetbot rollout status`, the report's JSON);
// nil for nil: no waves.
func (s *Status) Report() *report.Rollout {
	if s == nil {
		return nil
	}
	out := &report.Rollout{Revision: s.Revision, State: report.RolloutInProgress, Lists: s.Lists,
		Admitted: s.Admitted, PauseNote: s.PauseNote, NextCheck: s.NextCheck, Waves: []report.RolloutWave{}}
	switch {
	case s.Halted != nil:
		out.State = report.RolloutHalted
		out.Halted = &report.RolloutHalt{Wave: s.Halted.Wave, Cluster: s.Halted.Cluster, Reason: s.Halted.Reason,
			Rollback: s.Halted.Rollback, RolledBack: s.Halted.RolledBack}
	case s.Done:
		out.State = report.RolloutDone
	case s.Paused:
		out.State = report.RolloutPaused
	}
	for _, w := range s.Waves {
		out.Waves = append(out.Waves, report.RolloutWave{Name: w.Name, State: string(w.State), Total: w.Total,
			Changed: w.Changed, Merged: w.Merged, Healthy: w.Healthy, SoakUntil: w.SoakUntil,
			Failed: w.Failed, Unreported: w.Unreported, Skipped: w.Skipped, Awaiting: w.Awaiting})
		if len(w.Failed)+len(w.Unreported) > 0 {
			last := &out.Waves[len(out.Waves)-1]
			last.MaxUnavailable, last.MaxFailures = w.MaxUnavailable, w.MaxFailures
		}
	}
	out.Window = s.Window.Report()
	out.Rollback = s.Rollback.Report()
	for c, why := range s.Held {
		out.Held = append(out.Held, report.HeldCluster{Cluster: c, Reason: why})
	}
	out.SortHeld()
	return out
}

// Report is the rollback as the report shows it; nil for nil.
func (r *RollbackStatus) Report() *report.RolloutRollback {
	if r == nil {
		return nil
	}
	out := &report.RolloutRollback{Revision: r.Revision, Reason: r.Reason, Stuck: r.Stuck}
	for _, s := range r.Restores {
		out.Restores = append(out.Restores, report.RolloutRestore{Repo: s.Repo, To: s.To, PR: s.PR, URL: s.PRURL, State: s.State, Reason: s.Reason})
	}
	return out
}
