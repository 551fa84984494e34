package github

import (
	"net/http"
	"regexp"
)

// kind is how a request counts against GitHub's limits.
type kind int

const (
	kindRead    kind = iota // GET, HEAD (and OPTIONS): the hourly request budget only
	kindWrite               // any other method: serialised
	kindContent             // a write that creates content: also the 80/min, 500/h windows
)

// contentCreating lists, per method, the endpoints GitHub counts as content creation for its
// secondary limits (https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api#about-secondary-rate-limits).
// Patterns are anchored at the end only, so an Enterprise /api/v3 prefix does not matter.
// Moving a ref is counted too: it publishes commits (a push), and over-counting only slows us.
var contentCreating = map[string][]*regexp.Regexp{
	http.MethodPost: {
		regexp.MustCompile(`/repos/[^/]+/[^/]+/git/(blobs|trees|commits|tags|refs)/?$`),
		regexp.MustCompile(`/repos/[^/]+/[^/]+/(pulls|issues|releases|merges|forks|generate|check-runs|dispatches)/?$`),
		regexp.MustCompile(`/repos/[^/]+/[^/]+/(pulls|issues)/\d+/(comments|reviews)/?$`),
		regexp.MustCompile(`/repos/[^/]+/[^/]+/pulls/\d+/comments/\d+/replies/?$`),
		regexp.MustCompile(`/repos/[^/]+/[^/]+/commits/[^/]+/comments/?$`),
		regexp.MustCompile(`/repos/[^/]+/[^/]+/statuses/[^/]+/?$`),
		regexp.MustCompile(`/(orgs/[^/]+|user)/repos/?$`),
	},
	http.MethodPatch: {
		regexp.MustCompile(`/repos/[^/]+/[^/]+/git/refs/.+$`),
	},
	http.MethodPut: {
		regexp.MustCompile(`/repos/[^/]+/[^/]+/contents/.+$`),
		regexp.MustCompile(`/repos/[^/]+/[^/]+/pulls/\d+/merge/?$`),
	},
}

func isRead(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, "":
		return true
	}
	return false
}

func kindOf(req *http.Request) kind {
	if isRead(req.Method) {
		return kindRead
	}
	for _, re := range contentCreating[req.Method] {
		if re.MatchString(req.URL.Path) {
			return kindContent
		}
	}
	return kindWrite
}
