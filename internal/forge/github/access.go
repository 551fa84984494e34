package github

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// ErrTeamMissing is returned when the access matrix names a team the org does not have: an
// error, never a silent skip (DESIGN §4).
var ErrTeamMissing = errors.New("team does not exist in the organization")

// Access implements reconcile.Forge: the repo's team roles, the protection of its default
// branch and its direct collaborators (three reads). An observation younger than
// ForgeOptions.AccessMaxAge is reused without any request; see DefaultAccessMaxAge.
//
// With declared branch rules (desired.Rules) it also reads the ruleset that enforces them (the
// repo's, or the org's once per run), and with desired custom properties the repo's values:
// neither is cached across runs.
func (f *Forge) Access(ctx context.Context, owner, repo string, desired policy.Access) (policy.Access, error) {
	a, err := f.accessCore(ctx, owner, repo)
	if err != nil {
		return a, err
	}
	if desired.Rules != nil && desired.Protection != nil {
		if err := f.observeRuleset(ctx, owner, repo, desired.Protection.Branch, desired, &a); err != nil {
			return policy.Access{}, err
		}
	}
	if desired.Properties != nil {
		if err := f.observeProperties(ctx, owner, repo, &a); err != nil {
			return policy.Access{}, err
		}
	}
	return a, nil
}

// accessCore reads (or reuses, within AccessMaxAge) the teams, collaborators, protection and
// repo settings.
func (f *Forge) accessCore(ctx context.Context, owner, repo string) (policy.Access, error) {
	e, unlock := f.entry(owner, repo)
	defer unlock()
	st := e.state()
	if st.Access != nil && f.opts.AccessMaxAge > 0 && f.opts.Now().Unix()-st.AccessAt < int64(f.opts.AccessMaxAge.Seconds()) {
		a := cloneAccess(*st.Access)
		if e.autoMergeSeen != nil {
			a.AllowAutoMerge = *e.autoMergeSeen
		}
		return a, nil
	}
	branch := st.DefaultBranch
	autoMerge := e.autoMergeSeen
	if branch == "" || autoMerge == nil {
		r, _, err := f.api.Repositories.Get(ctx, owner, repo)
		if err != nil {
			return policy.Access{}, errf(err, "reading repo", owner+"/"+repo)
		}
		if branch == "" {
			branch = r.GetDefaultBranch()
		}
		if autoMerge == nil {
			autoMerge = gh.Bool(r.GetAllowAutoMerge())
		}
	}
	a, err := f.readAccess(ctx, owner, repo, branch)
	if err != nil {
		return policy.Access{}, err
	}
	a.AllowAutoMerge = *autoMerge
	st.Access, st.AccessAt = &a, f.opts.Now().Unix()
	f.saveState(owner, repo, st)
	return cloneAccess(a), nil
}

// accessUnit is how the GitHub forge observes and applies one access unit (policy.Unit):
// observe reads the unit's setting into the access (the repo's record, read first, gave the
// default branch and the repo settings), give applies what the plan adds or raises, and take
// what it removes or lowers, which waits until every unit gave (and is skipped when the plan was
// refused by its removal limit: Plan.Refused). A nil step has nothing to do on GitHub.
type accessUnit struct {
	unit    policy.UnitName
	observe func(f *Forge, ctx context.Context, r accessRepo, a *policy.Access) error
	give    func(f *Forge, ctx context.Context, r accessRepo, p policy.Plan) error
	take    func(f *Forge, ctx context.Context, r accessRepo, p policy.Plan) error
}

// accessRepo is the repo an accessUnit works on: owner, name, its default branch (observe
// only) and its cache entry (locked by the caller).
type accessRepo struct {
	owner, repo, branch string
	e                   *repoEntry
}

func (r accessRepo) full() string { return r.owner + "/" + r.repo }

