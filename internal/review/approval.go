package review

import (
	"path"
	"slices"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// approval judges a commit that approves a rollout wave (adds or changes
// rollout/approvals/<wave>.yaml, `fleetbot rollout approve`): when the base's CODEOWNERS
// gives the file to owners, its author must be one of them (a user named there, or a member
// of a team named there), a platform admin included, so the approvers the control repo names
// are the ones who approve, whoever else may merge there. A file with no code owner is the
// platform admins' (fc, judge's verdict, stands). Without the base's CODEOWNERS nothing
// changes.
func approval(fc FileChange, c fileDiff, base *control.Repo, author string, m *membership) FileChange {
	if base == nil || path.Dir(c.path) != control.ApprovalsDir || (c.op != OpAdded && c.op != OpChanged) {
		return fc
	}
	rule, ok := base.Codeowners.Owner(c.path)
	if !ok || len(rule.Owners) == 0 {
		return fc
	}
	wave := strings.TrimSuffix(strings.TrimSuffix(path.Base(c.path), ".yaml"), ".yml")
	where := base.Codeowners.File + " (" + rule.Pattern + ")"
	fc.Owner = "code owners of " + c.path + " by " + where
	if author != "" && slices.Contains(rule.Users(), strings.ToLower(author)) {
		fc.Allowed, fc.Reason = true, author+" approves wave "+wave+": a code owner of "+c.path+" by "+where
		return fc
	}
	if team, ok := m.in(rule.Teams()); ok {
		fc.Allowed, fc.Reason = true, "team "+team+" approves wave "+wave+": it owns "+c.path+" by "+where
		return fc
	}
	fc.Allowed = false
	fc.Reason = "only the code owners of " + c.path + " by " + where + " (" + strings.Join(rule.Owners, ", ") + ") may approve wave " + wave
	return fc
}
