package policy

import "strings"

// Org is what access convergence needs to know about the account that owns
// the repos, read once per run: which teams exist (a team named in the
// control repo but missing in the org is an error, never a silent skip),
// which repos are archived (read-only: skipped and reported) and who
// fleetbot itself is (never removed).
type Org struct {
	// Name is the org (or user) login.
	Name string `json:"name"`
	// Teams are the org's team slugs; nil when the forge cannot list them,
	// in which case every team is taken to exist.
	Teams []string `json:"teams,omitempty"`
	// Archived are the names of the owner's archived repos.
	Archived []string `json:"archived,omitempty"`
	// Self are the logins fleetbot acts as: protected from removal like the
	// platform admin teams.
	Self []string `json:"self,omitempty"`
	// BaseRole is the role every member of the org holds on every repo of it (GitHub's base
	// permission, default_repository_permission: read is pull, write is push); "" when there is
	// none or the forge cannot read it (GitHub shows it to organization administrators only).
	BaseRole Role `json:"baseRole,omitempty"`
}

// CoveredByBase reports whether a team grant of role is redundant in an org whose members all
// hold base on every repo: a team's members are org members, so base already gives them
// role. Only read-only roles (pull, triage) are covered: a team granted push or more may be a
// code owner, and GitHub counts a team as a code owner only when the team itself has write
// access, "even if all the individual members of the team already have write permissions
// directly, through organization membership, or through another team membership"
// (https://docs.github.com/repositories/managing-your-repositorys-settings-and-features/customizing-your-repository/about-code-owners).
func CoveredByBase(role, base Role) bool {
	return Rank(role) > 0 && Rank(role) < Rank(RolePush) && Rank(base) >= Rank(role)
}

// TeamsToGrant are the teams of desired that need a grant of their own in an org whose base
// role is base: those CoveredByBase leaves out.
func TeamsToGrant(desired map[string]Role, base Role) map[string]Role {
	out := make(map[string]Role, len(desired))
	for slug, role := range desired {
		if !CoveredByBase(role, base) {
			out[slug] = role
		}
	}
	return out
}

// HasTeam reports whether the org has the team slug. Slugs compare
// case-insensitively, as on GitHub. An org whose teams are unknown has
// every team.
func (o Org) HasTeam(slug string) bool {
	if o.Teams == nil {
		return true
	}
	return containsFold(o.Teams, slug)
}

// IsArchived reports whether repo (a name without the owner) is archived.
func (o Org) IsArchived(repo string) bool { return containsFold(o.Archived, repo) }

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
