package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// RulesetName is the name of the ruleset fleetbot converges (on a repo, or on the org).
const RulesetName = "fleetbot"

// Bypass actor types, as GitHub names them in a ruleset's bypass_actors.
const (
	BypassTeam              = "Team"
	BypassApp               = "Integration"
	BypassRole              = "RepositoryRole"
	BypassOrganizationAdmin = "OrganizationAdmin"
)

// BypassActor is one actor that may bypass the branch rules (always: GitHub's bypass_mode).
type BypassActor struct {
	// Type is BypassTeam, BypassApp, BypassRole or BypassOrganizationAdmin.
	Type string `json:"type"`
	// Name is the team slug (BypassTeam) or the repository role (BypassRole: admin, maintain,
	// write).
	Name string `json:"name,omitempty"`
	// AppID is the GitHub App (BypassApp).
	AppID int64 `json:"appId,omitempty"`
	// Mode is GitHub's bypass_mode as observed ("" or always: the declared mode).
	Mode string `json:"mode,omitempty"`
}

// String names the actor as the control repo declares it.
func (b BypassActor) String() string {
	switch b.Type {
	case BypassTeam:
		return "team " + b.Name
	case BypassApp:
		return fmt.Sprintf("GitHub App %d", b.AppID)
	case BypassRole:
		return "repository role " + b.Name
	case BypassOrganizationAdmin:
		return "organization admins"
	}
	return b.Type + " " + b.Name
}

// key identifies an actor whatever its mode.
func (b BypassActor) key() string {
	return fmt.Sprintf("%s/%s/%d", b.Type, strings.ToLower(b.Name), b.AppID)
}

// Rules says how the default branch's protection (Access.Protection) is enforced when the
// control repo declares branch rules (platform spec.access.branchRules): as a ruleset named
// RulesetName, with its bypass actors, on the repo or, with Organization, as one org ruleset
// that targets the repos by their custom properties (Access.Properties). Where the forge has
// no rulesets (Access.RulesetsUnavailable), the classic branch protection enforces it instead.
type Rules struct {
	Bypass       []BypassActor `json:"bypass,omitempty"`
	Organization bool          `json:"organization,omitempty"`
}

// Ruleset is a branch ruleset: the rules of the default branch (a Protection: pull request,
// approvals, code-owner review, dismissal of stale reviews, required checks; force pushes and
// deletion blocked unless allowed), who may bypass them, and, observed, where it lives.
type Ruleset struct {
	// ID is GitHub's id of an observed ruleset (0: to create).
	ID int64 `json:"id,omitempty"`
	// Organization is set for the org ruleset, unset for the repo's own.
	Organization bool          `json:"organization,omitempty"`
	Protection   Protection    `json:"protection"`
	Bypass       []BypassActor `json:"bypass,omitempty"`
	// Enforcement is GitHub's enforcement (active, evaluate, disabled); only active enforces.
	Enforcement string `json:"enforcement,omitempty"`
	// Properties are the custom property values an org ruleset targets (all must match).
	Properties map[string][]string `json:"properties,omitempty"`
}

// Custom properties fleetbot sets on the repos it creates, and an org ruleset targets.
const (
	PropertyKind = "fleetbot-kind"
	// PropertyPrefix + kind names the repo's cluster, workspace or management cluster:
	// fleetbot-cluster, fleetbot-workspace, fleetbot-management.
	PropertyPrefix = "fleetbot-"
)

// Clone returns a deep copy of r.
func (r *Ruleset) Clone() *Ruleset {
	if r == nil {
		return nil
	}
	c := *r
	c.Protection.RequiredChecks = slices.Clone(r.Protection.RequiredChecks)
	c.Bypass = slices.Clone(r.Bypass)
	if r.Properties != nil {
		c.Properties = map[string][]string{}
		for k, v := range r.Properties {
			c.Properties[k] = slices.Clone(v)
		}
	}
	return &c
}

// DesiredRuleset is the ruleset that enforces desired's protection with its rules, nil when
// the desired access declares none.
func DesiredRuleset(desired Access) *Ruleset {
	if desired.Rules == nil || desired.Protection == nil {
		return nil
	}
	r := &Ruleset{Organization: desired.Rules.Organization, Protection: *desired.Protection,
		Bypass: sortedBypass(desired.Rules.Bypass), Enforcement: "active"}
	r.Protection.RequiredChecks = slices.Clone(r.Protection.RequiredChecks)
	if r.Organization {
		r.Properties = map[string][]string{PropertyKind: {"cluster", "workspace", "management"}}
	}
	return r
}

func sortedBypass(in []BypassActor) []BypassActor {
	out := slices.Clone(in)
	slices.SortFunc(out, func(a, b BypassActor) int { return strings.Compare(a.key(), b.key()) })
	return out
}

