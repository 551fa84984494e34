package githubtest

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v62/github"
)

// permRank orders repository permissions as GitHub documents its roles, each including the
// ones before it: read (pull), triage, write (push), maintain, admin.
// https://docs.github.com/organizations/managing-user-access-to-your-organizations-repositories/managing-repository-roles/repository-roles-for-an-organization
var permRank = map[string]int{"pull": 1, "triage": 2, "push": 3, "maintain": 4, "admin": 5}

// permissionsMap is the permissions object GitHub shows for a role.
func permissionsMap(perm string) map[string]bool {
	rank := permRank[perm]
	return map[string]bool{"pull": rank >= 1, "triage": rank >= 2, "push": rank >= 3, "maintain": rank >= 4, "admin": rank >= 5}
}

// roleName is the role_name GitHub shows for a permission.
func roleName(perm string) string {
	switch perm {
	case "pull":
		return "read"
	case "push":
		return "write"
	}
	return perm
}

func (s *Server) handleGetOrg(w http.ResponseWriter, r *http.Request) {
	a := s.st.Accounts[strings.ToLower(r.PathValue("org"))]
	if a == nil || a.Type != "Organization" {
		writeErr(w, errNotFound)
		return
	}
	// organization-full: every property GitHub requires; those the fake keeps no state for
	// carry zero values (and the URL templates of GitHub's example).
	// https://docs.github.com/rest/orgs/orgs#get-an-organization
	api := s.APIURL() + "orgs/" + a.Login
	at := s.clock.Now().UTC().Format(time.RFC3339)
	out := map[string]any{
		"login": a.Login, "id": a.ID, "node_id": nodeID("Organization", a.ID), "type": "Organization",
		"url": api, "repos_url": api + "/repos", "events_url": api + "/events", "hooks_url": api + "/hooks",
		"issues_url": api + "/issues", "members_url": api + "/members{/member}",
		"public_members_url": api + "/public_members{/member}", "avatar_url": s.URL + "/avatars/" + a.Login,
		"description": nil, "html_url": s.URL + "/" + a.Login,
		"has_organization_projects": true, "has_repository_projects": true,
		"public_repos": 0, "public_gists": 0, "followers": 0, "following": 0,
		"created_at": at, "updated_at": at, "archived_at": nil,
	}
	if s.administersOrg(a, principalOf(r)) {
		base := a.BasePermission
		if base == "" {
			base = "none"
		}
		out["default_repository_permission"] = base
	}
	writeJSON(w, http.StatusOK, out)
}

// administersOrg: the organization's full details (default_repository_permission among them)
// are shown to its owners, and to a GitHub App's installation holding the organization
// permission "Administration" (read).
// https://docs.github.com/rest/orgs/orgs#get-an-organization
func (s *Server) administersOrg(a *account, p principal) bool {
	switch p.kind {
	case "user":
		return a.Members[strings.ToLower(p.login)] == "admin"
	case "installation":
		return levelRank(s.tokenPermissions(p)["organization_administration"]) >= levelRank("read")
	}
	return false
}

// basePermission is the base permission of the organization owning rm that login holds as a
// member ("" when none): base permissions apply to members only, never to outside
// collaborators.
// https://docs.github.com/organizations/managing-user-access-to-your-organizations-repositories/managing-repository-roles/setting-base-permissions-for-an-organization
func (s *Server) basePermission(rm *repoMeta, login string) string {
	org := s.st.Accounts[strings.ToLower(rm.Owner)]
	if org == nil || org.Members[login] == "" {
		return ""
	}
	switch org.BasePermission {
	case "read":
		return "pull"
	case "write":
		return "push"
	case "admin":
		return "admin"
	}
	return ""
}

func (s *Server) handleGetUser(w http.ResponseWriter, r *http.Request) {
	login := r.PathValue("username")
	if login == "" {
		login = principalOf(r).login
	}
	if s.st.Accounts[strings.ToLower(login)] == nil {
		writeErr(w, errNotFound)
		return
	}
	writeJSON(w, http.StatusOK, s.userJSON(login))
}

