package githubtest

import (
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-github/v62/github"
)

// The rules that decide whether a pull request may be merged: the repository's merge methods
// and the base branch's protection (required reviews, code-owner review, required status
// checks, optionally bound to an App), and the rules of the active rulesets that target the
// base branch (rulesets.go).

// protectedBranchDocURL is the documentation_url of GitHub's 405 for a merge a protection blocks.
const protectedBranchDocURL = "https://docs.github.com/articles/about-protected-branches"

// mergeMethodRefusal is GitHub's 405 message for a merge method the repository does not allow
// (settings allow_merge_commit, allow_squash_merge, allow_rebase_merge), "" when it allows it.
// https://docs.github.com/rest/pulls/pulls#merge-a-pull-request,
// https://docs.github.com/rest/repos/repos#update-a-repository
func mergeMethodRefusal(rm *repoMeta, method string) string {
	switch {
	case (method == "" || method == "merge") && rm.NoMergeCommit:
		return "Merge commits are not allowed on this repository."
	case method == "squash" && rm.NoSquashMerge:
		return "Squash merges are not allowed on this repository."
	case method == "rebase" && rm.NoRebaseMerge:
		return "Rebase merges are not allowed on this repository."
	}
	return ""
}

// mergeSettings are the merge-method settings of PATCH /repos/{owner}/{repo} and of creating a
// repository (each allowed unless set false).
type mergeSettings struct {
	AllowMergeCommit *bool `json:"allow_merge_commit"`
	AllowSquashMerge *bool `json:"allow_squash_merge"`
	AllowRebaseMerge *bool `json:"allow_rebase_merge"`
}

// apply stores the settings a request sets.
func (m mergeSettings) apply(rm *repoMeta) {
	if m.AllowMergeCommit != nil {
		rm.NoMergeCommit = !*m.AllowMergeCommit
	}
	if m.AllowSquashMerge != nil {
		rm.NoSquashMerge = !*m.AllowSquashMerge
	}
	if m.AllowRebaseMerge != nil {
		rm.NoRebaseMerge = !*m.AllowRebaseMerge
	}
}

// bypassesProtection reports whether the principal merges past the base branch's protection:
// "By default, the restrictions of a branch protection rule don't apply to people with admin
// permissions to the repository"; "Do not allow bypassing the above settings" (enforce_admins)
// applies them to administrators too. A GitHub App's installation is never an administrator.
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#do-not-allow-bypassing-the-above-settings
func (s *Server) bypassesProtection(rm *repoMeta, p *protection, who principal) bool {
	return who.kind == "user" && !p.EnforceAdmins && s.effectivePermission(rm, who.login) == "admin"
}

// mergeBlockersLocked lists, in GitHub's words, what the base branch's protection still
// requires of an open pull request before it may be merged; none when nothing protects the
// branch or every requirement is met.
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches
func (s *Server) mergeBlockersLocked(rm *repoMeta, is *issue) []string {
	p := rm.Protection[is.Pull.Base]
	if p == nil {
		return nil
	}
	return s.protectionBlockersLocked(rm, is, p)
}

// protectionBlockersLocked lists what protection p (a branch protection, or the rules of a
// ruleset) still requires of an open pull request.
func (s *Server) protectionBlockersLocked(rm *repoMeta, is *issue, p *protection) []string {
	var out []string
	if p.RequirePRReviews {
		out = append(out, s.reviewBlockersLocked(rm, is, p)...)
	}
	for _, c := range p.RequiredStatusChecks {
		switch s.requiredCheckState(rm, is.Pull.HeadSHA, c, p.RequiredCheckApps[c]) {
		case checkMissing, checkPending:
			out = append(out, fmt.Sprintf("Required status check %q is expected.", c))
		case checkWrongApp:
			out = append(out, fmt.Sprintf("Required status check %q was not set by the expected GitHub app.", c))
		case checkFailed:
			out = append(out, fmt.Sprintf("Required status check %q is failing.", c))
		}
	}
	return out
}

