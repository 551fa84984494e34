package fanout

import (
	"slices"
	"strings"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// withBranchRules makes a target's access enforce the declared branch rules: their approvals,
// code-owner review and required checks replace the default protection's, and the protection
// is enforced as a ruleset with the declared bypass actors; with rules.Organization the repo
// carries the custom properties the org ruleset targets it by. Nil rules change nothing.
func withBranchRules(a *policy.Access, rules *control.BranchRules, kind Kind, name string) {
	if rules == nil || a.Protection == nil {
		return
	}
	if rules.RequiredApprovals != nil {
		a.Protection.RequiredApprovals = *rules.RequiredApprovals
	}
	if rules.CodeOwnerReview != nil {
		a.Protection.RequireCodeOwnerReviews = *rules.CodeOwnerReview
	}
	for _, c := range rules.RequiredChecks {
		a.Protection.RequiredChecks = append(a.Protection.RequiredChecks, policy.RequiredCheck{Context: c.Context, AppID: c.AppID})
	}
	slices.SortFunc(a.Protection.RequiredChecks, func(x, y policy.RequiredCheck) int { return strings.Compare(x.Context, y.Context) })
	r := &policy.Rules{Organization: rules.Organization}
	for _, b := range rules.Bypass {
		switch {
		case b.Team != "":
			r.Bypass = append(r.Bypass, policy.BypassActor{Type: policy.BypassTeam, Name: b.Team})
		case b.App != 0:
			r.Bypass = append(r.Bypass, policy.BypassActor{Type: policy.BypassApp, AppID: b.App})
		case b.Role != "":
			r.Bypass = append(r.Bypass, policy.BypassActor{Type: policy.BypassRole, Name: b.Role})
		case b.OrganizationAdmin:
			r.Bypass = append(r.Bypass, policy.BypassActor{Type: policy.BypassOrganizationAdmin})
		}
	}
	a.Rules = r
	if rules.Organization {
		a.Properties = policy.RepoProperties(string(kind), name)
	}
}