// accessUnits are the units in the order they are applied: the protection first (a repo whose
// bootstrap was interrupted gets it before any team can push), then the teams' grants and raised
// roles, then the repo settings; then, what each takes away (revoked and lowered teams, then
// direct collaborators). They are observed in the same order. Every policy.Unit has one entry
// (TestAccessUnitsCoverPolicy).
var accessUnits = []accessUnit{
	// The ruleset and the custom properties are observed only when the desired access names
	// them (Access: observeRuleset, observeProperties). Like the protection they are given
	// first, the properties before the org ruleset that targets the repo by them.
	{unit: policy.UnitProperties, give: giveProperties},
	{unit: policy.UnitRuleset, give: giveRuleset},
	{unit: policy.UnitProtection, observe: observeProtection, give: giveProtection},
	{unit: policy.UnitTeams, observe: observeTeams, give: giveTeams, take: takeTeams},
	{unit: policy.UnitRepoSettings, give: giveRepoSettings}, // observed with the repo's record
	{unit: policy.UnitCollaborators, observe: observeCollaborators, take: takeCollaborators},
}

// giveRuleset writes the plan's ruleset (the repo's own, or the org's once per run).
func giveRuleset(f *Forge, ctx context.Context, r accessRepo, p policy.Plan) error {
	if p.Ruleset == nil {
		return nil
	}
	return f.applyRuleset(ctx, r.owner, r.repo, r.e, p.Ruleset)
}

// accessReadOrder is the order of the reads (each one request or one listing): teams,
// collaborators, then the protection, as GitHub's answers were always read.
var accessReadOrder = []policy.UnitName{policy.UnitTeams, policy.UnitCollaborators, policy.UnitProtection}

// readAccess observes every unit that has a read of its own, in accessReadOrder.
func (f *Forge) readAccess(ctx context.Context, owner, repo, branch string) (policy.Access, error) {
	r := accessRepo{owner: owner, repo: repo, branch: branch}
	a := policy.Access{Teams: map[string]policy.Role{}}
	for _, name := range accessReadOrder {
		for _, u := range accessUnits {
			if u.unit != name || u.observe == nil {
				continue
			}
			if err := u.observe(f, ctx, r, &a); err != nil {
				return a, err
			}
		}
	}
	return a, nil
}

// observeTeams lists the teams that hold a role on the repo.
func observeTeams(f *Forge, ctx context.Context, r accessRepo, a *policy.Access) error {
	full := r.full()
	return EachPage(func(o gh.ListOptions) ([]*gh.Team, *gh.Response, error) {
		ts, resp, err := f.api.Repositories.ListTeams(ctx, r.owner, r.repo, &o)
		return ts, resp, errf(err, "listing the teams of", full)
	}, func(ts []*gh.Team) (bool, error) {
		for _, t := range ts {
			if t.GetSlug() == "" {
				return true, fmt.Errorf("listing the teams of %s: GitHub answered a team without a slug (id %d, name %q); fleetbot cannot tell which team holds access, so it changes nothing on this repo",
					full, t.GetID(), t.GetName())
			}
			a.Teams[t.GetSlug()] = teamRole(t)
		}
		return false, nil
	})
}

// observeCollaborators lists the repo's direct collaborators.
func observeCollaborators(f *Forge, ctx context.Context, r accessRepo, a *policy.Access) error {
	return EachPage(func(o gh.ListOptions) ([]*gh.User, *gh.Response, error) {
		us, resp, err := f.api.Repositories.ListCollaborators(ctx, r.owner, r.repo, &gh.ListCollaboratorsOptions{Affiliation: "direct", ListOptions: o})
		return us, resp, errf(err, "listing the collaborators of", r.full())
	}, func(us []*gh.User) (bool, error) {
		for _, u := range us {
			if a.Collaborators == nil {
				a.Collaborators = map[string]policy.Role{}
			}
			a.Collaborators[u.GetLogin()] = userRole(u)
		}
		return false, nil
	})
}

// observeProtection reads the protection of the default branch (none, or unavailable on the
// organization's plan).
func observeProtection(f *Forge, ctx context.Context, r accessRepo, a *policy.Access) error {
	if reason := f.planRefused(r.owner); reason != "" {
		a.ProtectionUnavailable = reason // once per run, not once per repo
		return nil
	}
	p, _, err := f.api.Repositories.GetBranchProtection(ctx, r.owner, r.repo, r.branch)
	reason, unavailable := protectionUnavailable(err)
	switch {
	case errors.Is(err, gh.ErrBranchNotProtected), IsNotFound(err):
	case unavailable:
		a.ProtectionUnavailable = reason
		f.notePlanRefused(r.owner, reason)
	case err != nil:
		return errf(err, "reading the protection of "+r.branch+" in", r.full())
	default:
		a.Protection = fromProtection(r.branch, p)
	}
	return nil
}