// rulesetDrift lists how observed is weaker than (or, for bypass actors, different from)
// desired, one entry per setting; none when observed enforces at least desired.
func rulesetDrift(desired Ruleset, observed *Ruleset) []string {
	where := "repository"
	if desired.Organization {
		where = "organization"
	}
	if observed == nil {
		return []string{fmt.Sprintf("no %s ruleset %s enforces branch %s", where, RulesetName, desired.Protection.Branch)}
	}
	var d []string
	if observed.Enforcement != "active" {
		d = append(d, fmt.Sprintf("ruleset %s is %s, not active", RulesetName, observed.Enforcement))
	}
	d = append(d, protectionDrift(desired.Protection, &observed.Protection)...)
	want := map[string]BypassActor{}
	for _, b := range desired.Bypass {
		want[b.key()] = b
	}
	have := map[string]BypassActor{}
	for _, b := range observed.Bypass {
		have[b.key()] = b
	}
	for _, k := range slices.Sorted(maps.Keys(have)) {
		if _, ok := want[k]; !ok {
			d = append(d, fmt.Sprintf("%s may bypass the rules, and the control repo does not say so", have[k]))
		} else if m := have[k].Mode; m != "" && m != "always" {
			d = append(d, fmt.Sprintf("%s bypasses the rules only in mode %s", have[k], m))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if _, ok := have[k]; !ok {
			d = append(d, fmt.Sprintf("%s may not bypass the rules", want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(desired.Properties)) {
		if !slices.Equal(desired.Properties[k], observed.Properties[k]) {
			d = append(d, fmt.Sprintf("the ruleset targets %s %v, not %v", k, observed.Properties[k], desired.Properties[k]))
		}
	}
	return d
}

// BranchRuleset is the unit of the ruleset that enforces the default branch's protection when
// the control repo declares branch rules (Access.Rules): like BranchProtection a floor (more
// approvals, other required checks survive a fix), except for the bypass actors, which are
// exactly the declared ones (an undeclared actor that may bypass the rules is drift). Nothing is
// planned where the forge has no rulesets (Access.RulesetsUnavailable): BranchProtection then
// enforces the protection.
type BranchRuleset struct{}

// Name implements Unit.
func (BranchRuleset) Name() UnitName { return UnitRuleset }

// Diff implements Unit.
func (BranchRuleset) Diff(desired, observed Access, _ DiffOptions, p *Plan) {
	want := DesiredRuleset(desired)
	if want == nil || observed.RulesetsUnavailable != "" {
		return
	}
	p.RulesetDrift = rulesetDrift(*want, observed.Ruleset)
	if len(p.RulesetDrift) == 0 {
		return
	}
	if o := observed.Ruleset; o != nil && o.Protection.Branch == want.Protection.Branch {
		want.ID = o.ID
		want.Protection.RequiredApprovals = max(want.Protection.RequiredApprovals, o.Protection.RequiredApprovals)
		want.Protection.RequiredChecks = mergeChecks(want.Protection.RequiredChecks, o.Protection.RequiredChecks)
		want.Protection.StrictChecks = want.Protection.StrictChecks || o.Protection.StrictChecks
	}
	p.Ruleset = want
}

// Changes implements Unit.
func (BranchRuleset) Changes(p *Plan) bool { return p.Ruleset != nil }

// Converge implements Unit.
func (BranchRuleset) Converge(observed Access, p Plan, out *Access) {
	out.Ruleset = observed.Ruleset.Clone()
	out.RulesetsUnavailable = observed.RulesetsUnavailable
	if p.Ruleset != nil {
		out.Ruleset = p.Ruleset.Clone()
	}
}

// Describe implements Unit.
func (BranchRuleset) Describe(p *Plan) []string {
	var out []string
	for _, d := range p.RulesetDrift {
		out = append(out, "ruleset: "+d)
	}
	return out
}

// CustomProperties is the unit of the custom properties an org ruleset targets a repo by
// (Access.Properties: fleetbot-kind and fleetbot-<kind>): a property that is missing or holds
// another value is set; properties fleetbot does not set are left alone.
type CustomProperties struct{}

// Name implements Unit.
func (CustomProperties) Name() UnitName { return UnitProperties }

// Diff implements Unit.
func (CustomProperties) Diff(desired, observed Access, _ DiffOptions, p *Plan) {
	for _, k := range slices.Sorted(maps.Keys(desired.Properties)) {
		if observed.Properties[k] != desired.Properties[k] {
			if p.Properties == nil {
				p.Properties = map[string]string{}
			}
			p.Properties[k] = desired.Properties[k]
		}
	}
}

// Changes implements Unit.
func (CustomProperties) Changes(p *Plan) bool { return len(p.Properties) > 0 }

// Converge implements Unit.
func (CustomProperties) Converge(observed Access, p Plan, out *Access) {
	out.Properties = maps.Clone(observed.Properties)
	if len(p.Properties) > 0 && out.Properties == nil {
		out.Properties = map[string]string{}
	}
	maps.Copy(out.Properties, p.Properties)
}

// Describe implements Unit.
func (CustomProperties) Describe(p *Plan) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(p.Properties)) {
		out = append(out, fmt.Sprintf("set custom property %s to %q (the organization ruleset targets repos by it)", k, p.Properties[k]))
	}
	return out
}

// RepoProperties are the custom properties of a repo of kind named name: fleetbot-kind, and
// fleetbot-<kind> (fleetbot-cluster, fleetbot-workspace, fleetbot-management).
func RepoProperties(kind, name string) map[string]string {
	return map[string]string{PropertyKind: kind, PropertyPrefix + kind: name}
}
