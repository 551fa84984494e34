package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// Rulesets and custom properties (declared branch rules, platform spec.access.branchRules). The
// wire types are fleetbot's own: go-github v62 has no repository_property condition.
//
// GitHub API docs: https://docs.github.com/rest/repos/rules
// GitHub API docs: https://docs.github.com/rest/orgs/rules
// GitHub API docs: https://docs.github.com/rest/repos/custom-properties
// GitHub API docs: https://docs.github.com/rest/orgs/custom-properties

// wireRuleset is a branch ruleset as GitHub's REST API reads and writes it.
type wireRuleset struct {
	ID          int64  `json:"id,omitempty"`
	Name        string `json:"name"`
	Target      string `json:"target,omitempty"`
	SourceType  string `json:"source_type,omitempty"`
	Enforcement string `json:"enforcement"`
	// BypassActors is always sent (an update without it keeps the actors it had).
	BypassActors []wireBypassActor `json:"bypass_actors"`
	Conditions   *wireConditions   `json:"conditions,omitempty"`
	Rules        []wireRule        `json:"rules,omitempty"`
}

type wireBypassActor struct {
	ActorID    *int64 `json:"actor_id,omitempty"`
	ActorType  string `json:"actor_type"`
	BypassMode string `json:"bypass_mode,omitempty"`
}

type wireConditions struct {
	RefName            *wireRefName            `json:"ref_name,omitempty"`
	RepositoryProperty *wireRepositoryProperty `json:"repository_property,omitempty"`
}

type wireRefName struct {
	Include []string `json:"include"`
	Exclude []string `json:"exclude"`
}

type wireRepositoryProperty struct {
	Include []wirePropertySpec `json:"include"`
	Exclude []wirePropertySpec `json:"exclude"`
}

type wirePropertySpec struct {
	Name           string   `json:"name"`
	PropertyValues []string `json:"property_values"`
}

type wireRule struct {
	Type       string          `json:"type"`
	Parameters *wireParameters `json:"parameters,omitempty"`
}

// wireParameters are the parameters of the pull_request and required_status_checks rules.
type wireParameters struct {
	// pull_request
	DismissStaleReviewsOnPush      *bool `json:"dismiss_stale_reviews_on_push,omitempty"`
	RequireCodeOwnerReview         *bool `json:"require_code_owner_review,omitempty"`
	RequireLastPushApproval        *bool `json:"require_last_push_approval,omitempty"`
	RequiredApprovingReviewCount   *int  `json:"required_approving_review_count,omitempty"`
	RequiredReviewThreadResolution *bool `json:"required_review_thread_resolution,omitempty"`
	// required_status_checks
	RequiredStatusChecks             []wireStatusCheck `json:"required_status_checks,omitempty"`
	StrictRequiredStatusChecksPolicy *bool             `json:"strict_required_status_checks_policy,omitempty"`
}

type wireStatusCheck struct {
	Context       string `json:"context"`
	IntegrationID *int64 `json:"integration_id,omitempty"`
}

// repositoryRoleIDs are GitHub's ids of the repository roles a ruleset's bypass_actors name
// (RepositoryRole): maintain 2, write 4, admin 5.
// https://docs.github.com/rest/repos/rules#create-a-repository-ruleset
var repositoryRoleIDs = map[string]int64{"maintain": 2, "write": 4, "admin": 5}

