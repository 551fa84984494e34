package githubtest

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Required status checks, as GitHub's branch protection keeps and enforces them:
// https://docs.github.com/rest/branches/branch-protection#update-branch-protection and
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-status-checks-before-merging
//
// A required check names a context and, optionally, the GitHub App that must provide it
// (app_id; -1 or absent-with-no-App-history: any source). A check bound to an App is satisfied
// only by that App's newest check run of that name on the pull request's head, completed as
// success, neutral or skipped: a check run of another App or a commit status of the same
// context does not count. An unbound check is satisfied by the newest check run of that name or
// the newest commit status of that context, whichever source. Merging a pull request whose
// base requires a check that is not satisfied answers 405, unless a repository admin merges
// and the protection does not enforce its rules on admins.

// requiredCheckRequest is one entry of required_status_checks.checks in a protection request.
type requiredCheckRequest struct {
	Context string `json:"context"`
	AppID   *int64 `json:"app_id"`
}

// anyApp is a required check's App when any source may provide it.
const anyApp = int64(-1)

// setRequiredChecksLocked stores the required status checks of a protection request on p: the
// deprecated contexts, or checks with their Apps. A context given without an App is bound to
// the App that most recently provided a check run of that name on the repository, as GitHub
// does, or to any source. GitHub's schema takes contexts or checks, not both, and not neither.
func (s *Server) setRequiredChecksLocked(rm *repoMeta, p *protection, strict bool, contexts []string, checks []requiredCheckRequest) error {
	switch {
	case contexts != nil && checks != nil:
		return errorf(http.StatusUnprocessableEntity, "Invalid request.\n\nOnly one of contexts and checks may be given in required_status_checks.")
	case contexts == nil && checks == nil:
		return errorf(http.StatusUnprocessableEntity, "Invalid request.\n\nNo subschema in \"anyOf\" matched.")
	}
	p.HasStatusChecks, p.StrictStatusChecks, p.RequiredStatusChecks, p.RequiredCheckApps = true, strict, nil, map[string]int64{}
	for _, c := range contexts {
		checks = append(checks, requiredCheckRequest{Context: c})
	}
	for _, c := range checks {
		if c.Context == "" {
			return validationFailed("RequiredStatusCheck", "context", "missing_field")
		}
		app := anyApp
		switch {
		case c.AppID != nil && *c.AppID > 0:
			app = *c.AppID
		case c.AppID == nil:
			app = s.lastCheckAppLocked(rm, c.Context)
		}
		if _, dup := p.RequiredCheckApps[c.Context]; !dup {
			p.RequiredStatusChecks = append(p.RequiredStatusChecks, c.Context)
		}
		p.RequiredCheckApps[c.Context] = app
	}
	return nil
}

// lastCheckAppLocked is the App of the newest check run named context on rm, or anyApp.
func (s *Server) lastCheckAppLocked(rm *repoMeta, context string) int64 {
	key := repoKey(rm.Owner, rm.Name)
	app, newest := anyApp, int64(0)
	for id, cr := range s.st.CheckRuns {
		if cr.Repo == key && cr.Name == context && id > newest {
			app, newest = cr.AppID, id
		}
	}
	return app
}

// checkApp is the App a required check is bound to: its id, or nil for any source (GitHub
// answers null).
func (p *protection) checkApp(context string) any {
	if app, ok := p.RequiredCheckApps[context]; ok && app > 0 {
		return app
	}
	return nil
}

// checksJSON is required_status_checks.checks of a protection answer.
func (p *protection) checksJSON() []map[string]any {
	out := []map[string]any{}
	for _, c := range p.RequiredStatusChecks {
		out = append(out, map[string]any{"context": c, "app_id": p.checkApp(c)})
	}
	return out
}

// requiredChecksRefusalLocked is GitHub's 405 message when actor may not merge is because a
// required status check of its base branch is not satisfied by its head; "" when it may.
func (s *Server) requiredChecksRefusalLocked(rm *repoMeta, is *issue, actor string) string {
	p := rm.Protection[is.Pull.Base]
	if p == nil || !p.HasStatusChecks {
		return ""
	}
	if !p.EnforceAdmins && s.effectivePermission(rm, actor) == "admin" {
		return "" // an admin may bypass a protection not enforced on admins
	}
	for _, c := range p.RequiredStatusChecks {
		switch s.checkStateLocked(rm, is.Pull.HeadSHA, c, p.RequiredCheckApps[c]) {
		case checkPassed:
		case checkFailing:
			return fmt.Sprintf("Required status check %q is failing.", c)
		case checkWrongApp:
			return fmt.Sprintf("Required status check %q was not set by the expected GitHub app.", c)
		default:
			return fmt.Sprintf("Required status check %q is expected.", c)
		}
	}
	return ""
}