// giveProtection sets the protection the plan requires; a plan GitHub cannot enforce on the
// organization's plan is remembered as a warning, and the rest is applied.
func giveProtection(f *Forge, ctx context.Context, r accessRepo, p policy.Plan) error {
	if p.Protection == nil {
		return nil
	}
	if reason := f.planRefused(r.owner); reason != "" {
		r.e.protectionUnavailable = reason
		return nil
	}
	err := f.protect(ctx, r.owner, r.repo, p.Protection)
	if reason, unavailable := protectionUnavailable(err); unavailable {
		r.e.protectionUnavailable = reason
		f.notePlanRefused(r.owner, reason)
		return nil
	}
	return err
}

// giveTeams grants the plan's teams and changes their roles (not the lowered ones when the plan
// was refused by its removal limit).
func giveTeams(f *Forge, ctx context.Context, r accessRepo, p policy.Plan) error {
	grants := map[string]policy.Role{}
	for _, g := range p.Grants {
		grants[g.Name] = g.Role
	}
	for _, c := range p.Changes {
		if p.Refused != nil && policy.Rank(c.To) < policy.Rank(c.From) {
			continue
		}
		grants[c.Name] = c.To
	}
	return f.grantTeams(ctx, r.owner, r.repo, grants, nil)
}

// giveRepoSettings allows auto-merge when the plan needs it.
func giveRepoSettings(f *Forge, ctx context.Context, r accessRepo, p policy.Plan) error {
	if !p.AllowAutoMerge {
		return nil
	}
	full := r.full()
	if _, _, err := f.api.Repositories.Edit(ctx, r.owner, r.repo, &gh.Repository{AllowAutoMerge: gh.Bool(true)}); err != nil {
		return fmt.Errorf("%w: %s does not allow auto-merge and fleetbot could not allow it (the App needs administration: write, or an org admin turns on \"Allow auto-merge\"): %w",
			ErrAutoMerge, full, errf(err, "allowing auto-merge on", full))
	}
	r.e.autoMergeSeen = gh.Bool(true)
	return nil
}

// takeTeams removes the teams the plan revokes.
func takeTeams(f *Forge, ctx context.Context, r accessRepo, p policy.Plan) error {
	for _, t := range p.Revokes {
		if _, err := f.api.Teams.RemoveTeamRepoBySlug(ctx, r.owner, t.Name, r.owner, r.repo); err != nil && !IsNotFound(err) {
			return errf(err, "removing team "+t.Name+" from", r.full())
		}
	}
	return nil
}

// takeCollaborators removes the direct collaborators the plan removes.
func takeCollaborators(f *Forge, ctx context.Context, r accessRepo, p policy.Plan) error {
	for _, c := range p.RemoveCollaborators {
		if _, err := f.api.Repositories.RemoveCollaborator(ctx, r.owner, r.repo, c.Name); err != nil && !IsNotFound(err) {
			return errf(err, "removing collaborator "+c.Name+" from", r.full())
		}
	}
	return nil
}

// grantTeams gives each team its role on the repo, skipping those already at it.
//
// GitHub API docs: https://docs.github.com/rest/teams/teams#add-or-update-team-repository-permissions
func (f *Forge) grantTeams(ctx context.Context, owner, repo string, want, have map[string]policy.Role) error {
	slugs := make([]string, 0, len(want))
	for s := range want {
		slugs = append(slugs, s)
	}
	sort.Strings(slugs)
	for _, slug := range slugs {
		role := want[slug]
		if have != nil && have[slug] == role {
			continue
		}
		_, err := f.api.Teams.AddTeamRepoBySlug(ctx, owner, slug, owner, repo, &gh.TeamAddTeamRepoOptions{Permission: string(role)})
		if IsNotFound(err) {
			return fmt.Errorf("granting %s to team %s on %s/%s: %w: create the team in %s or fix the control repo",
				role, slug, owner, repo, ErrTeamMissing, owner)
		}
		if err != nil {
			return errf(err, fmt.Sprintf("granting %s to team %s on", role, slug), owner+"/"+repo)
		}
	}
	return nil
}

