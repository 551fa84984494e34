// Package policy turns the persona model (platform admins, workspace admins,
// cluster admins) into what a code host enforces: team roles per repo,
// CODEOWNERS and branch protection. It is pure: plain values in, plain
// values out, and a Diff that says how an observed state drifts from the
// desired one.
package policy

import (
	"fmt"
	"maps"
	"slices"
)

// Role is a GitHub repository role granted to a team.
type Role string

// GitHub repository roles, weakest first.
const (
	RolePull     Role = "pull"
	RoleTriage   Role = "triage"
	RolePush     Role = "push"
	RoleMaintain Role = "maintain"
	RoleAdmin    Role = "admin"
)

// Protection is the branch protection fleetbot requires on a default branch.
type Protection struct {
	Branch                  string `json:"branch"`
	RequirePullRequest      bool   `json:"requirePullRequest"`
	RequireCodeOwnerReviews bool   `json:"requireCodeOwnerReviews"`
	DismissStaleReviews     bool   `json:"dismissStaleReviews"`
	RequiredApprovals       int    `json:"requiredApprovals"`
	AllowForcePushes        bool   `json:"allowForcePushes"`
	AllowDeletions          bool   `json:"allowDeletions"`
	// RequiredChecks are the status checks a pull request's head must pass before it merges
	// (GitHub's required_status_checks.checks), sorted by context. Desired: the checks
	// fleetbot itself posts (serve's tenant check on workspace and cluster repos); observed:
	// every check the branch requires, which a fix of other drift keeps.
	RequiredChecks []RequiredCheck `json:"requiredChecks,omitempty"`
	// StrictChecks is GitHub's "require branches to be up to date before merging" (observed
	// only: fleetbot keeps what it finds).
	StrictChecks bool `json:"strictChecks,omitempty"`
}

// RequiredCheck is one required status check: a check run (or commit status) named Context,
// which GitHub accepts from the GitHub App AppID only when AppID is set. Bound to fleetbot's
// own App, no repo admin can satisfy it with a workflow, another App or a commit status of the
// same name.
type RequiredCheck struct {
	Context string `json:"context"`
	// AppID is the GitHub App that must provide the check; 0 accepts any source.
	AppID int64 `json:"appId,omitempty"`
}

// String says which check and from whom: `"fleetbot tenant" from GitHub App 12`.
func (c RequiredCheck) String() string {
	if c.AppID > 0 {
		return fmt.Sprintf("%q from GitHub App %d", c.Context, c.AppID)
	}
	return fmt.Sprintf("%q from any source", c.Context)
}

// Access is the desired (or observed) access state of one repo.
type Access struct {
	// Teams maps a team slug to its role on the repo.
	Teams map[string]Role `json:"teams"`
	// Protection of the default branch; nil when observed unprotected.
	Protection *Protection `json:"protection,omitempty"`
	// Collaborators maps a direct collaborator's login to its role (observed
	// state only: fleetbot never grants direct collaborators).
	Collaborators map[string]Role `json:"collaborators,omitempty"`
	// AllowAutoMerge is the repo setting "Allow auto-merge": desired when the
	// platform's pullRequests.merge is auto (GitHub's default is off, and
	// auto-merge cannot be enabled on a pull request without it).
	AllowAutoMerge bool `json:"allowAutoMerge,omitempty"`
	// ProtectionUnavailable, when set, is the forge's word for why the default branch cannot
	// be protected at all (GitHub: a private repository of an organization on the free plan).
	// Diff then plans no protection, and the reconcile reports it as a warning.
	ProtectionUnavailable string `json:"protectionUnavailable,omitempty"`
	// Rules (desired only), when set, enforce Protection as a ruleset (BranchRuleset) instead of
	// a classic branch protection, where the forge has rulesets.
	Rules *Rules `json:"rules,omitempty"`
	// Ruleset is the ruleset named RulesetName that applies to the default branch (observed;
	// the org's when Rules.Organization); nil when there is none.
	Ruleset *Ruleset `json:"ruleset,omitempty"`
	// RulesetsUnavailable, when set, is the forge's word for why it has no rulesets (GitHub
	// Enterprise Server before rulesets: 404; a private repo on GitHub Free: 403, which also
	// sets ProtectionUnavailable). Diff then enforces Protection as a classic branch protection.
	RulesetsUnavailable string `json:"rulesetsUnavailable,omitempty"`
	// Properties are the repo's custom property values fleetbot sets (desired: those an org
	// ruleset targets; observed: those of the repo).
	Properties map[string]string `json:"properties,omitempty"`
}

// Clone returns a deep copy of a.
func (a Access) Clone() Access {
	c := a
	c.Teams, c.Collaborators = maps.Clone(a.Teams), maps.Clone(a.Collaborators)
	c.Properties = maps.Clone(a.Properties)
	c.Ruleset = a.Ruleset.Clone()
	if a.Rules != nil {
		r := *a.Rules
		r.Bypass = slices.Clone(r.Bypass)
		c.Rules = &r
	}
	if a.Protection != nil {
		p := *a.Protection
		p.RequiredChecks = slices.Clone(p.RequiredChecks)
		c.Protection = &p
	}
	return c
}
