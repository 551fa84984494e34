package rollout

import (
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/report"

	"github.com/fleetbot-io/fleetbot/internal/window"
)

// WindowStatus is where the change windows stand at a verdict.
type WindowStatus struct {
	// Open: a new pull request may open and fleetbot may merge.
	Open bool
	// Next is when that changes: the next opening of a closed schedule, the next closing of an
	// open one; zero when it does not change within a year (window.Horizon).
	Next time.Time
}

// Report is the window's state as the report and the status views show it.
func (ws *WindowStatus) Report() *report.RolloutWindow {
	if ws == nil {
		return nil
	}
	return &report.RolloutWindow{Open: ws.Open, Next: ws.Next}
}

// windowStatus evaluates the change windows at now; nil without windows.
func windowStatus(s window.Schedule, now time.Time) *WindowStatus {
	if len(s) == 0 {
		return nil
	}
	ws := &WindowStatus{Open: s.Open(now)}
	if ws.Open {
		ws.Next, _ = s.NextClose(now)
	} else {
		ws.Next, _ = s.NextOpen(now)
	}
	return ws
}

// Sentence words where the change windows stand, for the check run.
func (ws *WindowStatus) Sentence() string {
	w := report.RolloutWindow{Open: ws.Open, Next: ws.Next}
	s := w.Sentence()
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// reason is why a closed schedule holds a cluster.
func (ws *WindowStatus) reason() string {
	if ws.Next.IsZero() {
		return "outside the change windows (none opens within a year)"
	}
	return "outside the change windows until " + ws.Next.UTC().Format(time.RFC3339)
}

// MergesAllowed reports whether fleetbot may merge a pull request or enable auto-merge now:
// the rollout is not paused and the change windows are open. Open pull requests are updated
// in place either way.
func (s *Status) MergesAllowed() bool {
	return s.mergesHeld() == ""
}

// mergesHeld says why fleetbot may not merge now, "" when it may: the pause, or the change
// windows (closed outside every allow window and inside any deny window).
func (s *Status) mergesHeld() string {
	switch {
	case s.Paused:
		return "the rollout is paused" + noteOf(s.PauseNote)
	case s.Window != nil && !s.Window.Open:
		return "the rollout is " + s.Window.reason()
	}
	return ""
}

// RestoreMerge is how a rollback's restore pull request merges, by the same rule as every
// merge (MergesAllowed): a rollback is a remedy, so its pull requests open whatever the pause
// and the change windows say (opening one changes nothing on a cluster, and a human may merge
// it by hand at once), but fleetbot enables auto-merge on one (auto: its wave merges
// automatically) only while it may merge. held says, for a restore that would auto-merge but
// may not, why and what to do: it opens without auto-merge and stays so.
func (s *Status) RestoreMerge(auto bool) (autoMerge bool, held string) {
	if !auto {
		return false, ""
	}
	if why := s.mergesHeld(); why != "" {
		return false, "opened while " + why + ": not set to auto-merge; merge it by hand when the restore may land"
	}
	return true, ""
}

// windowCheck adds to NextCheck the window change the verdict depends on: the opening that
// releases a wave held by the windows, or the closing that would hold what is admitted.
func (e *evaluation) windowCheck() {
	if e.Window == nil || e.Window.Next.IsZero() || e.Halted != nil || e.Done {
		return
	}
	closedWave := false
	for _, ws := range e.Waves {
		closedWave = closedWave || ws.State == WaveClosed
	}
	if closedWave || (e.Window.Open && len(e.Admitted) > 0) {
		e.NextCheck = earliest(e.NextCheck, e.Window.Next)
	}
}
