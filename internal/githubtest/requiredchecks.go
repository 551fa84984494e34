package githubtest

import (
	"fmt"
	"time"
)

// Required status checks bound to the GitHub App that must provide them. The protection is
// read by parseProtection (protectionrules.go) and enforced on merges by mergeBlockersLocked
// (mergerules.go); this file binds the checks given without an App when a protection is
// stored, and holds the helpers tests use to act as another App (AddCheckRun) and to read
// what a branch requires (RequiredChecks).

// anyApp is a required check's App when any source may provide it (app_id -1).
const anyApp = int64(-1)

// bindRequiredChecksLocked binds each required check of p given without an App (a deprecated
// context, or a check without app_id) to the App that most recently provided a check of that
// name on rm; a check no App provided yet may come from any source. GitHub: "Omit this field
// to automatically select the GitHub App that has recently provided this check, or any app if
// it was not set by a GitHub App"; contexts "If any of these checks have recently been set by
// a particular GitHub App, they will be required to come from that app in future".
// https://docs.github.com/rest/branches/branch-protection#update-branch-protection
func (s *Server) bindRequiredChecksLocked(rm *repoMeta, p *protection) {
	for _, c := range p.RequiredStatusChecks {
		if _, bound := p.RequiredCheckApps[c]; bound {
			continue
		}
		if app := s.lastCheckAppLocked(rm, c); app > 0 {
			if p.RequiredCheckApps == nil {
				p.RequiredCheckApps = map[string]int64{}
			}
			p.RequiredCheckApps[c] = app
		}
	}
}

// lastCheckAppLocked is the App of the newest check run named context, or commit status of
// that context, an App set on rm; 0 when none did.
func (s *Server) lastCheckAppLocked(rm *repoMeta, context string) int64 {
	key := repoKey(rm.Owner, rm.Name)
	app, newest := int64(0), int64(0)
	for id, cr := range s.st.CheckRuns {
		if cr.Repo == key && cr.Name == context && cr.AppID > 0 && id > newest {
			app, newest = cr.AppID, id
		}
	}
	for _, st := range rm.Statuses {
		if st.Context == context && st.AppID > 0 && st.ID > newest {
			app, newest = st.AppID, st.ID
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
