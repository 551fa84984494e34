package policy

import (
	"fmt"
	"slices"
)

// Converge returns the access a repo has once p is applied to observed. The
// forges write exactly these steps, and the GitHub forge caches the result,
// so what is written and what is remembered cannot disagree. Observed is not
// modified.
func Converge(observed Access, p Plan) Access {
	out := Access{Teams: map[string]Role{}, Collaborators: map[string]Role{},
		AllowAutoMerge: observed.AllowAutoMerge || p.AllowAutoMerge}
	for k, v := range observed.Teams {
		out.Teams[k] = v
	}
	for k, v := range observed.Collaborators {
		out.Collaborators[k] = v
	}
	if observed.Protection != nil {
		prot := *observed.Protection
		out.Protection = &prot
	}
	for _, g := range p.Grants {
		out.Teams[g.Name] = g.Role
	}
	for _, c := range p.Changes {
		out.Teams[c.Name] = c.To
	}
	for _, g := range p.Revokes {
		delete(out.Teams, g.Name)
	}
	for _, g := range p.RemoveCollaborators {
		delete(out.Collaborators, g.Name)
	}
	if p.Protection != nil {
		prot := *p.Protection
		prot.RequiredChecks = slices.Clone(prot.RequiredChecks)
		out.Protection = &prot
	}
	if len(out.Collaborators) == 0 {
		out.Collaborators = nil
	}
	return out
}

// Describe lists the plan in words, one line per step, in the order a
// reader checks them: what is added, what changes, what is taken away, the
// protection, then the drift left alone.
func (p *Plan) Describe() []string {
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
	for _, g := range p.RemoveCollaborators {
		out = append(out, fmt.Sprintf("remove direct collaborator %s (%s; access is granted through teams only)", g.Name, g.Role))
	}
	for _, d := range p.ProtectionDrift {
		out = append(out, "protect: "+d)
	}
	if p.AllowAutoMerge {
		out = append(out, "allow auto-merge (pullRequests.merge: auto; the repo does not allow it)")
	}
	for _, w := range p.Withheld {
		out = append(out, "kept: "+w)
	}
	return out
}