// reviewBlockersLocked: "Require approvals" counts the approving reviews of people with write
// access, other than the author, each reviewer's latest review counting (with "Dismiss stale
// pull request approvals" only those of the current head); "Require review from Code Owners"
// wants an approval from an owner of each changed file that has owners, as the base branch's
// CODEOWNERS names them.
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-pull-request-reviews-before-merging
func (s *Server) reviewBlockersLocked(rm *repoMeta, is *issue, p *protection) []string {
	approvers := s.approversLocked(rm, is, p.DismissStaleReviews)
	var out []string
	if n := p.RequiredApprovals; len(approvers) < n {
		if n == 1 {
			out = append(out, "At least 1 approving review is required by reviewers with write access.")
		} else {
			out = append(out, fmt.Sprintf("At least %d approving reviews are required by reviewers with write access.", n))
		}
	}
	if p.RequireCodeOwnerReviews {
		if waiting := s.codeOwnersWaitingLocked(rm, is, approvers); len(waiting) > 0 {
			out = append(out, "Waiting on code owner review from "+strings.Join(waiting, ", ")+".")
		}
	}
	return out
}

// approversLocked are the logins (lower-case) whose latest review of the pull request approves
// it and counts: write access, not the author, on the current head when stale approvals are
// dismissed.
func (s *Server) approversLocked(rm *repoMeta, is *issue, currentHeadOnly bool) map[string]bool {
	latest := map[string]*review{}
	for _, rv := range is.Pull.Reviews {
		if rv.State != "COMMENTED" {
			latest[strings.ToLower(rv.User)] = rv
		}
	}
	out := map[string]bool{}
	for login, rv := range latest {
		switch {
		case rv.State != "APPROVED", strings.EqualFold(login, is.User), !writeAccess(s.effectivePermission(rm, login)):
		case currentHeadOnly && rv.CommitID != is.Pull.HeadSHA:
		default:
			out[login] = true
		}
	}
	return out
}

// codeOwnersWaitingLocked lists the owners ("@org/team", "@user") of the changed files no
// approver owns, sorted; none when every changed file with owners has an approval of one of
// them.
func (s *Server) codeOwnersWaitingLocked(rm *repoMeta, is *issue, approvers map[string]bool) []string {
	g, err := s.openRepoGit(rm)
	if err != nil {
		return nil
	}
	base, ok := g.branch(is.Pull.Base)
	if !ok {
		return nil
	}
	rules := s.codeOwnerRulesLocked(g, base)
	if len(rules) == 0 {
		return nil
	}
	waiting := map[string]bool{}
	for _, path := range s.changedPathsLocked(g, base, plumbing.NewHash(is.Pull.HeadSHA)) {
		owners := ownersOf(rules, path)
		if len(owners) == 0 || slices.ContainsFunc(owners, func(o string) bool { return s.ownerApprovedLocked(rm, o, approvers) }) {
			continue
		}
		for _, o := range owners {
			waiting[o] = true
		}
	}
	return slices.Sorted(maps.Keys(waiting))
}

// ownerApprovedLocked: owner ("@user" or "@org/team") is, or has a member, among approvers.
func (s *Server) ownerApprovedLocked(rm *repoMeta, owner string, approvers map[string]bool) bool {
	if m := teamOwnerRe.FindStringSubmatch(owner); m != nil {
		t := s.st.Teams[teamKey(m[1], m[2])]
		if t == nil || !strings.EqualFold(m[1], rm.Owner) {
			return false
		}
		for login := range t.Members {
			if approvers[strings.ToLower(login)] {
				return true
			}
		}
		return false
	}
	return approvers[strings.ToLower(strings.TrimPrefix(owner, "@"))]
}

