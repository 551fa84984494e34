package app

import (
	"fmt"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// Rollout progress conclusions: the rollout check run stays in progress (ProgressRunning)
// until every wave is done (ProgressDone) or a cluster halted it (ProgressHalted).
const (
	ProgressRunning = ""
	ProgressDone    = "success"
	ProgressHalted  = "failure"
)

// RolloutProgress is the rollout gate's verdict on one revision, worded for the control repo's
// check run: which wave the rollout is in, how many clusters of each wave are done, and why it
// halted.
type RolloutProgress struct {
	// Conclusion is ProgressRunning, ProgressDone or ProgressHalted.
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

// DescribeRollout words a rollout verdict for the control repo's check run. A wave's done count
// is its clusters the revision leaves alone plus those merged and reported healthy by Flux.
func DescribeRollout(st *rollout.Status) RolloutProgress {
	p := RolloutProgress{NextCheck: st.NextCheck}
	current := -1
	for i, ws := range st.Waves {
		p.Changed += ws.Changed
		if current < 0 && ws.State != rollout.WaveDone {
			current = i
		}
	}
	switch {
	case st.Halted != nil:
		p.Conclusion = ProgressHalted
		p.Title = fmt.Sprintf("rollout halted on %s: %s", st.Halted.Cluster, st.Halted.Reason)
	case st.Done:
		p.Conclusion = ProgressDone
		p.Title = fmt.Sprintf("rollout done: %d of %d waves", len(st.Waves), len(st.Waves))
	case current >= 0:
		ws := st.Waves[current]
		p.Title = fmt.Sprintf("wave %d of %d (%s): %d of %d clusters done", current+1, len(st.Waves), ws.Name, waveDone(ws), ws.Total)
		if ws.State == rollout.WaveSoaking {
			p.Title += ", soaking until " + ws.SoakUntil.UTC().Format(time.RFC3339)
		}
	default:
		p.Title = "rollout in progress"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Rollout of control-repo revision `%s` in %d waves; each starts once the one before is merged, reported healthy by Flux and soaked.\n\n",
		report.ShortSHA(st.Revision), len(st.Waves))
	if h := st.Halted; h != nil {
		fmt.Fprintf(&b, "**Halted on %s** (wave %s): %s. No new pull request opens until Flux reports it healthy or a new control-repo commit supersedes this rollout.\n\n",
			h.Cluster, h.Wave, h.Reason)
	}
	b.WriteString("| # | wave | state | done / total | changed | merged | healthy | soak until |\n|---|---|---|---|---|---|---|---|\n")
	for i, ws := range st.Waves {
		soak := "-"
		if !ws.SoakUntil.IsZero() {
			soak = ws.SoakUntil.UTC().Format(time.RFC3339)
		}
		state := string(ws.State)
		if i == current && st.Halted == nil {
			state = "**" + state + "**"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %d / %d | %d | %d | %d | %s |\n", i+1, ws.Name, state, waveDone(ws), ws.Total, ws.Changed, ws.Merged, ws.Healthy, soak)
	}
	if len(st.Held) > 0 {
		fmt.Fprintf(&b, "\n%d cluster(s) wait for their wave; `fleetbot rollout status` lists them with why.\n", len(st.Held))
	}
	if !p.NextCheck.IsZero() {
		fmt.Fprintf(&b, "\nNext check by time alone: %s.\n", p.NextCheck.UTC().Format(time.RFC3339))
	}
	p.Summary = b.String()
	return p
}

// waveDone is how many of a wave's clusters are done with the revision: unchanged, or merged
// and healthy.
func waveDone(ws rollout.WaveStatus) int {
	return ws.Total - ws.Changed + ws.Healthy
}
