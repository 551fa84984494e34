package githubtest

import (
	"fmt"
	"strings"
)

// PlanFree is GitHub Free for organizations: branch protection (and rulesets) exist only on
// public repositories; on a private one every branch-protection endpoint answers 403.
// https://docs.github.com/get-started/learning-about-github/githubs-plans
const PlanFree = "free"

// upgradeMessage is GitHub's answer to a branch-protection request on a private repository
// of an organization on the free plan.
const upgradeMessage = "Upgrade to GitHub Pro or make this repository public to enable this feature."

// protectionDocURL is the documentation_url GitHub sends with it, by method.
var protectionDocURL = map[string]string{
	"GET":    "https://docs.github.com/rest/branches/branch-protection#get-branch-protection",
	"PUT":    "https://docs.github.com/rest/branches/branch-protection#update-branch-protection",
	"DELETE": "https://docs.github.com/rest/branches/branch-protection#delete-branch-protection",
}

// SetOrgPlan sets an organization's plan: PlanFree, or "" for a paid one (the default).
func (s *Server) SetOrgPlan(org, plan string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.st.Accounts[strings.ToLower(org)]
	if a == nil {
		s.fail(fmt.Errorf("SetOrgPlan: no organization %s", org))
		return
	}
	a.Plan = plan
	s.persistLocked()
}

// SetOrgBasePermission sets an organization's base permission (read, write, admin, or none),
// as its owners do in its settings ("Member privileges").
func (s *Server) SetOrgBasePermission(org, perm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.st.Accounts[strings.ToLower(org)]
	if a == nil || a.Type != "Organization" {
		s.fail(fmt.Errorf("SetOrgBasePermission: no organization %s", org))
		return
	}
	switch perm {
	case "read", "write", "admin", "none":
	default:
		s.fail(fmt.Errorf("SetOrgBasePermission: %q is not a base permission (read, write, admin, none)", perm))
		return
	}
	a.BasePermission = perm
	s.persistLocked()
}
