package githubtest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/parser"
	"github.com/vektah/gqlparser/v2/validator"
)

// GraphQLSchemaEnv names a file of GitHub's published GraphQL schema (schema.graphql of the npm
// package @octokit/graphql-schema) to validate against instead of the committed subset of it
// (GraphQLCopy in SchemaCopiesDir: the fields the fake answers). Every GraphQL document the fake
// receives is validated against the schema before it runs, as GitHub does: a field GitHub does
// not have fails here too.
const GraphQLSchemaEnv = "FLEETBOT_GITHUB_GRAPHQL_SCHEMA"

// githubSchema is GitHub's GraphQL schema, loaded once per process: it is read-only after
// loading and takes ~40 ms to parse.
var githubSchema = sync.OnceValues(loadGitHubSchema)

// GitHubGraphQLSchema returns GitHub's GraphQL schema and the file it came from, or an error
// saying how to install it.
func GitHubGraphQLSchema() (*ast.Schema, string, error) {
	s, err := githubSchema()
	if err != nil {
		return nil, "", err
	}
	return s.schema, s.path, nil
}

type loadedSchema struct {
	schema *ast.Schema
	path   string
}

func loadGitHubSchema() (loadedSchema, error) {
	path := os.Getenv(GraphQLSchemaEnv)
	if path == "" {
		root, err := moduleRoot()
		if err != nil {
			return loadedSchema{}, err
		}
		path = filepath.Join(root, SchemaCopiesDir, GraphQLCopy)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return loadedSchema{}, fmt.Errorf("reading GitHub's GraphQL schema: %w (run make schemas, or set %s)", err, GraphQLSchemaEnv)
	}
	doc, err := parser.ParseSchemas(validator.Prelude, &ast.Source{Name: path, Input: string(b)})
	if err != nil {
		return loadedSchema{}, fmt.Errorf("parsing %s: %w", path, err)
	}
	// GitHub's published SDL defines a few fields twice (EnterpriseOwnerInfo.
	// repositoryDeployKeySetting in 15.26); GitHub's own server obviously has each once.
	for _, d := range doc.Definitions {
		seen := map[string]bool{}
		d.Fields = slices.DeleteFunc(d.Fields, func(f *ast.FieldDefinition) bool {
			dup := seen[f.Name]
			seen[f.Name] = true
			return dup
		})
	}
	s, gerr := validator.ValidateSchemaDocument(doc)
	if gerr != nil {
		return loadedSchema{}, fmt.Errorf("loading %s: %w", path, gerr)
	}
	return loadedSchema{schema: s, path: path}, nil
}

// moduleRoot finds the directory holding go.mod above the working directory (tests run in
// their package directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// maxGraphQLBody bounds the GraphQL request body the fake reads.
const maxGraphQLBody = 1 << 20

// gqlRequest is a GraphQL request body.
type gqlRequest struct {
	Query         string         `json:"query"`
	Variables     map[string]any `json:"variables"`
	OperationName string         `json:"operationName"`
}

// parseGraphQL parses a document, validating it against GitHub's schema when one is loaded.
// Documents are kept (parsed, validated, then only read): a client sends the same few queries
// over and over, and parsing a scan of 100 repositories each time was a tenth of the fake's
// time.
func (s *Server) parseGraphQL(query string) (*ast.QueryDocument, gqlerror.List) {
	p := s.parsed(query)
	if len(p.errs) > 0 {
		return nil, p.errs
	}
	return p.doc, nil
}

// parsed returns query parsed (doc, nil when it does not parse) and validated (errs).
func (s *Server) parsed(query string) parsedQuery {
	if p, ok := s.queries.Get(query); ok {
		return p
	}
	var p parsedQuery
	p.doc, p.errs = parseAndValidate(query)
	s.queries.Add(query, p)
	return p
}

// parsedQuery is a GraphQL document as parsed returns it.
type parsedQuery struct {
	doc  *ast.QueryDocument
	errs gqlerror.List
}

