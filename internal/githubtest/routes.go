package githubtest

import (
	"net/http"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
)

// routes registers every REST route (under /api/v3) and the git smart HTTP routes.
func (s *Server) routes() {
	s.apiMux = http.NewServeMux()
	s.gitMux = http.NewServeMux()

	// apps and installations (JWT-authenticated where GitHub requires it)
	s.api("GET /app", s.handleGetApp)
	s.api("GET /app/installations", s.handleListInstallations)
	s.api("GET /app/hook/deliveries", s.handleListDeliveries)
	s.api("GET /app/hook/deliveries/{delivery_id}", s.handleGetDelivery)
	s.api("POST /app/hook/deliveries/{delivery_id}/attempts", s.handleRedeliver)
	s.api("GET /app/installations/{id}", s.handleGetInstallation)
	s.api("POST /app/installations/{id}/access_tokens", s.handleCreateAccessToken)
	s.api("GET /orgs/{org}/installation", s.handleAccountInstallation)
	s.api("GET /users/{username}/installation", s.handleAccountInstallation)
	s.api("GET /repos/{owner}/{repo}/installation", s.handleAccountInstallation)
	s.api("GET /installation/repositories", s.handleInstallationRepos)
	s.api("GET /rate_limit", s.handleRateLimit)

	// accounts and repositories
	s.api("GET /orgs/{org}", s.handleGetOrg)
	s.api("GET /users/{username}", s.handleGetUser)
	s.api("GET /user", s.handleGetAuthenticatedUser)
	s.api("GET /orgs/{org}/repos", s.handleListRepos)
	s.api("GET /users/{username}/repos", s.handleListRepos)
	s.api("GET /user/repos", s.handleListRepos)
	s.api("POST /orgs/{org}/repos", s.handleCreateOrgRepo)
	s.api("POST /user/repos", s.handleCreateUserRepo)
	s.api("GET /repos/{owner}/{repo}", s.handleGetRepo)
	s.api("PATCH /repos/{owner}/{repo}", s.handleEditRepo)
	s.api("GET /repos/{owner}/{repo}/topics", s.handleTopics)
	s.api("PUT /repos/{owner}/{repo}/topics", s.handleTopics)
	s.api("GET /repos/{owner}/{repo}/branches", s.handleListBranches)
	s.api("GET /repos/{owner}/{repo}/branches/{branch}", s.handleGetBranch)
	s.api("GET /repos/{owner}/{repo}/contents/{path...}", s.handleGetContents)
	s.api("PUT /repos/{owner}/{repo}/contents/{path...}", s.handlePutContents)
	s.api("GET /repos/{owner}/{repo}/compare/{basehead...}", s.handleCompare)
	s.api("GET /repos/{owner}/{repo}/commits/{ref}", s.handleRepoCommit)

	// git data
	s.api("POST /repos/{owner}/{repo}/git/blobs", s.handleCreateBlob)
	s.api("GET /repos/{owner}/{repo}/git/blobs/{sha}", s.handleGetBlob)
	s.api("GET /repos/{owner}/{repo}/git/trees/{sha...}", s.handleGetTree)
	s.api("POST /repos/{owner}/{repo}/git/trees", s.handleCreateTree)
	s.api("POST /repos/{owner}/{repo}/git/commits", s.handleCreateCommit)
	s.api("GET /repos/{owner}/{repo}/git/commits/{sha}", s.handleGetCommit)
	s.api("GET /repos/{owner}/{repo}/git/ref/{ref...}", s.handleGetRef)
	s.api("GET /repos/{owner}/{repo}/git/matching-refs/{ref...}", s.handleMatchingRefs)
	s.api("POST /repos/{owner}/{repo}/git/refs", s.handleCreateRef)
	s.api("PATCH /repos/{owner}/{repo}/git/refs/{ref...}", s.handleUpdateRef)
	s.api("DELETE /repos/{owner}/{repo}/git/refs/{ref...}", s.handleDeleteRef)

	// pull requests and issues
	s.api("GET /repos/{owner}/{repo}/pulls", s.handleListPulls)
	s.api("POST /repos/{owner}/{repo}/pulls", s.handleCreatePull)
	s.api("GET /repos/{owner}/{repo}/pulls/{number}", s.handleGetPull)
	s.api("PATCH /repos/{owner}/{repo}/pulls/{number}", s.handleEditPull)
	s.api("PUT /repos/{owner}/{repo}/pulls/{number}/merge", s.handleMergePull)
	s.api("GET /repos/{owner}/{repo}/pulls/{number}/reviews", s.handleReviews)
	s.api("POST /repos/{owner}/{repo}/pulls/{number}/reviews", s.handleReviews)
	s.api("POST /repos/{owner}/{repo}/issues", s.handleCreateIssue)
	s.api("GET /repos/{owner}/{repo}/issues/{number}", s.handleGetIssue)
	s.api("GET /repos/{owner}/{repo}/issues/{number}/comments", s.handleListComments)
	s.api("POST /repos/{owner}/{repo}/issues/{number}/comments", s.handleCreateComment)
	s.api("PATCH /repos/{owner}/{repo}/issues/comments/{id}", s.handleComment)
	s.api("DELETE /repos/{owner}/{repo}/issues/comments/{id}", s.handleComment)
	s.api("GET /repos/{owner}/{repo}/issues/{number}/labels", s.handleLabels)
	s.api("POST /repos/{owner}/{repo}/issues/{number}/labels", s.handleLabels)
	s.api("PUT /repos/{owner}/{repo}/issues/{number}/labels", s.handleLabels)
	s.api("DELETE /repos/{owner}/{repo}/issues/{number}/labels/{name}", s.handleLabels)

	// checks and statuses
	s.api("POST /repos/{owner}/{repo}/check-runs", s.handleCreateCheckRun)
	s.api("PATCH /repos/{owner}/{repo}/check-runs/{id}", s.handleUpdateCheckRun)
	s.api("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", s.handleListCheckRuns)
	s.api("POST /repos/{owner}/{repo}/statuses/{sha}", s.handleCreateStatus)
	s.api("GET /repos/{owner}/{repo}/commits/{ref}/statuses", s.handleListStatuses)

	// access: teams, collaborators, branch protection, CODEOWNERS
	s.api("GET /orgs/{org}/teams", s.handleListTeams)
	s.api("GET /orgs/{org}/teams/{team_slug}", s.handleGetTeam)
	s.api("GET /orgs/{org}/teams/{team_slug}/members", s.handleTeamMembers)
	s.api("GET /orgs/{org}/teams/{team_slug}/memberships/{username}", s.handleTeamMembership)
	s.api("GET /orgs/{org}/teams/{team_slug}/repos", s.handleTeamRepos)
	s.api("GET /orgs/{org}/teams/{team_slug}/repos/{owner}/{repo}", s.handleTeamRepo)
	s.api("PUT /orgs/{org}/teams/{team_slug}/repos/{owner}/{repo}", s.handleTeamRepo)
	s.api("DELETE /orgs/{org}/teams/{team_slug}/repos/{owner}/{repo}", s.handleTeamRepo)
	s.api("GET /repos/{owner}/{repo}/teams", s.handleRepoTeams)
	s.api("GET /repos/{owner}/{repo}/collaborators", s.handleListCollaborators)
	s.api("GET /repos/{owner}/{repo}/collaborators/{username}", s.handleCollaborator)
	s.api("PUT /repos/{owner}/{repo}/collaborators/{username}", s.handleCollaborator)
	s.api("DELETE /repos/{owner}/{repo}/collaborators/{username}", s.handleCollaborator)
	s.api("GET /repos/{owner}/{repo}/collaborators/{username}/permission", s.handleCollaboratorPermission)
	s.api("GET /repos/{owner}/{repo}/branches/{branch}/protection", s.handleProtection)
	s.api("PUT /repos/{owner}/{repo}/branches/{branch}/protection", s.handleProtection)
	s.api("DELETE /repos/{owner}/{repo}/branches/{branch}/protection", s.handleProtection)
	s.api("GET /repos/{owner}/{repo}/codeowners/errors", s.handleCodeownersErrors)

	// rulesets and custom properties (rulesets.go)
	s.api("GET /repos/{owner}/{repo}/rulesets", s.handleRulesets)
	s.api("POST /repos/{owner}/{repo}/rulesets", s.handleRulesets)
	s.api("GET /repos/{owner}/{repo}/rulesets/{ruleset_id}", s.handleRuleset)
	s.api("PUT /repos/{owner}/{repo}/rulesets/{ruleset_id}", s.handleRuleset)
	s.api("DELETE /repos/{owner}/{repo}/rulesets/{ruleset_id}", s.handleRuleset)
	s.api("GET /orgs/{org}/rulesets", s.handleRulesets)
	s.api("POST /orgs/{org}/rulesets", s.handleRulesets)
	s.api("GET /orgs/{org}/rulesets/{ruleset_id}", s.handleRuleset)
	s.api("PUT /orgs/{org}/rulesets/{ruleset_id}", s.handleRuleset)
	s.api("DELETE /orgs/{org}/rulesets/{ruleset_id}", s.handleRuleset)
	s.api("GET /orgs/{org}/properties/schema", s.handlePropertySchema)
	s.api("PATCH /orgs/{org}/properties/schema", s.handlePropertySchema)
	s.api("GET /repos/{owner}/{repo}/properties/values", s.handlePropertyValues)
	s.api("PATCH /repos/{owner}/{repo}/properties/values", s.handlePropertyValues)

	s.api("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"current_user_url": s.APIURL() + "user"})
	})
	s.apiMux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { writeErr(w, errNotFound) })
	s.apiMux.HandleFunc("POST /api/graphql", s.locked(s.handleGraphQL))

	s.gitMux.HandleFunc("GET /{owner}/{repo}/info/refs", s.handleGit)
	s.gitMux.HandleFunc("POST /{owner}/{repo}/git-upload-pack", s.handleGit)
	s.gitMux.HandleFunc("POST /{owner}/{repo}/git-receive-pack", s.handleGit)
}

