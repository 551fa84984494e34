package control

import (
	"fmt"
	"sort"
)

// Personas of the access model (DESIGN §1).
const (
	PersonaPlatformAdmin  = "platform admin"
	PersonaClusterAdmin   = "cluster admin"
	PersonaWorkspaceAdmin = "workspace admin"
	// PersonaBypass is a team that may bypass the branch rules (spec.access.branchRules.bypass).
	PersonaBypass = "branch rule bypass actor"
)

// TeamRef is one mention of a team in the control repo: which persona it
// makes the team, of what, and where it is written, so that a team missing
// in the org is reported at the line that names it.
type TeamRef struct {
	Slug    string `json:"slug"`
	Persona string `json:"persona"`
	// Of is the cluster or workspace name; "" for platform admins.
	Of  string   `json:"of,omitempty"`
	Pos Position `json:"position"`
}

// TeamRefs lists every team the control repo names, in file and line
// order.
func (r *Repo) TeamRefs() []TeamRef {
	var out []TeamRef
	if p := r.Platform; p != nil {
		for i, t := range p.Spec.Admins {
			out = append(out, TeamRef{Slug: t, Persona: PersonaPlatformAdmin, Pos: p.Source.At(fmt.Sprintf("spec.admins.%d", i))})
		}
	}
	if p := r.Platform; p != nil && p.Spec.Access.BranchRules != nil {
		for i, b := range p.Spec.Access.BranchRules.Bypass {
			if b.Team != "" {
				out = append(out, TeamRef{Slug: b.Team, Persona: PersonaBypass, Pos: p.Source.At(fmt.Sprintf("spec.access.branchRules.bypass.%d.team", i))})
			}
		}
	}
	for _, c := range r.Clusters {
		for i, t := range c.Spec.Admins {
			out = append(out, TeamRef{Slug: t, Persona: PersonaClusterAdmin, Of: c.Metadata.Name, Pos: c.Source.At(fmt.Sprintf("spec.admins.%d", i))})
		}
	}
	for _, w := range r.Workspaces {
		for i, t := range w.Spec.Admins {
			out = append(out, TeamRef{Slug: t, Persona: PersonaWorkspaceAdmin, Of: w.Metadata.Name, Pos: w.Source.At(fmt.Sprintf("spec.admins.%d", i))})
		}
	}
	sort.SliceStable(out, func(a, b int) bool {
		if out[a].Pos.File != out[b].Pos.File {
			return out[a].Pos.File < out[b].Pos.File
		}
		return out[a].Pos.Line < out[b].Pos.Line
	})
	return out
}

// MissingTeams returns an issue for every team the control repo names that
// exists reports missing: each at the file and line that names it, so the
// fix (create the team, or correct the slug) is one click away.
func (r *Repo) MissingTeams(owner string, exists func(slug string) bool) Issues {
	if r.allTeamsExist(exists) {
		// The common case, on every reconcile (each drift job of a service): no positions to
		// look up, which for a 1,000-cluster fleet cost more than the rest of a one-repo plan.
		return nil
	}
	var is Issues
	for _, ref := range r.TeamRefs() {
		if exists(ref.Slug) {
			continue
		}
		what := ref.Persona + "s"
		if ref.Of != "" {
			what = ref.Persona + "s of " + ref.Of
		}
		is.Add(ref.Pos, fmt.Sprintf("create the team in %s or correct the slug; it is listed as %s", owner, what),
			"team %q does not exist in org %s", ref.Slug, owner)
	}
	is.Sort()
	return is
}

// allTeamsExist reports whether exists holds for every team the control repo names.
func (r *Repo) allTeamsExist(exists func(slug string) bool) bool {
	all := func(slugs []string) bool {
		for _, t := range slugs {
			if !exists(t) {
				return false
			}
		}
		return true
	}
	if p := r.Platform; p != nil && !all(p.Spec.Admins) {
		return false
	}
	if p := r.Platform; p != nil && p.Spec.Access.BranchRules != nil {
		for _, b := range p.Spec.Access.BranchRules.Bypass {
			if b.Team != "" && !exists(b.Team) {
				return false
			}
		}
	}
	for _, c := range r.Clusters {
		if !all(c.Spec.Admins) {
			return false
		}
	}
	for _, w := range r.Workspaces {
		if !all(w.Spec.Admins) {
			return false
		}
	}
	return true
}