// queryCacheSize is how many GraphQL documents a server keeps parsed.
const queryCacheSize = 512

func parseAndValidate(query string) (*ast.QueryDocument, gqlerror.List) {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		return nil, gqlerror.List{gqlerror.Wrap(err)}
	}
	if sc, _, err := GitHubGraphQLSchema(); err == nil {
		return doc, validator.ValidateWithRules(sc, doc, nil)
	}
	return doc, nil
}

// operation picks the operation a request runs, as GraphQL's GetOperation does.
func operation(doc *ast.QueryDocument, name string) (*ast.OperationDefinition, error) {
	if name != "" {
		if op := doc.Operations.ForName(name); op != nil {
			return op, nil
		}
		return nil, githubError(fmt.Sprintf("No operation named %q", name))
	}
	if len(doc.Operations) != 1 {
		return nil, githubError("An operation name is required when the document has several operations")
	}
	return doc.Operations[0], nil
}

// graphQLOperation reports whether a GraphQL request body is a query (a read, for the request
// log and the limits: GitHub counts a query as 1 point and a mutation as 5), and the names of
// the fields a mutation selects on Mutation (each needs its permission).
func (s *Server) graphQLOperation(body []byte) (read bool, mutations []string) {
	var req gqlRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return false, nil
	}
	doc := s.parsed(req.Query).doc
	if doc == nil {
		return false, nil
	}
	op, err := operation(doc, req.OperationName)
	if err != nil {
		return false, nil
	}
	if op.Operation == ast.Query {
		return true, nil
	}
	for _, sel := range op.SelectionSet {
		if f, ok := sel.(*ast.Field); ok && f.Name != "__typename" {
			mutations = append(mutations, f.Name)
		}
	}
	return false, mutations
}

// gqlObject is a GraphQL object of the fake: it resolves one field at a time.
type gqlObject interface {
	typename() string
	field(name string, args map[string]any) (any, error)
}

// githubError is an error message as GitHub words it (capitalised, with its full stop).
type githubError string

func (e githubError) Error() string { return string(e) }

// gqlNotFound is a field error GitHub reports with type NOT_FOUND and a null value.
type gqlNotFound struct{ msg string }

func (e *gqlNotFound) Error() string { return e.msg }

// runGraphQL executes an operation on root over the fake's state (under the lock) and writes
// GitHub's answer: {"data": ...} plus "errors" for fields that failed, each with its path.
func (s *Server) runGraphQL(w http.ResponseWriter, doc *ast.QueryDocument, op *ast.OperationDefinition, root gqlObject, vars map[string]any) {
	ex := &gqlExec{s: s, doc: doc, vars: vars}
	data := ex.selection(op.SelectionSet, root, nil)
	// The answer is written as it is built: encoding/json would compact the whole of it once
	// more after MarshalJSON, and a page of 100 repositories with their pull request bodies
	// is large.
	b, err := data.appendJSON([]byte(`{"data":`))
	if err == nil && len(ex.errs) > 0 {
		var errs []byte
		if errs, err = json.Marshal(ex.errs); err == nil {
			b = append(append(b, `,"errors":`...), errs...)
		}
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the GraphQL answer: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '}', '\n'))
}

type gqlExec struct {
	s    *Server
	doc  *ast.QueryDocument
	vars map[string]any
	errs []map[string]any
}

func (ex *gqlExec) fail(path []any, err error) {
	e := map[string]any{"message": err.Error(), "path": slices.Clone(path)}
	var nf *gqlNotFound
	var typed *gqlTypedError
	switch {
	case errors.As(err, &nf):
		e["type"] = "NOT_FOUND"
	case errors.As(err, &typed):
		e["type"] = typed.typ
	}
	ex.errs = append(ex.errs, e)
}

