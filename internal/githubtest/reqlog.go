package githubtest

import (
	"net/http"
	"strings"
	"time"
)

// Class says what a request does to GitHub's state, as GitHub's limits see it.
type Class int

const (
	// Read does not change anything (GET, HEAD, git fetch/clone).
	Read Class = iota
	// Write changes state without creating content (update a ref, add a label, set permissions).
	Write
	// ContentCreating creates content and counts against the secondary content-creation limit
	// (blobs, trees, commits, refs, pull requests, issues, comments, repos, contents, merges, pushes).
	ContentCreating
)

func (c Class) String() string {
	switch c {
	case Read:
		return "read"
	case Write:
		return "write"
	case ContentCreating:
		return "content-creating"
	}
	return "unknown"
}

// Request is one entry of the request log.
type Request struct {
	Method string
	// Path is the URL path as requested (including /api/v3).
	Path string
	// Route is the matched route pattern without the /api/v3 prefix, e.g.
	// "POST /repos/{owner}/{repo}/git/commits", or "" when no route matched.
	Route string
	Class Class
	// Status is the response status; 0 when the connection was dropped by a fault.
	Status int
	// Principal is the login the request was authenticated as ("" when anonymous).
	Principal string
	// Time is the fake time the request arrived.
	Time time.Time
	// RetryAfter is the Retry-After of a rate-limit answer (fake time; 0 when it had none).
	RetryAfter time.Duration
	// Repo is the repository ("owner/name") the request reads or writes: the one its REST or
	// git path names, or the one a GraphQL mutation named by its node id (updateRefs); "" for
	// requests on no one repository (an organization's, an App's, a GraphQL query).
	Repo string
}

// mutatedRepoKey is the context key under which a GraphQL mutation's resolver records the
// repository it wrote (a *string), for Request.Repo.
type mutatedRepoKey struct{}

// repoOfPath is the repository a REST (under /repos/{owner}/{repo}) or git smart-HTTP route
// names in path; "" for any other.
func repoOfPath(route, path string) string {
	var rest string
	switch {
	case strings.Contains(route, " /repos/{owner}/{repo}"):
		_, rest, _ = strings.Cut(path, "/repos/")
	case strings.Contains(route, " /{owner}/{repo}/"):
		rest = strings.TrimPrefix(path, "/")
	default:
		return ""
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[0] + "/" + strings.TrimSuffix(parts[1], ".git")
}

// Counts sums a request log by class.
type Counts struct {
	Reads int
	// Writes counts every mutating request, including the content-creating ones.
	Writes int
	// ContentCreating counts the subset of Writes that create content.
	ContentCreating int
}

// contentCreating lists the routes that create content (method + pattern without /api/v3).
var contentCreating = map[string]bool{
	"POST /repos/{owner}/{repo}/git/blobs":                true,
	"POST /repos/{owner}/{repo}/git/trees":                true,
	"POST /repos/{owner}/{repo}/git/commits":              true,
	"POST /repos/{owner}/{repo}/git/refs":                 true,
	"PUT /repos/{owner}/{repo}/contents/{path...}":        true,
	"POST /repos/{owner}/{repo}/pulls":                    true,
	"PUT /repos/{owner}/{repo}/pulls/{number}/merge":      true,
	"POST /repos/{owner}/{repo}/issues":                   true,
	"POST /repos/{owner}/{repo}/issues/{number}/comments": true,
	"POST /orgs/{org}/repos":                              true,
	"POST /user/repos":                                    true,
	"POST /{owner}/{repo}/git-receive-pack":               true,
}

// classify returns the class of a request on route.
func classify(method, route string) Class {
	if contentCreating[route] {
		return ContentCreating
	}
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return Read
	}
	// git fetch negotiation is a POST that reads.
	if strings.HasSuffix(route, "/git-upload-pack") {
		return Read
	}
	return Write
}

func (s *Server) record(e Request) {
	s.ctlMu.Lock()
	s.reqlog = append(s.reqlog, e)
	s.ctlMu.Unlock()
	if e.Class != Read {
		s.changes.notify()
	}
}

// Requests returns a copy of the request log, oldest first.
func (s *Server) Requests() []Request {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	return append([]Request(nil), s.reqlog...)
}

// Counts sums the request log by class.
func (s *Server) Counts() Counts {
	var c Counts
	for _, e := range s.Requests() {
		switch e.Class {
		case Read:
			c.Reads++
		case Write:
			c.Writes++
		case ContentCreating:
			c.Writes++
			c.ContentCreating++
		}
	}
	return c
}

// ResetLog empties the request log, e.g. after a test's setup.
func (s *Server) ResetLog() {
	s.ctlMu.Lock()
	defer s.ctlMu.Unlock()
	s.reqlog = nil
}
