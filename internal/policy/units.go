package policy

import (
	"fmt"
	"maps"
	"slices"
)

// UnitName names one access setting fleetbot converges on a repo.
type UnitName string

// The access units, one per setting.
const (
	// UnitTeams: the teams that hold a role on the repo (the persona matrix).
	UnitTeams UnitName = "teams"
	// UnitCollaborators: direct collaborators, which fleetbot only removes (access is granted
	// through teams).
	UnitCollaborators UnitName = "collaborators"
	// UnitProtection: the protection of the default branch.
	UnitProtection UnitName = "protection"
	// UnitRepoSettings: the repo's own settings fleetbot needs ("Allow auto-merge").
	UnitRepoSettings UnitName = "repo-settings"
	// UnitRuleset: the ruleset enforcing the default branch's protection (declared branch
	// rules), on the repo or the org.
	UnitRuleset UnitName = "ruleset"
	// UnitProperties: the custom properties an org ruleset targets the repo by.
	UnitProperties UnitName = "custom-properties"
)

// Unit is one access setting of a repo, converged on its own: how the observed setting drifts
// from the desired one (Diff, which fills the unit's fields of a Plan), whether a plan changes
// it (Changes), what the repo holds once the plan is applied (Converge), and the plan's steps
// in words (Describe). Each forge observes and applies every unit (internal/forge/github and
// internal/forge/local keep a table with one entry per unit); Diff, Converge, Plan.Empty and
// Plan.Describe iterate Units, so a new setting is a new Unit, its fields in Access and Plan,
// and its entry in each forge's table, with nothing else to change.
type Unit interface {
	Name() UnitName
	// Diff adds to p what converges the unit's part of observed to desired, within opts.
	Diff(desired, observed Access, opts DiffOptions, p *Plan)
	// Changes reports whether p changes the unit.
	Changes(p *Plan) bool
	// Converge sets the unit's part of out: observed's, with p applied.
	Converge(observed Access, p Plan, out *Access)
	// Describe says p's steps on the unit, one line each.
	Describe(p *Plan) []string
}

// Units are the access units in the order a plan lists them (and a reader checks them): teams,
// collaborators, protection, the ruleset, custom properties, repo settings.
var Units = []Unit{Teams{}, Collaborators{}, BranchProtection{}, BranchRuleset{}, CustomProperties{}, RepoSettings{}}

// Teams is the unit of the team roles on a repo: missing teams are granted, roles raised, and,
// outside additive mode and the protected names, roles lowered and teams revoked.
type Teams struct{}

// Name implements Unit.
func (Teams) Name() UnitName { return UnitTeams }

