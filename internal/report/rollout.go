package report

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Rollout states of Rollout.State.
const (
	RolloutInProgress = "in progress"
	RolloutHalted     = "halted"
	RolloutDone       = "done"
	RolloutPaused     = "paused"
)

// Rollout is the rollout gate's verdict on one control-repo revision: each wave's state and
// counts, the clusters that may have a pull request now and those held, a halt or a pause.
type Rollout struct {
	// Revision is the control-repo revision rolled out.
	Revision string `json:"revision,omitempty"`
	// State is the rollout's: in progress, halted, done or paused.
	State string `json:"state"`
	// Lists names the lists of waves the revision's waves come from (spec.rollout.waves, a
	// component's own), in precedence order.
	Lists []string      `json:"lists,omitempty"`
	Waves []RolloutWave `json:"waves"`
	// Admitted are the changed clusters that may have a pull request for the revision now.
	Admitted []string `json:"admitted,omitempty"`
	// Held are the changed clusters that must not get a new pull request yet, with why.
	Held []HeldCluster `json:"held,omitempty"`
	// Halted says why the rollout stopped.
	Halted *RolloutHalt `json:"halted,omitempty"`
	// PauseNote is the reason of a pause (rollout/paused).
	PauseNote string `json:"pauseNote,omitempty"`
	// NextCheck is the earliest time the verdict can change by time alone (a soak ending, a
	// health timeout).
	NextCheck time.Time `json:"nextCheck,omitzero"`
	// Window is where the change windows (spec.rollout.windows) stand; nil without windows.
	Window *RolloutWindow `json:"window,omitempty"`
	// Rollback is what rolling the revision back did; nil when it was not rolled back.
	Rollback *RolloutRollback `json:"rollback,omitempty"`
}

// RolloutWindow is where the change windows stand: open (a new pull request may open and
// fleetbot may merge) or not, and when that changes (zero: not within a year).
type RolloutWindow struct {
	Open bool      `json:"open"`
	Next time.Time `json:"next,omitzero"`
}

// Sentence words the window's state in one line.
func (w *RolloutWindow) Sentence() string {
	switch {
	case w.Open && w.Next.IsZero():
		return "change windows: open"
	case w.Open:
		return "change windows: open until " + w.Next.UTC().Format(time.RFC3339)
	case w.Next.IsZero():
		return "change windows: closed; none opens within a year"
	}
	return "change windows: closed until " + w.Next.UTC().Format(time.RFC3339) + " (no new pull request opens and nothing merges; open ones are still updated)"
}

// RolloutWave is one wave of a rollout.
type RolloutWave struct {
	Name string `json:"name"`
	// State is done, soaking, active, waiting, halted or paused.
	State string `json:"state"`
	// Total clusters, Changed by the revision, and of those Merged and Healthy.
	Total   int `json:"total"`
	Changed int `json:"changed"`
	Merged  int `json:"merged"`
	Healthy int `json:"healthy"`
	// SoakUntil is when the wave's soak ends (soaking).
	SoakUntil time.Time `json:"soakUntil,omitzero"`
	// Failed and Unreported are the clusters that failed or did not report within the health
	// timeout (counted against the wave's failure budget, MaxUnavailable of both and
	// MaxFailures of the failed); Skipped those the rollout leaves out (rollout/skips).
	Failed         []string `json:"failed,omitempty"`
	Unreported     []string `json:"unreported,omitempty"`
	Skipped        []string `json:"skipped,omitempty"`
	MaxUnavailable int      `json:"maxUnavailable,omitempty"`
	MaxFailures    int      `json:"maxFailures,omitempty"`
	// Awaiting are the approvals the wave waits for (fleetbot rollout approve).
	Awaiting []string `json:"awaiting,omitempty"`
}

// RolloutRollback is what rolling a failed revision back did: the revision, why, each repo's
// restore pull request, and the repos with nothing to restore (a human decides there).
type RolloutRollback struct {
	Revision string           `json:"revision"`
	Reason   string           `json:"reason,omitempty"`
	Restores []RolloutRestore `json:"restores,omitempty"`
	// Stuck is, by repo, why the repo has nothing to restore.
	Stuck map[string]string `json:"stuck,omitempty"`
}