// changedPathsLocked are the paths a pull request changes: its head against the merge base.
func (s *Server) changedPathsLocked(g *gitRepo, base, head plumbing.Hash) []string {
	mb, err := g.mergeBase(base, head)
	if err != nil {
		return nil
	}
	var mbTree, headTree plumbing.Hash
	if !mb.IsZero() {
		if c, err := g.commit(mb); err == nil {
			mbTree = c.TreeHash
		}
	}
	if c, err := g.commit(head); err == nil {
		headTree = c.TreeHash
	}
	before, err1 := g.flatten(mbTree)
	after, err2 := g.flatten(headTree)
	if err1 != nil || err2 != nil {
		return nil
	}
	changed := map[string]bool{}
	for p, e := range after {
		if before[p] != e {
			changed[p] = true
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			changed[p] = true
		}
	}
	return slices.Sorted(maps.Keys(changed))
}

// codeOwnerRule is one line of a CODEOWNERS file: a pattern and its owners.
type codeOwnerRule struct {
	re     *regexp.Regexp
	owners []string
}

// codeOwnerRulesLocked reads the CODEOWNERS of a commit, where GitHub looks for it, in order
// (codeownersPaths); lines GitHub refuses are skipped, as GitHub skips them.
func (s *Server) codeOwnerRulesLocked(g *gitRepo, at plumbing.Hash) []codeOwnerRule {
	c, err := g.commit(at)
	if err != nil {
		return nil
	}
	for _, p := range codeownersPaths {
		data, _, err := g.readFile(c, p)
		if err != nil {
			continue
		}
		var rules []codeOwnerRule
		for _, line := range strings.Split(string(data), "\n") {
			fields := strings.Fields(line)
			if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
				continue
			}
			if re := codeOwnerPattern(fields[0]); re != nil {
				rules = append(rules, codeOwnerRule{re: re, owners: fields[1:]})
			}
		}
		return rules
	}
	return nil
}

// ownersOf is the owners of path: those of the last matching rule ("the last matching pattern
// takes the most precedence").
// https://docs.github.com/repositories/managing-your-repositorys-settings-and-features/customizing-your-repository/about-code-owners#codeowners-syntax
func ownersOf(rules []codeOwnerRule, path string) []string {
	for i := len(rules) - 1; i >= 0; i-- {
		if rules[i].re.MatchString(path) {
			return rules[i].owners
		}
	}
	return nil
}

// codeOwnerPattern compiles a CODEOWNERS pattern, gitignore-like as GitHub documents it: a
// pattern with a slash other than at its end is anchored at the root, one without matches at
// any depth; a trailing slash, or a name that is a directory, matches everything below; "*"
// matches within a path segment, "**" across them. Patterns GitHub refuses (negation,
// character ranges, escaped #) are nil.
func codeOwnerPattern(pattern string) *regexp.Regexp {
	if strings.HasPrefix(pattern, "!") || strings.HasPrefix(pattern, `\#`) || strings.ContainsAny(pattern, "[]") {
		return nil
	}
	anchored := strings.Contains(strings.TrimSuffix(pattern, "/"), "/")
	p := strings.TrimPrefix(pattern, "/")
	dirOnly := strings.HasSuffix(p, "/")
	p = strings.TrimSuffix(p, "/")
	var b strings.Builder
	if anchored {
		b.WriteString("^")
	} else {
		b.WriteString("^(?:.*/)?")
	}
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		case p[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	if dirOnly {
		b.WriteString("/.*$")
	} else {
		b.WriteString("(?:/.*)?$")
	}
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil
	}
	return re
}

// checkState is where a required status check of a commit stands.
type checkState int

const (
	// checkMissing: no check run or status of the check's name on the commit.
	checkMissing checkState = iota
	// checkWrongApp: only check runs or statuses of another source than the App the check is
	// bound to. GitHub refuses the merge with `Required status check "ci" was not set by the
	// expected GitHub app.` (as reported in konflux-ci/build-definitions#316 and
	// kubernetes-sigs/prow#915).
	checkWrongApp
	checkPending
	checkFailed
	checkPassed
)