func (s *Server) teamJSON(t *team, perm string) *github.Team {
	api := s.APIURL() + "orgs/" + url.PathEscape(t.Org) + "/teams/" + t.Slug
	out := &github.Team{
		ID: github.Int64(t.ID), NodeID: github.String(nodeID("Team", t.ID)), Name: github.String(t.Name),
		Slug: github.String(t.Slug), Description: github.String(t.Description), Privacy: github.String(t.Privacy),
		Permission: github.String("pull"), URL: github.String(api), HTMLURL: github.String(s.URL + "/orgs/" + t.Org + "/teams/" + t.Slug),
		MembersURL: github.String(api + "/members{/member}"), RepositoriesURL: github.String(api + "/repos"),
		MembersCount: github.Int(len(t.Members)), ReposCount: github.Int(len(t.Repos)),
	}
	if perm != "" {
		out.Permission = github.String(perm)
		out.Permissions = permissionsMap(perm)
	}
	return out
}

// teamFromReq finds the team {org}/{team_slug}.
func (s *Server) teamFromReq(r *http.Request) (*team, error) {
	t := s.st.Teams[teamKey(r.PathValue("org"), r.PathValue("team_slug"))]
	if t == nil {
		return nil, errNotFound
	}
	return t, nil
}

func (s *Server) orgTeams(org string) []*team {
	var out []*team
	for _, k := range slices.Sorted(maps.Keys(s.st.Teams)) {
		if t := s.st.Teams[k]; strings.EqualFold(t.Org, org) {
			out = append(out, t)
		}
	}
	return out
}

func (s *Server) handleListTeams(w http.ResponseWriter, r *http.Request) {
	org := s.st.Accounts[strings.ToLower(r.PathValue("org"))]
	if org == nil || org.Type != "Organization" {
		writeErr(w, errNotFound)
		return
	}
	out := []map[string]any{}
	for _, t := range s.orgTeams(org.Login) {
		out = append(out, s.listedTeamJSON(t, ""))
	}
	writePage(w, r, out)
}

func (s *Server) handleGetTeam(w http.ResponseWriter, r *http.Request) {
	t, err := s.teamFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s.fullTeamJSON(t))
}

func (s *Server) handleTeamMembers(w http.ResponseWriter, r *http.Request) {
	t, err := s.teamFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	role := r.URL.Query().Get("role")
	out := []*github.User{}
	for _, login := range slices.Sorted(maps.Keys(t.Members)) {
		if role == "" || role == "all" || role == t.Members[login] {
			out = append(out, s.userJSON(login))
		}
	}
	writePage(w, r, out)
}

func (s *Server) handleTeamMembership(w http.ResponseWriter, r *http.Request) {
	t, err := s.teamFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	user := r.PathValue("username")
	role, ok := t.Members[strings.ToLower(user)]
	if !ok {
		writeErr(w, errNotFound)
		return
	}
	writeJSON(w, http.StatusOK, &github.Membership{
		URL:   github.String(s.APIURL() + "orgs/" + t.Org + "/teams/" + t.Slug + "/memberships/" + user),
		State: github.String("active"), Role: github.String(role),
	})
}

func (s *Server) handleTeamRepos(w http.ResponseWriter, r *http.Request) {
	t, err := s.teamFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := []*github.Repository{}
	for _, k := range slices.Sorted(maps.Keys(t.Repos)) {
		if rm := s.st.Repos[k]; rm != nil {
			repo := s.repoJSON(rm)
			repo.Permissions = permissionsMap(t.Repos[k])
			repo.RoleName = github.String(roleName(t.Repos[k]))
			out = append(out, repo)
		}
	}
	writePage(w, r, out)
}

