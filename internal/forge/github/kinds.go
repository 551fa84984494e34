package github

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
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

// ClassifyTransport classifies each GraphQL request once, at the top of a client's chain, for
// the transports below (read-only guard, retry, budget, read limit, counters), remembering the
// verdict for each query text it parsed: fleetbot sends the same few queries over and over,
// and parsing a 100-repository scan on every request showed in a busy service's profile. The
// verdict is a function of the text alone, so the cache is exact. It is safe for concurrent use.
type ClassifyTransport struct {
	next    http.RoundTripper
	queries *lru.Cache[string, bool]
}

// classifyCacheSize is how many query texts a ClassifyTransport remembers.
const classifyCacheSize = 256

// NewClassifyTransport returns a ClassifyTransport sending through next.
func NewClassifyTransport(next http.RoundTripper) *ClassifyTransport {
	queries, _ := lru.New[string, bool](classifyCacheSize) // fails only for a size <= 0
	return &ClassifyTransport{next: next, queries: queries}
}

// RoundTrip implements http.RoundTripper.
func (t *ClassifyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !isGraphQL(req) {
		return t.next.RoundTrip(req)
	}
	if _, ok := req.Context().Value(readKey{}).(bool); ok {
		return t.next.RoundTrip(req)
	}
	query, ok := graphQLQuery(req)
	read := false
	if ok {
		var known bool
		if read, known = t.queries.Get(query); !known {
			read = isReadDocument(query)
			t.queries.Add(query, read)
		}
	}
	return t.next.RoundTrip(req.WithContext(context.WithValue(req.Context(), readKey{}, read)))
}

// isReadQuery decodes a GraphQL request's body and reports whether every operation in it is a
// query.
func isReadQuery(req *http.Request) bool {
	query, ok := graphQLQuery(req)
	return ok && isReadDocument(query)
}

// graphQLQuery decodes the query text of a GraphQL request's body.
func graphQLQuery(req *http.Request) (string, bool) {
	body, err := req.GetBody()
	if err != nil {
		return "", false
	}
	defer body.Close()
	var gq struct {
		Query string `json:"query"`
	}
	if err := json.NewDecoder(io.LimitReader(body, 1<<20)).Decode(&gq); err != nil {
		return "", false
	}
	return gq.Query, true
}

// isReadDocument reports whether every operation of a GraphQL document is a query.
func isReadDocument(query string) bool {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
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
	if content, _ := req.Context().Value(contentKey{}).(bool); content && isGraphQL(req) {
		return kindContent // a mutation that moves a ref (refs.go)
	}
	for _, re := range contentCreating[req.Method] {
		if re.MatchString(req.URL.Path) {
			return kindContent
		}
	}
	return kindWrite
}