// requiredCheckState is the state of required check context on commit sha: the newest check
// run of that name and the newest commit status of that context, from App appID when it is
// above 0 ("The ID of the GitHub App that must provide this check"; 0 or -1: any source). A
// check run passes with success, neutral or skipped, a status with success. "If you have a
// check and a status with the same name, and you select that name as a required status
// check, both the check and the status are required": with both, either failing fails the
// check and either running keeps it expected.
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-status-checks-before-merging,
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/defining-the-mergeability-of-pull-requests/troubleshooting-required-status-checks,
// https://docs.github.com/rest/branches/branch-protection#update-branch-protection
func (s *Server) requiredCheckState(rm *repoMeta, sha, context string, appID int64) checkState {
	fromApp := func(id int64) bool { return appID <= 0 || id == appID }
	other := false
	var run *checkRun
	for _, cr := range s.st.CheckRuns {
		if cr.Repo != repoKey(rm.Owner, rm.Name) || cr.HeadSHA != sha || cr.Name != context {
			continue
		}
		if !fromApp(cr.AppID) {
			other = true
			continue
		}
		if run == nil || cr.ID > run.ID {
			run = cr
		}
	}
	var sources []checkState
	if run != nil {
		sources = append(sources, run.checkState())
	}
	for i := len(rm.Statuses) - 1; i >= 0; i-- {
		st := rm.Statuses[i]
		if st.SHA != sha || st.Context != context {
			continue
		}
		if !fromApp(st.AppID) {
			other = true
			continue
		}
		sources = append(sources, st.checkState())
		break // the newest status of the context
	}
	switch {
	case len(sources) == 0 && other:
		return checkWrongApp
	case len(sources) == 0:
		return checkMissing
	case slices.Contains(sources, checkFailed):
		return checkFailed
	case slices.Contains(sources, checkPending):
		return checkPending
	}
	return checkPassed
}

// checkState is where a check run leaves a required check: pending until completed, passed
// with success, neutral or skipped, failed otherwise.
func (cr *checkRun) checkState() checkState {
	switch {
	case cr.Status != "completed":
		return checkPending
	case cr.Conclusion == "success" || cr.Conclusion == "neutral" || cr.Conclusion == "skipped":
		return checkPassed
	}
	return checkFailed
}

// checkState is where a commit status leaves a required check: passed with success, pending
// while pending, failed with failure or error.
func (st *commitStatus) checkState() checkState {
	switch st.State {
	case "success":
		return checkPassed
	case "pending":
		return checkPending
	}
	return checkFailed
}

// reviewJSON is a review as GitHub's pull-request-review schema shows it.
func (s *Server) reviewJSON(rm *repoMeta, is *issue, rv *review) map[string]any {
	html := fmt.Sprintf("%s/%s/pull/%d#pullrequestreview-%d", s.URL, rm.fullName(), is.Number, rv.ID)
	pull := fmt.Sprintf("%s/pulls/%d", s.repoAPI(rm), is.Number)
	assoc := "NONE"
	if writeAccess(s.effectivePermission(rm, rv.User)) {
		assoc = "COLLABORATOR"
	}
	return map[string]any{
		"id": rv.ID, "node_id": nodeID("PullRequestReview", rv.ID), "user": s.userJSON(rv.User),
		"body": rv.Body, "state": rv.State, "html_url": html, "pull_request_url": pull,
		"_links":       map[string]any{"html": map[string]string{"href": html}, "pull_request": map[string]string{"href": pull}},
		"submitted_at": rv.SubmittedAt.UTC().Format(time.RFC3339), "commit_id": rv.CommitID,
		"author_association": assoc,
	}
}

