package github

import (
	"context"
	"strings"
	"sync"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// orgSeen is what the latest read of an owner (Org or Scan, once per run) found: its team slugs
// (lower-case; nil for a user account or an unread owner) and its base role. A new repo is
// checked against it instead of reading each of its teams again, and given no grant its base
// role covers.
type orgSeen struct {
	teams map[string]bool
	// teamIDs are the teams' ids by lower-case slug (a ruleset names a bypass team by id).
	teamIDs map[string]int64
	base    policy.Role

	mu sync.Mutex
	// rulesetsReason is why the owner's repos have no rulesets ("" while unknown or they
	// have), rulesetsPlan whether the reason is the organization's plan (which takes branch
	// protection too): found once per run, then said of every repo without a request.
	rulesetsReason string
	rulesetsPlan   bool
	// org is the org ruleset this run read or wrote (orgLoaded: read at all).
	org       *policy.Ruleset
	orgLoaded bool
	// probed is set once a ruleset write of this run succeeded.
	probed bool
	// schemaDone is set once the org defines the custom properties fleetbot sets.
	schemaDone bool
	// orgMu serialises the writes of the org ruleset and of the property schema.
	orgMu sync.Mutex
}

func (s *orgSeen) unavailable() (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rulesetsReason, s.rulesetsPlan
}

func (s *orgSeen) setUnavailable(reason string, plan bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rulesetsReason, s.rulesetsPlan = reason, plan
}

func (s *orgSeen) orgRuleset() (*policy.Ruleset, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.org.Clone(), s.orgLoaded
}

func (s *orgSeen) setOrgRuleset(r *policy.Ruleset) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.org, s.orgLoaded = r.Clone(), true
}

// rememberOrg keeps what a read of the owner found, for the rest of the run: a new run starts
// from what it reads (rulesets found unavailable, the org ruleset, the property schema are
// read again).
func (k *known) rememberOrg(o policy.Org, teamIDs map[string]int64) {
	seen := &orgSeen{base: o.BaseRole, teamIDs: teamIDs}
	if o.Teams != nil {
		seen.teams = make(map[string]bool, len(o.Teams))
		for _, t := range o.Teams {
			seen.teams[strings.ToLower(t)] = true
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.orgs == nil {
		k.orgs = map[string]*orgSeen{}
	}
	k.orgs[strings.ToLower(o.Name)] = seen
}

// seenOrg is what the latest read of owner found; nil when this forge has not read it.
func (k *known) seenOrg(owner string) *orgSeen {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.orgs[strings.ToLower(owner)]
}

// teamsExist checks that the org has every team of a new repo's access: against the team list
// this run read (no request), or, for an owner not read yet, one read per team. A missing team
// is an error before anything is created, not half a repo.
//
// GitHub API docs: https://docs.github.com/rest/teams/teams#get-a-team-by-name
func (f *Forge) teamsExist(ctx context.Context, owner, full string, teams map[string]policy.Role) error {
	seen := f.seenOrg(owner)
	for slug := range teams {
		if seen != nil && seen.teams != nil {
			if !seen.teams[strings.ToLower(slug)] {
				return missingTeam(full, slug, owner)
			}
			continue
		}
		if _, _, err := f.api.Teams.GetTeamBySlug(ctx, owner, slug); IsNotFound(err) {
			return missingTeam(full, slug, owner)
		} else if err != nil {
			return errf(err, "reading team "+slug+" of", owner)
		}
	}
	return nil
}

func missingTeam(full, slug, owner string) error {
	return &teamMissingError{full: full, slug: slug, owner: owner}
}

// teamMissingError says which team a new repo names that the org lacks; it wraps ErrTeamMissing.
type teamMissingError struct{ full, slug, owner string }

func (e *teamMissingError) Error() string {
	return "creating repo " + e.full + ": team " + e.slug + ": " + ErrTeamMissing.Error() + ": create the team in " + e.owner + " or fix the control repo"
}

func (e *teamMissingError) Unwrap() error { return ErrTeamMissing }

// baseRole is the base role of owner as this run read it ("" when unknown).
func (f *Forge) baseRole(owner string) policy.Role {
	if seen := f.seenOrg(owner); seen != nil {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		return seen.base
	}
	return ""
}

// baseRoleOf maps GitHub's default_repository_permission to the role it gives every member.
func baseRoleOf(perm string) policy.Role {
	switch perm {
	case "read":
		return policy.RolePull
	case "write":
		return policy.RolePush
	case "admin":
		return policy.RoleAdmin
	}
	return ""
}

// planRefused is GitHub Free's refusal of branch protection and rulesets as this run first met
// it on owner's repos ("" when it did not): every other repo of the run is taken to be refused
// the same way, without a request (fleetbot's repos share one visibility, spec.repos.visibility).
func (f *Forge) planRefused(owner string) string {
	if seen := f.seenOrg(owner); seen != nil {
		if reason, plan := seen.unavailable(); plan {
			return reason
		}
	}
	return ""
}

// notePlanRefused remembers GitHub Free's refusal for the rest of the run.
func (f *Forge) notePlanRefused(owner, reason string) {
	if seen := f.seenOrg(owner); seen != nil {
		seen.setUnavailable(reason, true)
	}
}

func (s *orgSeen) isProbed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probed
}

func (s *orgSeen) setProbed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probed = true
}
