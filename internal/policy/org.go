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