// RolloutRestore is one repo's restore: the revision whose content it restores, its pull
// request, and where it stands (open, merged, healthy, failed, error, restored).
type RolloutRestore struct {
	Repo   string `json:"repo"`
	To     string `json:"to"`
	PR     int    `json:"pr,omitempty"`
	URL    string `json:"url,omitempty"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// HeldCluster is a cluster whose pull request the rollout holds, and why.
type HeldCluster struct {
	Cluster string `json:"cluster"`
	Reason  string `json:"reason"`
}

// RolloutHalt says where and why a rollout stopped.
type RolloutHalt struct {
	Wave    string `json:"wave"`
	Cluster string `json:"cluster"`
	Reason  string `json:"reason"`
	// Rollback: the wave rolls back on failure; RolledBack: the content was rolled back
	// (rollout/rollback.yaml, or a rolled-back failure it repeats).
	Rollback   bool `json:"rollback,omitempty"`
	RolledBack bool `json:"rolledBack,omitempty"`
}

// fleetWaves is the name of the fleet's own list of waves (rollout.FleetWaves).
const fleetWaves = "spec.rollout.waves"

// pausedFile is the control repo's pause file (control.PausedFile).
const pausedFile = "rollout/paused"

// WriteText writes the verdict for a terminal: the state, a pause, the lists of waves, a table
// of the waves, a halt, the clusters admitted and held, and when time alone changes it.
func (r *Rollout) WriteText(w io.Writer) error {
	var b strings.Builder
	rev := r.Revision
	if rev == "" {
		rev = "working tree (not a git checkout)"
	}
	fmt.Fprintf(&b, "rollout of %s: %s\n", rev, r.State)
	if r.State == RolloutPaused {
		note := ""
		if r.PauseNote != "" {
			note = ": " + r.PauseNote
		}
		fmt.Fprintf(&b, "paused (%s)%s: no new wave starts and fleetbot merges nothing; fleetbot rollout resume continues it\n", pausedFile, note)
	}
	if len(r.Lists) > 1 || (len(r.Lists) == 1 && r.Lists[0] != fleetWaves) {
		fmt.Fprintf(&b, "waves of: %s\n", strings.Join(r.Lists, ", then "))
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  WAVE\tSTATE\tCLUSTERS\tCHANGED\tMERGED\tHEALTHY\tSOAK UNTIL")
	for _, ws := range r.Waves {
		soak := "-"
		if !ws.SoakUntil.IsZero() {
			soak = ws.SoakUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%s\n", ws.Name, ws.State, ws.Total, ws.Changed, ws.Merged, ws.Healthy, soak)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeWaveLists(&b, r.Waves)
	switch h := r.Halted; {
	case h == nil:
	case h.Cluster == "":
		fmt.Fprintf(&b, "halted: %s\n", h.Reason)
	default:
		fmt.Fprintf(&b, "halted in wave %s on cluster %s: %s\n", h.Wave, h.Cluster, h.Reason)
		if h.Rollback {
			fmt.Fprintf(&b, "wave %s rolls back on failure: fleetbot restores the last healthy content on every repo the revision reached\n", h.Wave)
		}
	}
	r.Rollback.writeText(&b)
	if r.Window != nil {
		b.WriteString(r.Window.Sentence() + "\n")
	}
	if len(r.Admitted) > 0 {
		fmt.Fprintf(&b, "may have a pull request now: %s\n", strings.Join(r.Admitted, ", "))
	}
	if len(r.Held) > 0 {
		b.WriteString("held:\n")
		for _, h := range r.Held {
			fmt.Fprintf(&b, "  %s: %s\n", h.Cluster, h.Reason)
		}
	}
	if !r.NextCheck.IsZero() {
		fmt.Fprintf(&b, "next change by time alone: %s\n", r.NextCheck.UTC().Format(time.RFC3339))
	}
	b.WriteString(r.SummaryLine())
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeWaveLists names each wave's failed, unreported and skipped clusters and the approvals
// it waits for.
func writeWaveLists(b *strings.Builder, waves []RolloutWave) {
	for _, ws := range waves {
		if len(ws.Failed) > 0 {
			fmt.Fprintf(b, "wave %s: failed (%d, maxFailures %d): %s\n", ws.Name, len(ws.Failed), ws.MaxFailures, strings.Join(ws.Failed, ", "))
		}
		if len(ws.Unreported) > 0 {
			fmt.Fprintf(b, "wave %s: not reported in time (%d unavailable with the failed, maxUnavailable %d): %s\n",
				ws.Name, len(ws.Failed)+len(ws.Unreported), ws.MaxUnavailable, strings.Join(ws.Unreported, ", "))
		}
		if len(ws.Skipped) > 0 {
			fmt.Fprintf(b, "wave %s: skipped: %s\n", ws.Name, strings.Join(ws.Skipped, ", "))
		}
		for _, a := range ws.Awaiting {
			fmt.Fprintf(b, "wave %s waits for approval: fleetbot rollout approve %s\n", ws.Name, a)
		}
	}
}

// SummaryLine says the verdict in one line: "rollout in progress: 3 waves: 1 done, 1 active,
// 1 waiting; 2 clusters held".
func (r *Rollout) SummaryLine() string {
	n := map[string]int{}
	var order []string
	for _, w := range r.Waves {
		if n[w.State] == 0 {
			order = append(order, w.State)
		}
		n[w.State]++
	}
	parts := make([]string, len(order))
	for i, st := range order {
		parts[i] = fmt.Sprintf("%d %s", n[st], st)
	}
	s := fmt.Sprintf("rollout %s: %d %s", r.State, len(r.Waves), plural(len(r.Waves), "wave", "waves"))
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	if len(r.Held) > 0 {
		s += fmt.Sprintf("; %d %s held", len(r.Held), plural(len(r.Held), "cluster", "clusters"))
	}
	return s
}

// SortHeld sorts Held by cluster, the order every output lists them in.
func (r *Rollout) SortHeld() {
	slices.SortFunc(r.Held, func(a, b HeldCluster) int { return strings.Compare(a.Cluster, b.Cluster) })
}

// Sentence words a rollback in one line, for the status page: the revision, why, and where
// its restores stand.
func (rb *RolloutRollback) Sentence() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Rolled back %s", ShortSHA(rb.Revision))
	if rb.Reason != "" {
		fmt.Fprintf(&b, " because %s", rb.Reason)
	}
	var parts []string
	for _, s := range rb.Restores {
		p := s.Repo + " to " + ShortSHA(s.To) + " (" + s.State
		if s.PR > 0 {
			p += fmt.Sprintf(", #%d", s.PR)
		}
		parts = append(parts, p+")")
	}
	fmt.Fprintf(&b, ": %d repo(s) restored", len(rb.Restores))
	if len(parts) > 0 {
		b.WriteString(": " + strings.Join(parts, ", "))
	}
	if len(rb.Stuck) > 0 {
		fmt.Fprintf(&b, "; nothing to restore in %s", strings.Join(slices.Sorted(maps.Keys(rb.Stuck)), ", "))
	}
	return b.String() + "."
}

// writeText words a rollback for a terminal: the revision, why, and each repo's restore.
func (rb *RolloutRollback) writeText(b *strings.Builder) {
	if rb == nil {
		return
	}
	fmt.Fprintf(b, "rolled back %s", ShortSHA(rb.Revision))
	if rb.Reason != "" {
		fmt.Fprintf(b, " because %s", rb.Reason)
	}
	fmt.Fprintf(b, ": %d repo(s) restored\n", len(rb.Restores))
	for _, s := range rb.Restores {
		pr := ""
		if s.PR > 0 {
			pr = fmt.Sprintf(" #%d", s.PR)
		}
		reason := ""
		if s.Reason != "" {
			reason = ": " + s.Reason
		}
		fmt.Fprintf(b, "  %s to %s%s: %s%s\n", s.Repo, ShortSHA(s.To), pr, s.State, reason)
	}
	for _, repo := range slices.Sorted(maps.Keys(rb.Stuck)) {
		fmt.Fprintf(b, "  %s: %s\n", repo, rb.Stuck[repo])
	}
}