// handleTeamRepo serves GET/PUT/DELETE /orgs/{org}/teams/{team_slug}/repos/{owner}/{repo}.
func (s *Server) handleTeamRepo(w http.ResponseWriter, r *http.Request) {
	t, err := s.teamFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	rm, err := s.repoFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	key := repoKey(rm.Owner, rm.Name)
	switch r.Method {
	case http.MethodGet:
		perm, ok := t.Repos[key]
		if !ok {
			writeErr(w, errorf(http.StatusNotFound, "Not Found"))
			return
		}
		if strings.Contains(r.Header.Get("Accept"), "repository+json") {
			repo := s.repoJSON(rm)
			repo.Permissions = permissionsMap(perm)
			repo.RoleName = github.String(roleName(perm))
			writeJSON(w, http.StatusOK, repo)
			return
		}
	case http.MethodPut:
		if !strings.EqualFold(rm.Owner, t.Org) {
			writeErr(w, validationFailed("Team", "repo", "invalid"))
			return
		}
		perm, err := decodePermission(r, "Team")
		if err != nil {
			writeErr(w, err)
			return
		}
		t.Repos[key] = perm
	case http.MethodDelete:
		delete(t.Repos, key)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRepoTeams(w http.ResponseWriter, r *http.Request) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	out := []map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(s.st.Teams)) {
		t := s.st.Teams[k]
		if perm, ok := t.Repos[repoKey(rm.Owner, rm.Name)]; ok {
			out = append(out, s.listedTeamJSON(t, perm))
		}
	}
	writePage(w, r, out)
}

// effectivePermission is a user's best permission on a repository: direct, via teams, or as owner.
func (s *Server) effectivePermission(rm *repoMeta, login string) string {
	login = strings.ToLower(login)
	best := rm.Collaborators[login]
	if base := s.basePermission(rm, login); permRank[base] > permRank[best] {
		best = base
	}
	if strings.EqualFold(rm.Owner, login) {
		return "admin"
	}
	if org := s.st.Accounts[strings.ToLower(rm.Owner)]; org != nil && org.Members[login] == "admin" {
		return "admin"
	}
	for _, t := range s.orgTeams(rm.Owner) {
		if perm, ok := t.Repos[repoKey(rm.Owner, rm.Name)]; ok {
			if _, member := t.Members[login]; member && permRank[perm] > permRank[best] {
				best = perm
			}
		}
	}
	return best
}

func (s *Server) handleListCollaborators(w http.ResponseWriter, r *http.Request) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	logins := map[string]bool{}
	for l := range rm.Collaborators {
		logins[l] = true
	}
	if aff := r.URL.Query().Get("affiliation"); aff == "" || aff == "all" {
		for _, t := range s.orgTeams(rm.Owner) {
			if _, ok := t.Repos[repoKey(rm.Owner, rm.Name)]; ok {
				for l := range t.Members {
					logins[l] = true
				}
			}
		}
	}
	out := []*github.User{}
	for _, l := range slices.Sorted(maps.Keys(logins)) {
		u := s.userJSON(l)
		perm := rm.Collaborators[l]
		if r.URL.Query().Get("affiliation") != "direct" {
			perm = s.effectivePermission(rm, l)
		}
		u.Permissions = permissionsMap(perm)
		u.RoleName = github.String(roleName(perm))
		out = append(out, u)
	}
	writePage(w, r, out)
}