// restPatterns are the REST routes the fake serves, as registered by routes.
func restPatterns() []string {
	s := &Server{}
	s.routes()
	return s.restPatterns
}

// api registers a REST route ("METHOD /path" without /api/v3) whose handler runs under the lock.
func (s *Server) api(pattern string, h http.HandlerFunc) {
	method, path, _ := strings.Cut(pattern, " ")
	s.restPatterns = append(s.restPatterns, pattern)
	s.apiMux.HandleFunc(method+" "+apiPrefix+path, s.locked(h))
}

// locked runs h under the state lock and persists the state after a write.
func (s *Server) locked(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		h(w, r)
		if s.save && r.Method != http.MethodGet {
			if err := s.st.save(s.dir); err != nil {
				s.cfg.logger.Error("saving fake github state", "err", err)
			}
		}
	}
}

// handleGraphQL runs a GraphQL call (graphql.go): parsed and validated against GitHub's
// schema, charged to the caller's GraphQL budget (graphqlbudget.go), then executed on the
// query or mutation root; the answer holds exactly the fields the call selected.
func (s *Server) handleGraphQL(w http.ResponseWriter, r *http.Request) {
	var req gqlRequest
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	who := principalOf(r)
	if s.withoutUpdateRefs(w, req.Query) {
		return
	}
	doc, errs := s.parseGraphQL(req.Query)
	if len(errs) > 0 {
		s.setGraphQLRateHeaders(w.Header(), s.spendGraphQL(who.bucket, graphQLCost{}, true))
		writeJSON(w, http.StatusOK, map[string]any{"errors": errs})
		return
	}
	op, err := operation(doc, req.OperationName)
	if err != nil {
		s.setGraphQLRateHeaders(w.Header(), s.spendGraphQL(who.bucket, graphQLCost{}, true))
		writeJSON(w, http.StatusOK, map[string]any{"errors": []map[string]string{{"message": err.Error()}}})
		return
	}
	rate := s.spendGraphQL(who.bucket, costOf(doc, op, req.Variables), isDryRun(op, req.Variables))
	s.setGraphQLRateHeaders(w.Header(), rate)
	if rate.limited {
		writeJSON(w, http.StatusOK, map[string]any{"errors": []map[string]string{{"type": "RATE_LIMITED",
			"message": "API rate limit exceeded for " + who.bucket + ". (" + graphQLDocURL + ")"}}})
		return
	}
	var root gqlObject = &gqlQueryRoot{s: s, who: who, rate: rate}
	if op.Operation == ast.Mutation {
		repo, _ := r.Context().Value(mutatedRepoKey{}).(*string)
		root = &gqlMutationRoot{s: s, who: who, repo: repo}
	}
	s.runGraphQL(w, doc, op, root, req.Variables)
}