// A required check's state on a commit.
const (
	checkMissing  = "missing"
	checkPending  = "pending"
	checkPassed   = "passed"
	checkFailing  = "failing"
	checkWrongApp = "wrong app"
)

// checkStateLocked is the state of required check context (bound to app, or anyApp) on sha.
func (s *Server) checkStateLocked(rm *repoMeta, sha, context string, app int64) string {
	key := repoKey(rm.Owner, rm.Name)
	other := false
	for _, id := range slices.Backward(slices.Sorted(maps.Keys(s.st.CheckRuns))) {
		cr := s.st.CheckRuns[id]
		if cr.Repo != key || cr.HeadSHA != sha || cr.Name != context {
			continue
		}
		if app > 0 && cr.AppID != app {
			other = true
			continue
		}
		switch {
		case cr.Status != "completed":
			return checkPending
		case cr.Conclusion == "success" || cr.Conclusion == "neutral" || cr.Conclusion == "skipped":
			return checkPassed
		}
		return checkFailing
	}
	for _, st := range slices.Backward(rm.Statuses) {
		if st.SHA != sha || st.Context != context {
			continue
		}
		if app > 0 && (app != s.cfg.appID || !strings.EqualFold(st.Creator, s.botLogin())) {
			other = true
			break
		}
		switch st.State {
		case "success":
			return checkPassed
		case "pending":
			return checkPending
		}
		return checkFailing
	}
	if other {
		return checkWrongApp
	}
	return checkMissing
}

// requiredChecksBlockLocked reports whether a required status check keeps an open pull request
// from merging (its mergeStateStatus is then BLOCKED).
func (s *Server) requiredChecksBlockLocked(rm *repoMeta, is *issue) bool {
	p := rm.Protection[is.Pull.Base]
	if p == nil || !p.HasStatusChecks {
		return false
	}
	for _, c := range p.RequiredStatusChecks {
		if s.checkStateLocked(rm, is.Pull.HeadSHA, c, p.RequiredCheckApps[c]) != checkPassed {
			return true
		}
	}
	return false
}

// AddCheckRun records a completed check run named name with conclusion on commit sha of
// owner/repo, as the GitHub App appID posted it (another App than fleetbot's: a CI system,
// GitHub Actions is 15368), bypassing HTTP. It returns the check run's id.
func (s *Server) AddCheckRun(appID int64, owner, repo, sha, name, conclusion string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil {
		return 0, fmt.Errorf("repository %s/%s not found", owner, repo)
	}
	now := s.clock.Now()
	cr := &checkRun{ID: s.st.nextID(), Repo: repoKey(owner, repo), Name: name, HeadSHA: sha, Status: "completed",
		Conclusion: conclusion, StartedAt: now, CompletedAt: now, AppID: appID}
	s.st.CheckRuns[cr.ID] = cr
	return cr.ID, nil
}

// RequiredChecks returns the required status checks of branch of owner/repo, context -> the
// App that must provide it (0: any source); nil when the branch requires none.
func (s *Server) RequiredChecks(owner, repo, branch string) map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	rm := s.st.Repos[repoKey(owner, repo)]
	if rm == nil || rm.Protection[branch] == nil || !rm.Protection[branch].HasStatusChecks {
		return nil
	}
	p := rm.Protection[branch]
	out := map[string]int64{}
	for _, c := range p.RequiredStatusChecks {
		out[c] = max(p.RequiredCheckApps[c], 0)
	}
	return out
}

// checkRunAppJSON is the App of a check run in a check run answer: fleetbot's, or the one
// AddCheckRun named (its id and a slug of its own).
func (s *Server) checkRunAppJSON(cr *checkRun, created time.Time) map[string]any {
	app := s.appJSON(created)
	if cr.AppID != 0 && cr.AppID != s.cfg.appID {
		slug := fmt.Sprintf("app-%d", cr.AppID)
		app["id"], app["slug"], app["name"], app["node_id"] = cr.AppID, slug, slug, nodeID("App", cr.AppID)
		app["client_id"], app["html_url"] = fmt.Sprintf("Iv1.%016x", cr.AppID), s.URL+"/apps/"+slug
	}
	return app
}
