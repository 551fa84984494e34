package githubtest

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// This file holds behaviours of GitHub the fake reproduces because fleetbot must cope with
// them (docs/github.md lists each with GitHub's page): who commits through the API, which
// visibilities an owner may use, what an installation token may not read.

// WithEnterpriseServer makes the fake answer as GitHub Enterprise Server: every organization
// may have internal repositories, and commits made through the API are not signed (GHES signs
// web commits only when an administrator configured a signing key).
func WithEnterpriseServer() Option { return func(c *config) { c.ghes = true } }

// SetOrgEnterprise says whether org belongs to an enterprise account (GitHub Enterprise Cloud),
// which is what lets it have internal repositories on github.com.
func (s *Server) SetOrgEnterprise(org string, on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.st.Accounts[strings.ToLower(org)]
	if a == nil || a.Type != "Organization" {
		s.fail(errorf(http.StatusNotFound, "organization %s not found", org))
		return
	}
	a.Enterprise = on
	s.persistLocked()
}

// checkVisibilityLocked refuses a visibility the owner cannot have: internal exists only for
// organizations owned by an enterprise (GitHub Enterprise Cloud) and on GitHub Enterprise
// Server; never for a user account. GitHub's exact wording is not documented; the fake answers
// with a 422 naming the field, as GitHub's validation errors do.
func (s *Server) checkVisibilityLocked(owner, visibility string) *httpError {
	switch visibility {
	case "", "public", "private":
		return nil
	case "internal":
		a := s.st.Accounts[strings.ToLower(owner)]
		if a != nil && a.Type == "Organization" && (s.cfg.ghes || a.Enterprise) {
			return nil
		}
		return &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed",
			errors: []fieldError{{Resource: "Repository", Field: "visibility", Code: "invalid",
				Message: "Visibility can only be internal for repositories owned by an enterprise."}}}
	}
	return &httpError{status: http.StatusUnprocessableEntity, message: "Validation Failed",
		errors: []fieldError{{Resource: "Repository", Field: "visibility", Code: "invalid"}}}
}

// webFlow is the committer GitHub records on the commits it writes for an App through the API
// (and on web and merge commits): "GitHub <noreply@github.com>" on github.com; on GitHub
// Enterprise Server "GitHub Enterprise" with the server's host.
func (s *Server) webFlow(now time.Time) *object.Signature {
	if s.cfg.ghes {
		host := "github.example.com"
		if u, err := url.Parse(s.URL); err == nil && u.Hostname() != "" {
			host = u.Hostname()
		}
		return &object.Signature{Name: "GitHub Enterprise", Email: "noreply@" + host, When: now}
	}
	return &object.Signature{Name: "GitHub", Email: "noreply@github.com", When: now}
}

// apiCommitIdentityLocked is who GitHub records on a commit created through the API without
// author or committer, and whether it signs it:
//   - a GitHub App (installation token): author the App's bot, committer web-flow
//     ("GitHub <noreply@github.com>"), signed and verified on github.com, unsigned on GHES;
//   - a user (personal access token): author and committer the user, unsigned.
func (s *Server) apiCommitIdentityLocked(actor string, now time.Time) (author, committer *object.Signature, signed bool) {
	self := &object.Signature{Name: actor, Email: s.noreplyEmail(actor), When: now}
	if a := s.st.Accounts[strings.ToLower(actor)]; a != nil && a.Type == "Bot" {
		return self, s.webFlow(now), !s.cfg.ghes
	}
	return self, self, false
}

// handleGetAuthenticatedUser serves GET /user: an installation token is not a user, and
// GitHub answers it 403 "Resource not accessible by integration" (a GitHub App learns its bot
// login from GET /app, with its JWT).
func (s *Server) handleGetAuthenticatedUser(w http.ResponseWriter, r *http.Request) {
	if p := principalOf(r); p.kind == "installation" || p.kind == "app" {
		writeErr(w, errorf(http.StatusForbidden, "Resource not accessible by integration"))
		return
	}
	login := principalOf(r).login
	if s.st.Accounts[strings.ToLower(login)] == nil {
		writeErr(w, errNotFound)
		return
	}
	writeJSON(w, http.StatusOK, s.fullUserJSON(login))
}

// newMergeCommitLocked writes the commit of a merge done on GitHub (REST merge, auto-merge):
// authored by the actor, committed by web-flow and signed by GitHub (not on GHES).
func (s *Server) newMergeCommitLocked(rm *repoMeta, g *gitRepo, tree plumbing.Hash, parents []plumbing.Hash, message, actor string) (plumbing.Hash, error) {
	now := s.clock.Now()
	author := &object.Signature{Name: actor, Email: s.noreplyEmail(actor), When: now}
	h, err := g.writeCommit(&object.Commit{Author: *author, Committer: *s.webFlow(now), Message: message,
		TreeHash: tree, ParentHashes: parents})
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if !s.cfg.ghes {
		rm.Verified[h.String()] = true
	}
	return h, nil
}

// mergeStateLocked is an open pull request's mergeStateStatus as far as the fake models it:
// BLOCKED while the base branch's protection requires something not yet there (a review, a
// code owner's review, a required status check: mergeBlockersLocked), CLEAN otherwise
// (mergeable, nothing to wait for).
func (s *Server) mergeStateLocked(rm *repoMeta, is *issue) string {
	if len(s.mergeBlockersLocked(rm, is)) > 0 || len(s.rulesetBlockersLocked(rm, is, principal{kind: "anonymous"})) > 0 {
		return "BLOCKED"
	}
	return "CLEAN"
}

// autoMergeRefusalLocked is GitHub's GraphQL error for enablePullRequestAutoMerge on a pull
// request that cannot get auto-merge, "" when it can: the repository does not allow
// auto-merge, or the pull request is already mergeable ("clean": nothing to wait for, merge it
// instead). The messages are GitHub's, doubled "Pull request" included.
func (s *Server) autoMergeRefusalLocked(rm *repoMeta, is *issue) string {
	switch {
	case !rm.AllowAutoMerge:
		return "Pull request Auto merge is not allowed for this repository"
	case s.mergeStateLocked(rm, is) == "CLEAN":
		return "Pull request Pull request is in clean status"
	}
	return ""
}