// toWire is the ruleset fleetbot writes for r: the default branch (~DEFAULT_BRANCH, or, for the
// org ruleset, the property-targeted repos' default branch), pull requests required with
// r's reviews, r's required checks, force pushes and deletion blocked (non_fast_forward,
// deletion) unless allowed, and r's bypass actors, always.
func (f *Forge) toWire(owner string, r *policy.Ruleset) (*wireRuleset, error) {
	w := &wireRuleset{Name: policy.RulesetName, Target: "branch", Enforcement: "active", BypassActors: []wireBypassActor{},
		Conditions: &wireConditions{RefName: &wireRefName{Include: []string{"~DEFAULT_BRANCH"}, Exclude: []string{}}}}
	if r.Organization {
		rp := &wireRepositoryProperty{Exclude: []wirePropertySpec{}}
		for _, k := range sortedKeys(r.Properties) {
			rp.Include = append(rp.Include, wirePropertySpec{Name: k, PropertyValues: r.Properties[k]})
		}
		w.Conditions.RepositoryProperty = rp
	}
	p := r.Protection
	if p.RequirePullRequest {
		w.Rules = append(w.Rules, wireRule{Type: "pull_request", Parameters: &wireParameters{
			DismissStaleReviewsOnPush: gh.Bool(p.DismissStaleReviews), RequireCodeOwnerReview: gh.Bool(p.RequireCodeOwnerReviews),
			RequireLastPushApproval: gh.Bool(false), RequiredApprovingReviewCount: gh.Int(p.RequiredApprovals),
			RequiredReviewThreadResolution: gh.Bool(false),
		}})
	}
	if len(p.RequiredChecks) > 0 {
		params := &wireParameters{StrictRequiredStatusChecksPolicy: gh.Bool(p.StrictChecks)}
		for _, c := range p.RequiredChecks {
			sc := wireStatusCheck{Context: c.Context}
			if c.AppID > 0 {
				sc.IntegrationID = gh.Int64(c.AppID)
			}
			params.RequiredStatusChecks = append(params.RequiredStatusChecks, sc)
		}
		w.Rules = append(w.Rules, wireRule{Type: "required_status_checks", Parameters: params})
	}
	if !p.AllowForcePushes {
		w.Rules = append(w.Rules, wireRule{Type: "non_fast_forward"})
	}
	if !p.AllowDeletions {
		w.Rules = append(w.Rules, wireRule{Type: "deletion"})
	}
	seen := f.seenOrg(owner)
	for _, b := range r.Bypass {
		a := wireBypassActor{ActorType: b.Type, BypassMode: "always"}
		switch b.Type {
		case policy.BypassTeam:
			id, ok := int64(0), false
			if seen != nil {
				id, ok = seen.teamIDs[strings.ToLower(b.Name)]
			}
			if !ok {
				return nil, fmt.Errorf("%w: bypass actor team %s of the branch rules: create the team in %s or fix spec.access.branchRules.bypass", ErrTeamMissing, b.Name, owner)
			}
			a.ActorID = gh.Int64(id)
		case policy.BypassApp:
			a.ActorID = gh.Int64(b.AppID)
		case policy.BypassRole:
			a.ActorID = gh.Int64(repositoryRoleIDs[b.Name])
		}
		w.BypassActors = append(w.BypassActors, a)
	}
	return w, nil
}

