package github

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"
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
		// A git push (ContentTransportGit): GitHub counts pushes against the same limits.
		regexp.MustCompile(`/[^/]+/[^/]+\.git/git-receive-pack$`),
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

// isReadRequest reports whether a request only reads: a GET, HEAD or OPTIONS, or a GraphQL
// POST whose document holds queries only (GitHub counts it as 1 point, like a GET; a mutation
// costs 5). The document is parsed, not matched as text, so no mutation passes as a read.
func isReadRequest(req *http.Request) bool {
	if isRead(req.Method) {
		return true
	}
	if !isGraphQL(req) {
		return false
	}
	if read, ok := req.Context().Value(readKey{}).(bool); ok {
		return read
	}
	return isReadQuery(req)
}

// isGraphQL reports whether req is a GraphQL request with a body that can be read again.
func isGraphQL(req *http.Request) bool {
	return req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/graphql") && req.GetBody != nil
}

// readKey is the context key under which classified records whether a GraphQL request only
// reads.
type readKey struct{}

// classified returns req with its GraphQL body classified once (a read query or not), so that
// the transports below do not decode and parse it again (four of them ask). Other requests are
// returned as they are: their method says.
func classified(req *http.Request) *http.Request {
	if !isGraphQL(req) {
		return req
	}
	if _, ok := req.Context().Value(readKey{}).(bool); ok {
		return req
	}
	return req.WithContext(context.WithValue(req.Context(), readKey{}, isReadQuery(req)))
}

// isReadQuery decodes a GraphQL request's body and reports whether every operation in it is a
// query.
func isReadQuery(req *http.Request) bool {
	body, err := req.GetBody()
	if err != nil {
		return false
	}
	defer body.Close()
	var gq struct {
		Query string `json:"query"`
	}
	if err := json.NewDecoder(io.LimitReader(body, 1<<20)).Decode(&gq); err != nil {
		return false
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: gq.Query})
	if err != nil || len(doc.Operations) == 0 {
		return false
	}
	for _, op := range doc.Operations {
		if op.Operation != ast.Query {
			return false
		}
	}
	return true
}

func kindOf(req *http.Request) kind {
	if isReadRequest(req) {
		return kindRead
	}
	for _, re := range contentCreating[req.Method] {
		if re.MatchString(req.URL.Path) {
			return kindContent
		}
	}
	return kindWrite
}