// handleCollaborator serves GET/PUT/DELETE /repos/{owner}/{repo}/collaborators/{username}.
// PUT adds the user at once (GitHub would send an invitation to a non-member) and answers 204.
func (s *Server) handleCollaborator(w http.ResponseWriter, r *http.Request) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	user := strings.ToLower(r.PathValue("username"))
	if s.st.Accounts[user] == nil {
		writeErr(w, errNotFound)
		return
	}
	switch r.Method {
	case http.MethodGet:
		if s.effectivePermission(rm, user) == "" {
			writeErr(w, errNotFound)
			return
		}
	case http.MethodPut:
		perm, err := decodePermission(r, "Collaborator")
		if err != nil {
			writeErr(w, err)
			return
		}
		rm.Collaborators[user] = perm
	case http.MethodDelete:
		delete(rm.Collaborators, user)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleCollaboratorPermission(w http.ResponseWriter, r *http.Request) {
	rm, err := s.repoFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	user := r.PathValue("username")
	if s.st.Accounts[strings.ToLower(user)] == nil {
		writeErr(w, errNotFound)
		return
	}
	perm := s.effectivePermission(rm, user)
	legacy := map[string]string{"": "none", "pull": "read", "triage": "read", "push": "write", "maintain": "write", "admin": "admin"}[perm]
	name := roleName(perm)
	if perm == "" {
		name = "none"
	}
	writeJSON(w, http.StatusOK, map[string]any{"permission": legacy, "role_name": name, "user": s.userJSON(user)})
}

func (s *Server) protectionJSON(rm *repoMeta, branch string, p *protection) map[string]any {
	u := s.repoAPI(rm) + "/branches/" + url.PathEscape(branch) + "/protection"
	out := map[string]any{
		"url":                     u,
		"enforce_admins":          map[string]any{"url": u + "/enforce_admins", "enabled": p.EnforceAdmins},
		"required_linear_history": map[string]any{"enabled": p.RequireLinearHistory},
		"allow_force_pushes":      map[string]any{"enabled": p.AllowForcePushes},
		"allow_deletions":         map[string]any{"enabled": p.AllowDeletions},
	}
	if p.RequirePRReviews {
		out["required_pull_request_reviews"] = map[string]any{
			"url":                             u + "/required_pull_request_reviews",
			"dismiss_stale_reviews":           p.DismissStaleReviews,
			"require_code_owner_reviews":      p.RequireCodeOwnerReviews,
			"required_approving_review_count": p.RequiredApprovals,
		}
	}
	if p.HasStatusChecks {
		contexts := p.RequiredStatusChecks
		if contexts == nil {
			contexts = []string{}
		}
		out["required_status_checks"] = map[string]any{"url": u + "/required_status_checks", "strict": p.StrictStatusChecks,
			"contexts": contexts, "contexts_url": u + "/required_status_checks/contexts", "checks": requiredChecksJSON(p)}
	}
	return out
}

// handleProtection serves GET/PUT/DELETE /repos/{owner}/{repo}/branches/{branch}/protection.
func (s *Server) handleProtection(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.repoGit(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if a := s.st.Accounts[strings.ToLower(rm.Owner)]; a != nil && a.Plan == PlanFree && rm.Visibility != "public" {
		writeJSON(w, http.StatusForbidden, apiError{Message: upgradeMessage,
			DocumentationURL: protectionDocURL[r.Method], Status: "403"})
		return
	}
	branch := r.PathValue("branch")
	if _, ok := g.branch(branch); !ok {
		writeErr(w, errorf(http.StatusNotFound, "Branch not found"))
		return
	}
	p := rm.Protection[branch]
	switch r.Method {
	case http.MethodGet:
		if p == nil {
			writeErr(w, errorf(http.StatusNotFound, "Branch not protected"))
			return
		}
	case http.MethodDelete:
		if p == nil {
			writeErr(w, errorf(http.StatusNotFound, "Branch not protected"))
			return
		}
		delete(rm.Protection, branch)
		w.WriteHeader(http.StatusNoContent)
		return
	case http.MethodPut:
		if rm.Archived {
			writeErr(w, errArchived)
			return
		}
		data, err := readAll(r)
		if err != nil {
			writeErr(w, err)
			return
		}
		np, herr := parseProtection(data)
		if herr != nil {
			writeErr(w, herr)
			return
		}
		s.bindRequiredChecksLocked(rm, np)
		p = np
		rm.Protection[branch] = p
	}
	writeJSON(w, http.StatusOK, s.protectionJSON(rm, branch, p))
}

// codeownersPaths are where GitHub looks for CODEOWNERS, in order.
var codeownersPaths = []string{".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"}

func (s *Server) handleCodeownersErrors(w http.ResponseWriter, r *http.Request) {
	rm, g, err := s.repoGit(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		ref = rm.DefaultBranch
	}
	c, err := g.resolveCommit(ref)
	if err != nil {
		writeErr(w, errNotFound)
		return
	}
	for _, p := range codeownersPaths {
		data, _, err := g.readFile(c, p)
		if err != nil {
			continue
		}
		writeJSON(w, http.StatusOK, map[string]any{"errors": s.codeownersErrors(rm, p, string(data))})
		return
	}
	writeErr(w, errNotFound)
}

// decodePermission reads the {"permission": ...} body of a team or
// collaborator grant; GitHub defaults it to push and rejects unknown roles.
func decodePermission(r *http.Request, resource string) (string, error) {
	var req struct {
		Permission string `json:"permission"`
	}
	if err := decodeBody(r, &req); err != nil {
		return "", err
	}
	if req.Permission == "" {
		req.Permission = "push"
	}
	if permRank[req.Permission] == 0 {
		return "", validationFailed(resource, "permission", "invalid")
	}
	return req.Permission, nil
}
