package rollout

import (
	"strings"
)

// awaiting returns the approvals wave w still waits for: those it requires
// (Wave.Approvals) that are not recorded for the revision's content (Options.Approved).
func (e *evaluation) awaiting(w Wave) []string {
	var out []string
	for _, a := range w.Approvals {
		if !e.opts.Approved[a] {
			out = append(out, a)
		}
	}
	return out
}

// approvalReason is why a wave awaiting approval holds its clusters, with the command that
// approves it.
func approvalReason(w Wave, awaiting []string) string {
	cmds := make([]string, len(awaiting))
	for i, a := range awaiting {
		cmds[i] = "fleetbot rollout approve " + a
	}
	return "wave " + w.Name + " waits for approval (" + strings.Join(cmds, "; ") + ")"
}