// protect sets the branch protection fleetbot requires.
//
// GitHub API docs: https://docs.github.com/rest/branches/branch-protection#update-branch-protection
func (f *Forge) protect(ctx context.Context, owner, repo string, p *policy.Protection) error {
	req := &gh.ProtectionRequest{
		AllowForcePushes: gh.Bool(p.AllowForcePushes),
		AllowDeletions:   gh.Bool(p.AllowDeletions),
	}
	if p.RequirePullRequest {
		req.RequiredPullRequestReviews = &gh.PullRequestReviewsEnforcementRequest{
			DismissStaleReviews:          p.DismissStaleReviews,
			RequireCodeOwnerReviews:      p.RequireCodeOwnerReviews,
			RequiredApprovingReviewCount: p.RequiredApprovals,
		}
	}
	req.RequiredStatusChecks = requiredChecks(p)
	if _, _, err := f.api.Repositories.UpdateBranchProtection(ctx, owner, repo, p.Branch, req); err != nil {
		return errf(err, "protecting "+p.Branch+" in", owner+"/"+repo)
	}
	return nil
}

// requiredChecks is the required_status_checks of a protection request: nil (no check
// required) or the checks, each bound to its App or, with app_id -1, to any source. Only
// "checks" is sent: GitHub refuses a request that also sets the deprecated "contexts" (its
// schema takes one of the two), and "contexts" alone binds a check to whichever App posted it
// last.
func requiredChecks(p *policy.Protection) *gh.RequiredStatusChecks {
	if len(p.RequiredChecks) == 0 {
		return nil
	}
	checks := make([]*gh.RequiredStatusCheck, 0, len(p.RequiredChecks))
	for _, c := range p.RequiredChecks {
		app := int64(-1)
		if c.AppID > 0 {
			app = c.AppID
		}
		checks = append(checks, &gh.RequiredStatusCheck{Context: c.Context, AppID: gh.Int64(app)})
	}
	return &gh.RequiredStatusChecks{Strict: p.StrictChecks, Checks: &checks}
}

// fromRequiredChecks reads the required status checks of a protection: its checks with their
// App (null or -1: any source), else its contexts (an older server's answer), bound to none.
func fromRequiredChecks(out *policy.Protection, rs *gh.RequiredStatusChecks) {
	if rs == nil {
		return
	}
	out.StrictChecks = rs.Strict
	seen := map[string]bool{}
	if rs.Checks != nil {
		for _, c := range *rs.Checks {
			if c == nil || seen[c.Context] {
				continue
			}
			seen[c.Context] = true
			out.RequiredChecks = append(out.RequiredChecks, policy.RequiredCheck{Context: c.Context, AppID: max(c.GetAppID(), 0)})
		}
	}
	if rs.Contexts != nil {
		for _, c := range *rs.Contexts {
			if !seen[c] {
				seen[c] = true
				out.RequiredChecks = append(out.RequiredChecks, policy.RequiredCheck{Context: c})
			}
		}
	}
	slices.SortFunc(out.RequiredChecks, func(a, b policy.RequiredCheck) int { return strings.Compare(a.Context, b.Context) })
}

func fromProtection(branch string, p *gh.Protection) *policy.Protection {
	// GitHub omits allow_force_pushes and allow_deletions on older servers and in some
	// answers; absent means not allowed (the default of a new protection).
	out := &policy.Protection{Branch: branch}
	if v := p.GetAllowForcePushes(); v != nil {
		out.AllowForcePushes = v.Enabled
	}
	if v := p.GetAllowDeletions(); v != nil {
		out.AllowDeletions = v.Enabled
	}
	if r := p.GetRequiredPullRequestReviews(); r != nil {
		out.RequirePullRequest = true
		out.DismissStaleReviews = r.DismissStaleReviews
		out.RequireCodeOwnerReviews = r.RequireCodeOwnerReviews
		out.RequiredApprovals = r.RequiredApprovingReviewCount
	}
	fromRequiredChecks(out, p.GetRequiredStatusChecks())
	return out
}

// teamRole maps a team's repository permission to a role.
func teamRole(t *gh.Team) policy.Role {
	if t.Permission != nil && *t.Permission != "" {
		return policy.Role(*t.Permission)
	}
	return rolePermissions(t.Permissions)
}

func userRole(u *gh.User) policy.Role {
	if n := u.GetRoleName(); n != "" {
		switch n {
		case "read":
			return policy.RolePull
		case "write":
			return policy.RolePush
		}
		return policy.Role(n)
	}
	return rolePermissions(u.Permissions)
}