// selection resolves a selection set on obj into an ordered JSON object.
func (ex *gqlExec) selection(set ast.SelectionSet, obj gqlObject, path []any) *orderedObject {
	out := &orderedObject{}
	ex.collect(set, obj, path, out)
	return out
}

func (ex *gqlExec) collect(set ast.SelectionSet, obj gqlObject, path []any, out *orderedObject) {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			key := sel.Alias
			if key == "" {
				key = sel.Name
			}
			if sel.Name == "__typename" {
				out.set(key, obj.typename())
				continue
			}
			args := map[string]any{}
			for _, a := range sel.Arguments {
				v, err := a.Value.Value(ex.vars)
				if err != nil {
					ex.fail(append(path, key), err)
					continue
				}
				args[a.Name] = v
			}
			v, err := obj.field(sel.Name, args)
			if err != nil {
				ex.fail(append(path, key), err)
				out.set(key, nil)
				continue
			}
			out.set(key, ex.value(sel.SelectionSet, v, append(path, key)))
		case *ast.InlineFragment:
			if sel.TypeCondition == "" || sel.TypeCondition == obj.typename() || implements(obj, sel.TypeCondition) {
				ex.collect(sel.SelectionSet, obj, path, out)
			}
		case *ast.FragmentSpread:
			if f := ex.doc.Fragments.ForName(sel.Name); f != nil &&
				(f.TypeCondition == obj.typename() || implements(obj, f.TypeCondition)) {
				ex.collect(f.SelectionSet, obj, path, out)
			}
		}
	}
}

func (ex *gqlExec) value(set ast.SelectionSet, v any, path []any) any {
	switch v := v.(type) {
	case gqlObject:
		if v == nil {
			return nil
		}
		return ex.selection(set, v, path)
	case []gqlObject:
		out := make([]any, 0, len(v))
		for i, o := range v {
			out = append(out, ex.value(set, o, append(path, i)))
		}
		return out
	default:
		if len(set) > 0 && v != nil {
			// An object field resolved to something that is not an object: answering it would
			// carry fields nobody selected.
			ex.fail(path, fmt.Errorf("fake github: %T at %v is not a GraphQL object", v, path))
			return nil
		}
		return v
	}
}

// implements reports interface membership for the interfaces fleetbot's queries use.
func implements(obj gqlObject, iface string) bool {
	switch iface {
	case "RepositoryOwner", "Node", "Actor":
		switch obj.typename() {
		case "Organization", "User":
			return true
		}
	case "GitObject":
		return obj.typename() == "Commit"
	}
	return false
}

// orderedObject keeps the selection order of a GraphQL answer, as GitHub does.
type orderedObject struct {
	keys []string
	vals map[string]any
}