// Diff implements Unit.
func (Teams) Diff(desired, observed Access, opts DiffOptions, p *Plan) {
	protected := func(name string) bool { return slices.Contains(opts.Protected, name) }
	for _, name := range slices.Sorted(maps.Keys(desired.Teams)) {
		want := desired.Teams[name]
		have, ok := observed.Teams[name]
		switch {
		case !ok && CoveredByBase(want, opts.BaseRole):
		case !ok:
			p.Grants = append(p.Grants, Grant{Name: name, Role: want})
		case have == want:
		case Rank(want) > Rank(have):
			p.Changes = append(p.Changes, Change{Name: name, From: have, To: want})
		case opts.Additive:
			p.Withheld = append(p.Withheld, fmt.Sprintf("team %s: keeps %s instead of %s (additive mode)", name, have, want))
		case protected(name):
			p.Withheld = append(p.Withheld, fmt.Sprintf("team %s: keeps %s instead of %s (protected)", name, have, want))
		default:
			p.Changes = append(p.Changes, Change{Name: name, From: have, To: want})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(observed.Teams)) {
		if _, ok := desired.Teams[name]; ok {
			continue
		}
		have := observed.Teams[name]
		switch {
		case protected(name):
			p.Withheld = append(p.Withheld, fmt.Sprintf("team %s: keeps %s although not desired (protected)", name, have))
		case opts.Additive:
			p.Withheld = append(p.Withheld, fmt.Sprintf("team %s: keeps %s although not desired (additive mode)", name, have))
		default:
			p.Revokes = append(p.Revokes, Grant{Name: name, Role: have})
		}
	}
}

// Changes implements Unit.
func (Teams) Changes(p *Plan) bool { return len(p.Grants)+len(p.Changes)+len(p.Revokes) > 0 }

// Converge implements Unit.
func (Teams) Converge(observed Access, p Plan, out *Access) {
	out.Teams = map[string]Role{}
	maps.Copy(out.Teams, observed.Teams)
	for _, g := range p.Grants {
		out.Teams[g.Name] = g.Role
	}
	for _, c := range p.Changes {
		out.Teams[c.Name] = c.To
	}
	for _, g := range p.Revokes {
		delete(out.Teams, g.Name)
	}
}

// Describe implements Unit.
func (Teams) Describe(p *Plan) []string {
	var out []string
	for _, g := range p.Grants {
		out = append(out, fmt.Sprintf("grant team %s %s", g.Name, g.Role))
	}
	for _, c := range p.Changes {
		verb := "raise"
		if Rank(c.To) < Rank(c.From) {
			verb = "lower"
		}
		out = append(out, fmt.Sprintf("%s team %s from %s to %s", verb, c.Name, c.From, c.To))
	}
	for _, g := range p.Revokes {
		out = append(out, fmt.Sprintf("revoke team %s (%s, not in the persona matrix)", g.Name, g.Role))
	}
	return out
}

// Collaborators is the unit of a repo's direct collaborators: fleetbot grants access through
// teams only, so a direct collaborator the desired access does not name at its role is removed
// (outside additive mode and the protected names).
type Collaborators struct{}

// Name implements Unit.
func (Collaborators) Name() UnitName { return UnitCollaborators }

// Diff implements Unit.
func (Collaborators) Diff(desired, observed Access, opts DiffOptions, p *Plan) {
	for _, login := range slices.Sorted(maps.Keys(observed.Collaborators)) {
		have := observed.Collaborators[login]
		if want, ok := desired.Collaborators[login]; ok && want == have {
			continue
		}
		switch {
		case slices.Contains(opts.Protected, login):
			p.Withheld = append(p.Withheld, fmt.Sprintf("collaborator %s: keeps %s (protected)", login, have))
		case opts.Additive:
			p.Withheld = append(p.Withheld, fmt.Sprintf("collaborator %s: keeps %s (additive mode)", login, have))
		default:
			p.RemoveCollaborators = append(p.RemoveCollaborators, Grant{Name: login, Role: have})
		}
	}
}

// Changes implements Unit.
func (Collaborators) Changes(p *Plan) bool { return len(p.RemoveCollaborators) > 0 }

// Converge implements Unit.
func (Collaborators) Converge(observed Access, p Plan, out *Access) {
	out.Collaborators = map[string]Role{}
	maps.Copy(out.Collaborators, observed.Collaborators)
	for _, g := range p.RemoveCollaborators {
		delete(out.Collaborators, g.Name)
	}
	if len(out.Collaborators) == 0 {
		out.Collaborators = nil
	}
}

// Describe implements Unit.
func (Collaborators) Describe(p *Plan) []string {
	var out []string
	for _, g := range p.RemoveCollaborators {
		out = append(out, fmt.Sprintf("remove direct collaborator %s (%s; access is granted through teams only)", g.Name, g.Role))
	}
	return out
}

// BranchProtection is the unit of the default branch's protection: a floor, so only a weaker
// observed protection is drift, and its fix keeps what is stricter (more approvals, other
// required checks). Nothing is planned where the forge cannot protect the branch
// (Access.ProtectionUnavailable).
type BranchProtection struct{}

// Name implements Unit.
func (BranchProtection) Name() UnitName { return UnitProtection }

// Diff implements Unit.
func (BranchProtection) Diff(desired, observed Access, _ DiffOptions, p *Plan) {
	if desired.Protection == nil || observed.ProtectionUnavailable != "" {
		return
	}
	if desired.Rules != nil && observed.RulesetsUnavailable == "" {
		return // BranchRuleset enforces it
	}
	p.ProtectionDrift = protectionDrift(*desired.Protection, observed.Protection)
	if len(p.ProtectionDrift) == 0 {
		return
	}
	want := *desired.Protection
	if o := observed.Protection; o != nil && o.Branch == want.Branch {
		// Approvals are a floor: a count raised by hand survives the fix of an unrelated
		// setting.
		want.RequiredApprovals = max(want.RequiredApprovals, o.RequiredApprovals)
		// Required checks are a floor too: the fix of a setting keeps the checks someone
		// else requires (a CI workflow's) and whether branches must be up to date.
		want.RequiredChecks = mergeChecks(want.RequiredChecks, o.RequiredChecks)
		want.StrictChecks = want.StrictChecks || o.StrictChecks
	}
	p.Protection = &want
}

// Changes implements Unit.
func (BranchProtection) Changes(p *Plan) bool { return p.Protection != nil }

// Converge implements Unit.
func (BranchProtection) Converge(observed Access, p Plan, out *Access) {
	out.Protection = nil
	if observed.Protection != nil {
		prot := *observed.Protection
		out.Protection = &prot
	}
	if p.Protection != nil {
		prot := *p.Protection
		prot.RequiredChecks = slices.Clone(prot.RequiredChecks)
		out.Protection = &prot
	}
}

// Describe implements Unit.
func (BranchProtection) Describe(p *Plan) []string {
	var out []string
	for _, d := range p.ProtectionDrift {
		out = append(out, "protect: "+d)
	}
	return out
}

// RepoSettings is the unit of the repo's own settings fleetbot needs: "Allow auto-merge" when
// pull requests merge automatically. It only adds a capability, so additive mode applies it
// too, and fleetbot never turns it off (a repo that allows more than it needs is not drift).
type RepoSettings struct{}

// Name implements Unit.
func (RepoSettings) Name() UnitName { return UnitRepoSettings }

// Diff implements Unit.
func (RepoSettings) Diff(desired, observed Access, _ DiffOptions, p *Plan) {
	p.AllowAutoMerge = desired.AllowAutoMerge && !observed.AllowAutoMerge
}

// Changes implements Unit.
func (RepoSettings) Changes(p *Plan) bool { return p.AllowAutoMerge }

// Converge implements Unit.
func (RepoSettings) Converge(observed Access, p Plan, out *Access) {
	out.AllowAutoMerge = observed.AllowAutoMerge || p.AllowAutoMerge
}

// Describe implements Unit.
func (RepoSettings) Describe(p *Plan) []string {
	if p.AllowAutoMerge {
		return []string{"allow auto-merge (pullRequests.merge: auto; the repo does not allow it)"}
	}
	return nil
}