func rolePermissions(p map[string]bool) policy.Role {
	for _, r := range []policy.Role{policy.RoleAdmin, policy.RoleMaintain, policy.RolePush, policy.RoleTriage, policy.RolePull} {
		if p[string(r)] {
			return r
		}
	}
	return policy.RolePull
}

func cloneAccess(a policy.Access) policy.Access { return a.Clone() }

// Org implements reconcile.Forge: the owner's team slugs, its archived repos and the login
// fleetbot acts as, read once per run (the repo listing shares ListManaged's ETag'd URL).
//
// GitHub API docs: https://docs.github.com/rest/teams/teams#list-teams
func (f *Forge) Org(ctx context.Context, owner string) (policy.Org, error) {
	o, err := f.orgTeams(ctx, owner)
	if err != nil {
		return o, err
	}
	repos, err := f.listRepos(ctx, owner)
	if err != nil {
		return o, err
	}
	for _, r := range repos {
		if r.GetArchived() {
			o.Archived = append(o.Archived, r.GetName())
		}
	}
	return o, nil
}

// orgTeams reads the owner's team slugs and the login fleetbot acts as (no repos).
func (f *Forge) orgTeams(ctx context.Context, owner string) (policy.Org, error) {
	o := policy.Org{Name: owner}
	if l := f.selfLogin(ctx); l != "" {
		o.Self = []string{l}
	}
	userAccount := false
	ids := map[string]int64{}
	err := EachPage(func(opts gh.ListOptions) ([]*gh.Team, *gh.Response, error) {
		ts, resp, err := f.api.Teams.ListTeams(ctx, owner, &opts)
		if IsNotFound(err) && opts.Page == 0 {
			userAccount = true // a user account: no teams to check against
			return nil, nil, nil
		}
		return ts, resp, errf(err, "listing the teams of", owner)
	}, func(ts []*gh.Team) (bool, error) {
		if userAccount {
			return true, nil
		}
		for _, t := range ts {
			o.Teams = append(o.Teams, t.GetSlug())
			ids[strings.ToLower(t.GetSlug())] = t.GetID()
		}
		if o.Teams == nil {
			o.Teams = []string{}
		}
		return false, nil
	})
	if err != nil {
		return o, err
	}
	f.rememberOrg(o, ids)
	return o, nil
}

// BaseRole implements reconcile.BaseRoleReader: the org's base permission
// (default_repository_permission), which GitHub shows only to those who administer the
// organization (for a GitHub App: the organization permission "Administration", read); "" when
// the answer does not carry it, and every team is then granted its role. One request; reconcile
// asks only when the control repo opts in to organization administration
// (spec.access.branchRules.organization).
//
// GitHub API docs: https://docs.github.com/rest/orgs/orgs#get-an-organization
func (f *Forge) BaseRole(ctx context.Context, owner string) (policy.Role, error) {
	org, _, err := f.api.Organizations.Get(ctx, owner)
	if IsNotFound(err) {
		return "", nil // a user account
	}
	if err != nil {
		return "", errf(err, "reading the organization", owner)
	}
	role := baseRoleOf(org.GetDefaultRepoPermission())
	if seen := f.seenOrg(owner); seen != nil {
		seen.mu.Lock()
		seen.base = role
		seen.mu.Unlock()
	}
	return role, nil
}

// ApplyAccess implements reconcile.Forge: what every unit gives, in accessUnits' order
// (protection first, then grants and role changes, then the repo settings), then what each
// takes away (revokes, then collaborator removals; skipped, with the downgrades, when the plan
// was refused by its removal limit). The cached observation is dropped, so the next Access
// reads what GitHub now says.
func (f *Forge) ApplyAccess(ctx context.Context, owner, repo string, p policy.Plan) error {
	e, unlock := f.entry(owner, repo)
	defer unlock()
	st := e.state()
	defer func() {
		st.Access, st.AccessAt = nil, 0
		f.saveState(owner, repo, st)
	}()
	r := accessRepo{owner: owner, repo: repo, e: e}
	for _, u := range accessUnits {
		if u.give == nil {
			continue
		}
		if err := u.give(f, ctx, r, p); err != nil {
			return err
		}
	}
	if p.Refused != nil {
		return nil
	}
	for _, u := range accessUnits {
		if u.take == nil {
			continue
		}
		if err := u.take(f, ctx, r, p); err != nil {
			return err
		}
	}
	return nil
}
