package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/report"
)

// Conclusions of the rollout check run: it stays in progress (CheckRunning) until every wave
// is done (CheckDone) or a cluster halted it (CheckHalted).
const (
	CheckRunning = ""
	CheckDone    = "success"
	CheckHalted  = "failure"
)

// CheckRun is the rollout gate's verdict on one revision, worded for the control repo's check
// run: which wave the rollout is in, how many clusters of each wave are done, and why it
// halted.
type CheckRun struct {
	// Conclusion is CheckRunning, CheckDone or CheckHalted.
	Conclusion string
	// Title is one line: "wave 2 of 3 (eu): 1 of 2 clusters done", "halted on c02: ...".
	Title string
	// Summary is markdown: a table of the waves and, when halted, the cluster and the reason.
	Summary string
	// Changed is how many clusters the revision changes: 0 means there is nothing to roll out.
	Changed int
	// NextCheck is when time alone can change the verdict (a soak ending, a health timeout);
	// zero when only a new observation can.
	NextCheck time.Time
}

// Done reports whether the rollout is done (CheckDone): no cluster takes part any more.
func (p CheckRun) Done() bool { return p.Conclusion == CheckDone }

// CheckRun words the verdict for the control repo's check run. A wave's done count is its
// clusters the revision leaves alone plus those merged and reported healthy by Flux.
func (s *Status) checkRun() CheckRun {
	p := CheckRun{NextCheck: s.nextWake()}
	current := -1
	for i, ws := range s.Waves {
		p.Changed += ws.Changed
		if current < 0 && ws.State != WaveDone {
			current = i
		}
	}
	switch {
	case s.Halted != nil && s.Halted.Cluster == "":
		p.Conclusion = CheckHalted
		p.Title = "rollout halted: " + s.Halted.Reason
	case s.Halted != nil:
		p.Conclusion = CheckHalted
		p.Title = fmt.Sprintf("rollout halted on %s: %s", s.Halted.Cluster, s.Halted.Reason)
	case s.Done:
		p.Conclusion = CheckDone
		p.Title = fmt.Sprintf("rollout done: %d of %d waves", len(s.Waves), len(s.Waves))
	case current >= 0:
		ws := s.Waves[current]
		p.Title = fmt.Sprintf("wave %d of %d (%s): %d of %d clusters done", current+1, len(s.Waves), ws.Name, waveDone(ws), ws.Total)
		if ws.State == WaveSoaking {
			p.Title += ", soaking until " + ws.SoakUntil.UTC().Format(time.RFC3339)
		}
	default:
		p.Title = "rollout in progress"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Rollout of control-repo revision `%s` in %d waves; each starts once the one before is merged, reported healthy by Flux and soaked.\n\n",
		report.ShortSHA(s.Revision), len(s.Waves))
	writeHalt(&b, s.Halted)
	writeRollback(&b, s.Rollback)
	if w := s.Window; w != nil {
		b.WriteString(w.Sentence() + "\n\n")
	}
	b.WriteString("| # | wave | state | done / total | changed | merged | healthy | soak until |\n|---|---|---|---|---|---|---|---|\n")
	for i, ws := range s.Waves {
		soak := "-"
		if !ws.SoakUntil.IsZero() {
			soak = ws.SoakUntil.UTC().Format(time.RFC3339)
		}
		state := string(ws.State)
		if i == current && s.Halted == nil {
			state = "**" + state + "**"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d / %d | %d | %d | %d | %s |\n", i+1, ws.Name, state, waveDone(ws), ws.Total, ws.Changed, ws.Merged, ws.Healthy, soak)
	}
	writeBudgetLists(&b, s.Waves)
	if len(s.Held) > 0 {
		fmt.Fprintf(&b, "\n%d cluster(s) wait for their wave; `fleetbot rollout status` lists them with why.\n", len(s.Held))
	}
	if !p.NextCheck.IsZero() {
		fmt.Fprintf(&b, "\nNext check by time alone: %s.\n", p.NextCheck.UTC().Format(time.RFC3339))
	}
	p.Summary = b.String()
	return p
}

// waveDone is how many of a wave's clusters are done with the revision: unchanged, or merged
// and healthy.
func waveDone(ws WaveStatus) int {
	return ws.Total - ws.Changed + ws.Healthy
}

// writeHalt words a halt for the check run: on which cluster, why, and what follows (a wave
// that rolls back on failure says how the rollback is recorded).
func writeHalt(b *strings.Builder, h *Halt) {
	switch {
	case h == nil:
	case h.Cluster == "":
		fmt.Fprintf(b, "**Halted**: %s.\n\n", h.Reason)
	default:
		fmt.Fprintf(b, "**Halted on %s** (wave %s): %s. No new pull request opens until Flux reports it healthy or a new control-repo commit supersedes this rollout.\n\n",
			h.Cluster, h.Wave, h.Reason)
		if h.FailedBy != "" {
			fmt.Fprintf(b, "What failed on %s: %s.\n\n", h.Cluster, h.FailedBy)
		}
	}
	if h != nil && h.Rollback {
		fmt.Fprintf(b, "Wave %s rolls back on failure (onFailure: rollback): fleetbot opens a pull request on every cluster and workspace repo the revision reached, restoring the content of the last revision that was healthy there, and does not roll this content out again until a control-repo commit changes it.\n\n", h.Wave)
	}
}

// writeRollback lists what a rollback did: each repo's restore and the repos with nothing to
// restore.
func writeRollback(b *strings.Builder, r *RollbackStatus) {
	if r == nil {
		return
	}
	fmt.Fprintf(b, "**Rolled back** revision `%s`", report.ShortSHA(r.Revision))
	if r.Reason != "" {
		fmt.Fprintf(b, " because %s", r.Reason)
	}
	fmt.Fprintf(b, ": %d repo(s) restored to the last revision that was healthy there.\n\n", len(r.Restores))
	if len(r.Restores) > 0 {
		b.WriteString("| repo | restored to | pull request | state |\n|---|---|---|---|\n")
		for _, s := range r.Restores {
			pr := "-"
			if s.PR > 0 {
				pr = fmt.Sprintf("#%d", s.PR)
			}
			state := s.State
			if s.Reason != "" {
				state += ": " + s.Reason
			}
			fmt.Fprintf(b, "| %s | `%s` | %s | %s |\n", s.Repo, report.ShortSHA(s.To), pr, state)
		}
		b.WriteString("\n")
	}
	for _, repo := range slices.Sorted(maps.Keys(r.Stuck)) {
		fmt.Fprintf(b, "- %s: %s\n", repo, r.Stuck[repo])
	}
	if len(r.Stuck) > 0 {
		b.WriteString("\n")
	}
}

// writeBudgetLists names, per wave, the clusters that failed or did not report within the
// wave's failure budget, and those the rollout skips.
func writeBudgetLists(b *strings.Builder, waves []WaveStatus) {
	for _, ws := range waves {
		if len(ws.Failed) > 0 {
			fmt.Fprintf(b, "\nWave %s: failed (%d of maxFailures %d): %s.\n", ws.Name, len(ws.Failed), ws.MaxFailures, strings.Join(ws.Failed, ", "))
		}
		if len(ws.Unreported) > 0 {
			fmt.Fprintf(b, "\nWave %s: not reported within the health timeout (with the failed, %d of maxUnavailable %d): %s.\n",
				ws.Name, len(ws.Failed)+len(ws.Unreported), ws.MaxUnavailable, strings.Join(ws.Unreported, ", "))
		}
		if len(ws.Skipped) > 0 {
			fmt.Fprintf(b, "\nWave %s: skipped (rollout/skips): %s.\n", ws.Name, strings.Join(ws.Skipped, ", "))
		}
	}
}