// fromWire reads a ruleset GitHub answered into policy terms, for branch.
func (f *Forge) fromWire(owner, branch string, w *wireRuleset) *policy.Ruleset {
	r := &policy.Ruleset{ID: w.ID, Organization: w.SourceType == "Organization", Enforcement: w.Enforcement,
		Protection: policy.Protection{Branch: branch, AllowForcePushes: true, AllowDeletions: true}}
	if w.Conditions != nil && w.Conditions.RefName != nil && !slices.Contains(w.Conditions.RefName.Include, "~DEFAULT_BRANCH") &&
		!slices.Contains(w.Conditions.RefName.Include, "refs/heads/"+branch) && !slices.Contains(w.Conditions.RefName.Include, "~ALL") {
		r.Protection.Branch = "" // it does not cover the default branch
	}
	if w.Conditions != nil && w.Conditions.RepositoryProperty != nil {
		r.Properties = map[string][]string{}
		for _, p := range w.Conditions.RepositoryProperty.Include {
			r.Properties[p.Name] = slices.Clone(p.PropertyValues)
		}
	}
	for _, rule := range w.Rules {
		p := rule.Parameters
		switch rule.Type {
		case "non_fast_forward":
			r.Protection.AllowForcePushes = false
		case "deletion":
			r.Protection.AllowDeletions = false
		case "pull_request":
			r.Protection.RequirePullRequest = true
			if p != nil {
				r.Protection.DismissStaleReviews = p.DismissStaleReviewsOnPush != nil && *p.DismissStaleReviewsOnPush
				r.Protection.RequireCodeOwnerReviews = p.RequireCodeOwnerReview != nil && *p.RequireCodeOwnerReview
				if p.RequiredApprovingReviewCount != nil {
					r.Protection.RequiredApprovals = *p.RequiredApprovingReviewCount
				}
			}
		case "required_status_checks":
			if p == nil {
				continue
			}
			r.Protection.StrictChecks = p.StrictRequiredStatusChecksPolicy != nil && *p.StrictRequiredStatusChecksPolicy
			for _, c := range p.RequiredStatusChecks {
				var app int64
				if c.IntegrationID != nil {
					app = *c.IntegrationID
				}
				r.Protection.RequiredChecks = append(r.Protection.RequiredChecks, policy.RequiredCheck{Context: c.Context, AppID: app})
			}
		}
	}
	slices.SortFunc(r.Protection.RequiredChecks, func(a, b policy.RequiredCheck) int { return strings.Compare(a.Context, b.Context) })
	seen := f.seenOrg(owner)
	for _, a := range w.BypassActors {
		b := policy.BypassActor{Type: a.ActorType, Mode: a.BypassMode}
		var id int64
		if a.ActorID != nil {
			id = *a.ActorID
		}
		switch a.ActorType {
		case policy.BypassTeam:
			b.Name = fmt.Sprintf("id %d", id)
			if seen != nil {
				for slug, tid := range seen.teamIDs {
					if tid == id {
						b.Name = slug
					}
				}
			}
		case policy.BypassApp:
			b.AppID = id
		case policy.BypassRole:
			b.Name = fmt.Sprintf("id %d", id)
			for name, rid := range repositoryRoleIDs {
				if rid == id {
					b.Name = name
				}
			}
		}
		r.Bypass = append(r.Bypass, b)
	}
	return r
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// rulesetsPath is the rulesets collection of a repo, or of the org.
func rulesetsPath(owner, repo string, org bool) string {
	if org {
		return "orgs/" + owner + "/rulesets"
	}
	return "repos/" + owner + "/" + repo + "/rulesets"
}

// readRuleset finds the ruleset named policy.RulesetName of a repo (its own) or of the org:
// one listing, then the ruleset itself (the listing does not carry rules). nil when there is
// none.
func (f *Forge) readRuleset(ctx context.Context, owner, repo, branch string, org bool) (*policy.Ruleset, error) {
	base := rulesetsPath(owner, repo, org)
	req, err := f.api.NewRequest(http.MethodGet, base+"?per_page=100", nil)
	if err != nil {
		return nil, err
	}
	var list []wireRuleset
	if _, err := f.api.Do(ctx, req, &list); err != nil {
		return nil, err
	}
	for _, w := range list {
		if w.Name != policy.RulesetName || (!org && w.SourceType == "Organization") {
			continue
		}
		req, err := f.api.NewRequest(http.MethodGet, fmt.Sprintf("%s/%d", base, w.ID), nil)
		if err != nil {
			return nil, err
		}
		var full wireRuleset
		if _, err := f.api.Do(ctx, req, &full); err != nil {
			return nil, err
		}
		return f.fromWire(owner, branch, &full), nil
	}
	return nil, nil
}

// writeRuleset creates (ID 0) or updates the ruleset r of a repo or of the org.
func (f *Forge) writeRuleset(ctx context.Context, owner, repo string, r *policy.Ruleset) (int64, error) {
	w, err := f.toWire(owner, r)
	if err != nil {
		return 0, err
	}
	base := rulesetsPath(owner, repo, r.Organization)
	method, path := http.MethodPost, base
	if r.ID != 0 {
		method, path = http.MethodPut, fmt.Sprintf("%s/%d", base, r.ID)
	}
	req, err := f.api.NewRequest(method, path, w)
	if err != nil {
		return 0, err
	}
	var got wireRuleset
	if _, err := f.api.Do(ctx, req, &got); err != nil {
		return 0, err
	}
	return got.ID, nil
}

// rulesetsUnavailable says why a ruleset request's error means the forge has no rulesets for
// owner's repos: 404 (a GitHub Enterprise Server older than rulesets), or GitHub Free's 403 on
// a private repo (which also takes branch protection). ok is false for any other error.
func rulesetsUnavailable(err error) (reason string, plan bool, ok bool) {
	if r, unavailable := protectionUnavailable(err); unavailable {
		return r, true, true
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound {
		return "GitHub answered 404 to the rulesets API (a GitHub Enterprise Server without rulesets): the rules are enforced as classic branch protection", false, true
	}
	return "", false, false
}

// observeRuleset reads the ruleset that enforces desired's branch rules: the repo's own, or the
// org's (read once per run, see orgSeen). Rulesets this run found unavailable for the owner are
// not asked for again: the repo then reports the same reason, with no request.
func (f *Forge) observeRuleset(ctx context.Context, owner, repo, branch string, desired policy.Access, a *policy.Access) error {
	org := desired.Rules.Organization
	seen := f.seenOrg(owner)
	if seen != nil {
		if reason, plan := seen.unavailable(); reason != "" {
			a.RulesetsUnavailable = reason
			if plan {
				a.ProtectionUnavailable = reason
			}
			return nil
		}
		if org {
			if r, ok := seen.orgRuleset(); ok {
				a.Ruleset = r
				return nil
			}
		}
	}
	r, err := f.readRuleset(ctx, owner, repo, branch, org)
	if reason, plan, ok := rulesetsUnavailable(err); ok {
		a.RulesetsUnavailable = reason
		if plan {
			a.ProtectionUnavailable = reason
		}
		if seen != nil {
			seen.setUnavailable(reason, plan)
		}
		return nil
	}
	if err != nil {
		where := owner + "/" + repo
		if org {
			return fmt.Errorf("reading the organization ruleset %s of %s (the App needs the organization permission Administration: read, or set spec.access.branchRules.organization to false): %w",
				policy.RulesetName, owner, err)
		}
		return errf(err, "reading the rulesets of", where)
	}
	if org && seen != nil {
		seen.setOrgRuleset(r)
	}
	a.Ruleset = r
	return nil
}

// applyRuleset writes the plan's ruleset: the repo's own, or the org's, once per run whatever
// how many repos planned it (the first write converges it for all). A ruleset GitHub's plan
// refuses is remembered as unavailable, as a protection is.
func (f *Forge) applyRuleset(ctx context.Context, owner, repo string, e *repoEntry, r *policy.Ruleset) error {
	seen := f.seenOrg(owner)
	if seen != nil && (r.Organization || !seen.isProbed()) {
		// The org ruleset is written once; a repo's first ruleset write of the run is the
		// probe of whether the owner has rulesets at all, which the others wait for, so that a
		// refusal is met once per run, not by every repo written at the same time.
		seen.orgMu.Lock()
		defer seen.orgMu.Unlock()
		if reason, plan := seen.unavailable(); reason != "" {
			if plan {
				e.protectionUnavailable = reason
				return nil
			}
			return fmt.Errorf("writing ruleset %s on %s/%s: %s", policy.RulesetName, owner, repo, reason)
		}
		if done, ok := seen.orgRuleset(); r.Organization && ok && done != nil && done.ID != 0 && sameRuleset(done, r) {
			return nil
		}
	}
	id, err := f.writeRuleset(ctx, owner, repo, r)
	if err == nil && seen != nil {
		seen.setProbed()
	}
	if reason, plan, ok := rulesetsUnavailable(err); ok {
		if seen != nil {
			seen.setUnavailable(reason, plan)
		}
		if plan {
			e.protectionUnavailable = reason
			return nil
		}
		return fmt.Errorf("writing ruleset %s on %s/%s: %s", policy.RulesetName, owner, repo, reason)
	}
	if err != nil {
		if r.Organization {
			return fmt.Errorf("writing the organization ruleset %s of %s (the App needs the organization permission Administration: write, or set spec.access.branchRules.organization to false): %w",
				policy.RulesetName, owner, err)
		}
		return errf(err, "writing ruleset "+policy.RulesetName+" on", owner+"/"+repo)
	}
	if r.Organization && seen != nil {
		done := r.Clone()
		done.ID = id
		seen.setOrgRuleset(done)
	}
	return nil
}

// sameRuleset: a and b enforce the same (ids aside).
func sameRuleset(a, b *policy.Ruleset) bool {
	x, y := a.Clone(), b.Clone()
	x.ID, y.ID = 0, 0
	return fmt.Sprintf("%+v", *x) == fmt.Sprintf("%+v", *y)
}

// bootstrapRuleset enforces a new repo's declared branch rules as its ruleset (or the org's,
// once per run); done is false when the owner has no rulesets (a GitHub Enterprise Server
// without them), and the classic branch protection is to enforce them instead. On GitHub Free
// the plan's refusal is remembered (see ProtectionUnavailable) and done is true: a classic
// protection would be refused the same way.
func (f *Forge) bootstrapRuleset(ctx context.Context, owner, repo string, e *repoEntry, rs *policy.Ruleset) (done bool, err error) {
	if seen := f.seenOrg(owner); seen != nil {
		if reason, plan := seen.unavailable(); reason != "" {
			if plan {
				e.protectionUnavailable = reason
			}
			return plan, nil
		}
	}
	if rs.Organization {
		// The org ruleset may exist already: read it once per run, update it if it differs.
		var a policy.Access
		if err := f.observeRuleset(ctx, owner, repo, rs.Protection.Branch, policy.Access{Rules: &policy.Rules{Organization: true}}, &a); err != nil {
			return false, err
		}
		if a.RulesetsUnavailable != "" {
			if a.ProtectionUnavailable != "" {
				e.protectionUnavailable = a.ProtectionUnavailable
				return true, nil
			}
			return false, nil
		}
		if a.Ruleset != nil {
			if sameRuleset(a.Ruleset, rs) {
				return true, nil
			}
			rs = rs.Clone()
			rs.ID = a.Ruleset.ID
		}
	}
	err = f.applyRuleset(ctx, owner, repo, e, rs)
	if err != nil {
		if seen := f.seenOrg(owner); seen != nil {
			if reason, plan := seen.unavailable(); reason != "" && !plan {
				return false, nil
			}
		}
		return false, err
	}
	return true, nil
}