// handleReviews serves GET and POST /repos/{owner}/{repo}/pulls/{number}/reviews: a review is
// submitted at once with its event (APPROVE, REQUEST_CHANGES, COMMENT; a review without an
// event would stay pending, which the fake does not keep); the author cannot approve or
// request changes on their own pull request.
// https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request
func (s *Server) handleReviews(w http.ResponseWriter, r *http.Request) {
	rm, is, err := s.pullFromReq(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if r.Method == http.MethodGet {
		out := []map[string]any{}
		for _, rv := range is.Pull.Reviews {
			out = append(out, s.reviewJSON(rm, is, rv))
		}
		writePage(w, r, out)
		return
	}
	if rm.Archived {
		writeErr(w, errArchived)
		return
	}
	var req struct {
		Body     string `json:"body"`
		Event    string `json:"event"`
		CommitID string `json:"commit_id"`
	}
	if err := decodeBody(r, &req); err != nil {
		writeErr(w, err)
		return
	}
	state := map[string]string{"APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED", "COMMENT": "COMMENTED"}[req.Event]
	actor := principalOf(r).login
	switch {
	case state == "":
		writeErr(w, validationFailed("PullRequestReview", "event", "invalid"))
		return
	case state != "COMMENTED" && strings.EqualFold(actor, is.User):
		// This operation's errors are strings, not objects (its description says so).
		verb := map[string]string{"APPROVED": "approve", "CHANGES_REQUESTED": "request changes on"}[state]
		writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Unprocessable Entity",
			"errors": []string{"Can not " + verb + " your own pull request"}, "documentation_url": "https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request",
			"status": "422"})
		return
	case state != "APPROVED" && req.Body == "":
		writeErr(w, validationFailed("PullRequestReview", "body", "missing_field"))
		return
	}
	commit := req.CommitID
	if commit == "" {
		commit = is.Pull.HeadSHA
	}
	rv := &review{ID: s.st.nextID(), User: actor, State: state, Body: req.Body, CommitID: commit, SubmittedAt: s.clock.Now()}
	is.Pull.Reviews = append(is.Pull.Reviews, rv)
	is.UpdatedAt = rv.SubmittedAt
	writeJSON(w, http.StatusOK, s.reviewJSON(rm, is, rv))
}

// mergeRefusalLocked is the 405 a merge of pull request is by who gets from the repository's
// settings and the base branch's protection, nil when it may merge.
func (s *Server) mergeRefusalLocked(rm *repoMeta, is *issue, method string, who principal) *httpError {
	if msg := mergeMethodRefusal(rm, method); msg != "" {
		return &httpError{status: http.StatusMethodNotAllowed, message: msg}
	}
	var blockers []string
	if p := rm.Protection[is.Pull.Base]; p != nil && !s.bypassesProtection(rm, p, who) {
		blockers = s.mergeBlockersLocked(rm, is)
	}
	// The rules of every active ruleset targeting the base branch apply too (rulesets.go).
	blockers = append(blockers, s.rulesetBlockersLocked(rm, is, who)...)
	if len(blockers) > 0 {
		return &httpError{status: http.StatusMethodNotAllowed, message: blockers[0]}
	}
	return nil
}

// writeMergeRefusal writes a merge's 405 with the documentation_url GitHub gives it.
func writeMergeRefusal(w http.ResponseWriter, he *httpError) {
	doc := "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request"
	if strings.HasPrefix(he.message, "Required status check") || strings.Contains(he.message, "review") {
		doc = protectedBranchDocURL
	}
	writeJSON(w, he.status, apiError{Message: he.message, DocumentationURL: doc, Status: fmt.Sprint(he.status)})
}

// mergeSettingsJSON sets the merge-method settings of a repository's answer.
func mergeSettingsJSON(rm *repoMeta, out *github.Repository) {
	out.AllowMergeCommit = github.Bool(!rm.NoMergeCommit)
	out.AllowSquashMerge = github.Bool(!rm.NoSquashMerge)
	out.AllowRebaseMerge = github.Bool(!rm.NoRebaseMerge)
}