func (o *orderedObject) set(k string, v any) {
	if o.vals == nil {
		o.vals = map[string]any{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

// MarshalJSON writes the keys in selection order.
func (o *orderedObject) MarshalJSON() ([]byte, error) { return o.appendJSON(nil) }

// appendJSON appends o to b: nested objects and lists are written in place, leaves through
// encoding/json. (Marshalling each nested object on its own had encoding/json compact the
// whole answer again at every level: a scan of 100 repositories spent most of the fake's
// time there.)
func (o *orderedObject) appendJSON(b []byte) ([]byte, error) {
	b = append(b, '{')
	for i, k := range o.keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, k) // a GraphQL name or alias: [_A-Za-z][_0-9A-Za-z]*
		b = append(b, ':')
		var err error
		if b, err = appendGraphQLValue(b, o.vals[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendGraphQLValue appends one value of a GraphQL answer to b.
func appendGraphQLValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case *orderedObject:
		if v == nil {
			return append(b, "null"...), nil
		}
		return v.appendJSON(b)
	case []any:
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendGraphQLValue(b, e); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	}
	leaf, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, leaf...), nil
}

// --- the object graph -----------------------------------------------------------------------

// gqlQueryRoot is the Query type; who is the caller (a narrowed installation token sees only
// its repositories).
type gqlQueryRoot struct {
	s    *Server
	who  principal
	rate graphQLRate // the call's cost and the budget after it (rateLimit)
}

func (q *gqlQueryRoot) typename() string { return "Query" }

func (q *gqlQueryRoot) field(name string, args map[string]any) (any, error) {
	switch name {
	case "repository":
		owner, repo := str(args["owner"]), str(args["name"])
		rm := q.s.st.Repos[repoKey(owner, repo)]
		if rm == nil || !q.who.inScope(rm) {
			return nil, &gqlNotFound{fmt.Sprintf("Could not resolve to a Repository with the name '%s/%s'.", owner, repo)}
		}
		return &gqlRepo{s: q.s, rm: rm}, nil
	case "repositoryOwner", "organization", "user":
		login := str(args["login"])
		a := q.s.st.Accounts[strings.ToLower(login)]
		if a == nil || (name == "organization" && a.Type != "Organization") || (name == "user" && a.Type == "Organization") {
			if name == "repositoryOwner" {
				return nil, nil // GitHub answers null without an error here
			}
			kind := "Organization"
			if name == "user" {
				kind = "User"
			}
			return nil, &gqlNotFound{fmt.Sprintf("Could not resolve to a%s %s with the login of '%s'.", map[bool]string{true: "n", false: ""}[kind == "Organization"], kind, login)}
		}
		return &gqlOwner{s: q.s, a: a, who: q.who}, nil
	case "rateLimit":
		return q.s.rateLimitObject(q.rate), nil
	}
	return nil, fmt.Errorf("fake github: Query.%s is not implemented", name)
}

type gqlOwner struct {
	s   *Server
	a   *account
	who principal
}

func (o *gqlOwner) typename() string {
	if o.a.Type == "Organization" {
		return "Organization"
	}
	return "User"
}

func (o *gqlOwner) field(name string, args map[string]any) (any, error) {
	switch name {
	case "login":
		return o.a.Login, nil
	case "id":
		return nodeID(o.typename(), o.a.ID), nil
	case "repositories":
		var rms []*repoMeta
		for _, rm := range o.s.st.Repos {
			if strings.EqualFold(rm.Owner, o.a.Login) && o.who.inScope(rm) {
				rms = append(rms, rm)
			}
		}
		sortRepos(rms, args["orderBy"])
		nodes := make([]gqlObject, len(rms))
		for i, rm := range rms {
			nodes[i] = &gqlRepo{s: o.s, rm: rm}
		}
		return connection("RepositoryConnection", nodes, args)
	}
	return nil, fmt.Errorf("fake github: %s.%s is not implemented", o.typename(), name)
}

func sortRepos(rms []*repoMeta, orderBy any) {
	field, dir := "", "ASC"
	if m, ok := orderBy.(map[string]any); ok {
		field, dir = str(m["field"]), str(m["direction"])
	}
	switch field {
	case "NAME":
		sort.Slice(rms, func(i, j int) bool { return strings.ToLower(rms[i].Name) < strings.ToLower(rms[j].Name) })
	default: // CREATED_AT, and GitHub's default order
		sort.Slice(rms, func(i, j int) bool { return rms[i].ID < rms[j].ID })
	}
	if dir == "DESC" {
		slices.Reverse(rms)
	}
}

type gqlRepo struct {
	s  *Server
	rm *repoMeta
}

func (r *gqlRepo) typename() string { return "Repository" }

func (r *gqlRepo) field(name string, args map[string]any) (any, error) {
	rm := r.rm
	switch name {
	case "id":
		return nodeID("Repository", rm.ID), nil
	case "name":
		return rm.Name, nil
	case "nameWithOwner":
		return rm.fullName(), nil
	case "description":
		if rm.Description == "" {
			return nil, nil
		}
		return rm.Description, nil
	case "isArchived":
		return rm.Archived, nil
	case "autoMergeAllowed":
		return rm.AllowAutoMerge, nil
	case "isPrivate":
		return rm.Visibility != "public", nil
	case "visibility":
		return strings.ToUpper(rm.Visibility), nil
	case "url":
		return r.s.URL + "/" + rm.fullName(), nil
	case "repositoryTopics":
		nodes := make([]gqlObject, 0, len(rm.Topics))
		for _, t := range rm.Topics {
			nodes = append(nodes, &gqlPlain{name: "RepositoryTopic", fields: map[string]any{
				"topic": &gqlPlain{name: "Topic", fields: map[string]any{"name": t}}}})
		}
		return connection("RepositoryTopicConnection", nodes, args)
	case "defaultBranchRef":
		return r.ref("refs/heads/" + rm.DefaultBranch)
	case "ref":
		return r.ref(str(args["qualifiedName"]))
	case "pullRequests":
		return r.pullRequests(args)
	case "object":
		return r.object(args)
	}
	return nil, fmt.Errorf("fake github: Repository.%s is not implemented", name)
}

// ref resolves a qualified or short branch name; a missing ref is null, as on GitHub.
func (r *gqlRepo) ref(name string) (any, error) {
	g, err := r.s.openRepoGit(r.rm)
	if err != nil {
		return nil, err
	}
	full := name
	if !strings.HasPrefix(full, "refs/") {
		full = "refs/heads/" + name
	}
	h, ok := g.ref(full)
	if !ok {
		return gqlObject(nil), nil
	}
	prefix, short := "refs/heads/", strings.TrimPrefix(full, "refs/heads/")
	if !strings.HasPrefix(full, "refs/heads/") {
		i := strings.LastIndex(full, "/")
		prefix, short = full[:i+1], full[i+1:]
	}
	return &gqlPlain{name: "Ref", fields: map[string]any{
		"name": short, "prefix": prefix,
		"target": &gqlCommit{s: r.s, rm: r.rm, oid: h.String()},
	}}, nil
}

func (r *gqlRepo) pullRequests(args map[string]any) (any, error) {
	rm := r.rm
	states := map[string]bool{}
	if l, ok := args["states"].([]any); ok {
		for _, s := range l {
			states[str(s)] = true
		}
	}
	var iss []*issue
	for _, n := range slices.Sorted(maps.Keys(rm.Issues)) {
		is := rm.Issues[n]
		if is.Pull == nil {
			continue
		}
		if h := str(args["headRefName"]); h != "" && h != is.Pull.Head {
			continue
		}
		if b := str(args["baseRefName"]); b != "" && b != is.Pull.Base {
			continue
		}
		if len(states) > 0 && !states[gqlPullState(is)] {
			continue
		}
		iss = append(iss, is)
	}
	if m, ok := args["orderBy"].(map[string]any); ok && str(m["direction"]) == "DESC" {
		slices.Reverse(iss) // numbers grow with creation time
	}
	nodes := make([]gqlObject, len(iss))
	for i, is := range iss {
		nodes[i] = r.pull(is)
	}
	return connection("PullRequestConnection", nodes, args)
}

func gqlPullState(is *issue) string {
	switch {
	case is.Pull.Merged:
		return "MERGED"
	case is.State == "open":
		return "OPEN"
	}
	return "CLOSED"
}

func (r *gqlRepo) pull(is *issue) gqlObject {
	p := r.s.pullJSON(r.rm, is)
	return &gqlPlain{name: "PullRequest", fields: map[string]any{
		"id":                nodeID("PullRequest", is.ID),
		"number":            is.Number,
		"state":             gqlPullState(is),
		"title":             is.Title,
		"body":              is.Body,
		"url":               p.GetHTMLURL(),
		"headRefName":       is.Pull.Head,
		"baseRefName":       is.Pull.Base,
		"headRefOid":        p.GetHead().GetSHA(),
		"merged":            is.Pull.Merged,
		"isCrossRepository": false,
		"isDraft":           is.Pull.Draft,
		"createdAt":         gqlDateTime(is.CreatedAt),
		"reviewDecision":    r.s.reviewDecision(r.rm, is),
		"mergedAt":          gqlMergedAt(is),
		"mergeCommit":       r.mergeCommit(is),
		"autoMergeRequest":  r.autoMergeRequest(is),
	}}
}

// gqlPlain is an object whose fields are known values.
type gqlPlain struct {
	name   string
	fields map[string]any
}

func (p *gqlPlain) typename() string { return p.name }

func (p *gqlPlain) field(name string, _ map[string]any) (any, error) {
	v, ok := p.fields[name]
	if !ok {
		return nil, fmt.Errorf("fake github: %s.%s is not implemented", p.name, name)
	}
	return v, nil
}

// connection pages nodes with first/after (GitHub's cursor pagination; at most 100 a page).
func connection(name string, nodes []gqlObject, args map[string]any) (any, error) {
	start := 0
	if a := str(args["after"]); a != "" {
		raw, err := base64.StdEncoding.DecodeString(a)
		n, cerr := strconv.Atoi(strings.TrimPrefix(string(raw), "cursor:v2:"))
		if err != nil || cerr != nil || n < 0 {
			return nil, githubError(fmt.Sprintf("`%s` does not appear to be a valid cursor.", a))
		}
		start = n + 1
	}
	first, hasFirst := intArg(args["first"])
	if !hasFirst {
		if _, hasLast := args["last"]; !hasLast {
			return nil, githubError(fmt.Sprintf("You must provide a `first` or `last` value to properly paginate the `%s` connection.", strings.TrimSuffix(name, "Connection")))
		}
		first = int64(len(nodes))
	}
	if first < 0 || first > 100 {
		return nil, githubError(fmt.Sprintf("Requesting %d records on the `%s` connection exceeds the `first` limit of 100 records.", first, strings.TrimSuffix(name, "Connection")))
	}
	start = min(start, len(nodes))
	end := min(start+int(first), len(nodes))
	page := nodes[start:end]
	cursor := func(i int) string { return base64.StdEncoding.EncodeToString([]byte("cursor:v2:" + strconv.Itoa(i))) }
	var startCursor, endCursor any
	if end > start {
		startCursor, endCursor = cursor(start), cursor(end-1)
	}
	edges := make([]gqlObject, len(page))
	for i, n := range page {
		edges[i] = &gqlPlain{name: strings.TrimSuffix(name, "Connection") + "Edge", fields: map[string]any{"node": n, "cursor": cursor(start + i)}}
	}
	return &gqlPlain{name: name, fields: map[string]any{
		"nodes":      page,
		"edges":      edges,
		"totalCount": len(nodes),
		"pageInfo": &gqlPlain{name: "PageInfo", fields: map[string]any{
			"hasNextPage": end < len(nodes), "hasPreviousPage": start > 0, "startCursor": startCursor, "endCursor": endCursor,
		}},
	}}, nil
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// intArg reads an Int argument, given inline (int64) or as a JSON variable (float64).
func intArg(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case float64:
		return int64(v), true
	}
	return 0, false
}

// RequireGraphQLSchema returns GitHub's GraphQL schema for a test (the committed subset, or the
// file GraphQLSchemaEnv names); one that cannot be loaded fails the test.
func RequireGraphQLSchema(t testing.TB) *ast.Schema {
	t.Helper()
	s, _, err := GitHubGraphQLSchema()
	if err != nil {
		t.Fatalf("loading GitHub's GraphQL schema: %v", err)
	}
	return s
}

// ValidateGraphQL checks a GraphQL document against a schema and returns GitHub-style error
// messages, none when it is valid.
func ValidateGraphQL(schema *ast.Schema, query string) []string {
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range validator.ValidateWithRules(schema, doc, nil) {
		out = append(out, e.Error())
	}
	return out
}
