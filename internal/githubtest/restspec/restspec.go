// Package restspec checks HTTP requests and responses against GitHub's published REST API
// description (the OpenAPI documents of the npm package @octokit/openapi), so a test can tell
// when fleetbot sends, or the fake GitHub answers, something GitHub would not.
//
// A Description is loaded once from a file (it is large: ~13 MB for api.github.com; LoadCompact
// keeps a compact copy of the operations a test server serves) and is read-only afterwards,
// safe for concurrent use. It holds no global state: callers pass it in.
package restspec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// DefaultPath is where scripts/github-schemas.sh installs api.github.com's description,
// relative to the repository root.
const DefaultPath = ".cache/github-schemas/node_modules/@octokit/openapi/generated/api.github.com.json"

// Description is one of GitHub's REST API descriptions, indexed by method and path template.
type Description struct {
	// Source is the file the description was read from.
	Source string

	doc    *openapi3.T
	routes map[string][]*route // by HTTP method

	// full is the whole description behind a compact one (LoadCompact, LoadCopy), which checks
	// the exchanges of the operations the compact one has as stubs or not at all; nil for a full
	// description, or a copy whose published description is not installed.
	full func() (*Description, error)
	// partial marks a copy that leaves operations out (LoadCopy): a request it cannot match is
	// checked against full, or not at all when others (GitHub's other operations, by method and
	// path template) has it.
	partial bool
	others  map[string][]*route
}

type route struct {
	template string   // e.g. "/repos/{owner}/{repo}"
	segments []string // path template split at "/", e.g. ["repos", "{owner}", "{repo}"]
	params   int      // how many segments are parameters (fewer wins: a literal is more specific)
	r        *routers.Route
}

// Load reads and indexes a description. An unreadable or malformed file is an error naming it.
func Load(path string) (*Description, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading GitHub's REST description: %w (run scripts/github-schemas.sh)", err)
	}
	return load(path, data)
}

// load parses and indexes the description data read from path.
func load(path string, data []byte) (*Description, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("parsing GitHub's REST description %s: %w", path, err)
	}
	d := &Description{Source: path, doc: doc, routes: map[string][]*route{}}
	for tmpl, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			d.routes[method] = append(d.routes[method], newRoute(tmpl, &routers.Route{
				Spec: doc, Path: tmpl, PathItem: item, Method: method, Operation: op,
			}))
		}
	}
	sortRoutes(d.routes)
	return d, nil
}

// newRoute indexes one operation's path template.
func newRoute(tmpl string, r *routers.Route) *route {
	segs := strings.Split(strings.Trim(tmpl, "/"), "/")
	params := 0
	for _, s := range segs {
		if isParam(s) {
			params++
		}
	}
	return &route{template: tmpl, segments: segs, params: params, r: r}
}

// sortRoutes orders each method's routes for Match: literal segments first.
func sortRoutes(routes map[string][]*route) {
	for _, rs := range routes {
		sort.Slice(rs, func(i, j int) bool {
			if rs[i].params != rs[j].params {
				return rs[i].params < rs[j].params
			}
			return rs[i].template < rs[j].template
		})
	}
}

func isParam(seg string) bool { return strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") }

// slashed are the parameters GitHub documents as holding slashes unescaped: a git ref
// ("heads/feature/x"), a file path, a "base...head" pair of refs.
var slashed = map[string]bool{"{ref}": true, "{path}": true, "{basehead}": true}

// Match finds the operation of a request path (without any /api/v3 prefix, still escaped as
// sent). A last parameter {ref}, {path} or {basehead} may span several segments.
func (d *Description) Match(method, escapedPath string) (*routers.Route, map[string]string, bool) {
	rt, params := matchRoutes(d.routes[method], escapedPath)
	if rt == nil {
		return nil, nil, false
	}
	return rt.r, params, true
}

// matchRoutes finds the route of a path among one method's sorted routes, and its parameters.
func matchRoutes(routes []*route, escapedPath string) (*route, map[string]string) {
	segs := strings.Split(strings.Trim(escapedPath, "/"), "/")
	for _, rt := range routes {
		if params, ok := rt.match(segs, false); ok {
			return rt, params
		}
	}
	// A greedy last parameter: the longest template wins ({ref} of .../git/ref/{ref} over
	// {repo} of /repos/{owner}/{repo}).
	var best *route
	var bestParams map[string]string
	for _, rt := range routes {
		if params, ok := rt.match(segs, true); ok && (best == nil || len(rt.segments) > len(best.segments)) {
			best, bestParams = rt, params
		}
	}
	return best, bestParams
}

func (rt *route) match(segs []string, greedy bool) (map[string]string, bool) {
	n := len(rt.segments)
	if len(segs) != n && !(greedy && len(segs) > n && n > 0 && slashed[rt.segments[n-1]]) {
		return nil, false
	}
	if greedy && len(segs) == n {
		return nil, false // the exact-length pass already tried it
	}
	params := map[string]string{}
	for i, t := range rt.segments {
		if !isParam(t) {
			if segs[i] != t {
				return nil, false
			}
			continue
		}
		raw := segs[i]
		if i == n-1 {
			raw = strings.Join(segs[i:], "/")
		}
		v, err := url.PathUnescape(raw)
		if err != nil || v == "" {
			return nil, false
		}
		params[strings.Trim(t, "{}")] = v
	}
	return params, true
}

// Violation is one way a request or response departs from the description.
type Violation struct {
	Operation string // operationId, e.g. "repos/create-in-org"
	Method    string
	Path      string // the path as requested
	Template  string // the description's path template
	Side      string // "request" or "response"
	Status    int    // the response status (0 for a request violation)
	Detail    string // what is wrong, naming the field
	Missing   bool   // a property the description requires is absent
}

func (v Violation) String() string {
	where := v.Side
	if v.Status != 0 {
		where = fmt.Sprintf("%s %d", v.Side, v.Status)
	}
	if v.Operation == "" {
		return fmt.Sprintf("%s %s: %s: %s", v.Method, v.Path, where, v.Detail)
	}
	return fmt.Sprintf("%s %s (%s, %s): %s: %s", v.Method, v.Path, v.Operation, v.Template, where, v.Detail)
}

// Exchange is one request and its response as seen by a server.
type Exchange struct {
	Request      *http.Request // URL.Path without the /api/v3 prefix; its Body is not read
	RequestBody  []byte
	Status       int
	Header       http.Header
	ResponseBody []byte
}

// Check validates a request and its response. A path the description does not have is one
// violation; a response status it does not document is not checked (GitHub documents the
// usual ones only), a documented one is checked field by field.
func (d *Description) Check(ctx context.Context, ex Exchange) []Violation {
	req := ex.Request
	rt, params, ok := d.Match(req.Method, req.URL.EscapedPath())
	if !ok && d.partial {
		if d.full == nil {
			if other, _ := matchRoutes(d.others[req.Method], req.URL.EscapedPath()); other != nil {
				return nil // GitHub has it; the copy does not carry its schemas
			}
			return []Violation{{Method: req.Method, Path: req.URL.Path, Side: "request",
				Detail: "GitHub's REST API has no such operation"}}
		}
		full, err := d.full()
		if err != nil {
			return []Violation{{Method: req.Method, Path: req.URL.Path, Side: "request", Detail: "cannot check: " + err.Error()}}
		}
		return full.Check(ctx, ex)
	}
	if !ok {
		return []Violation{{Method: req.Method, Path: req.URL.Path, Side: "request",
			Detail: "GitHub's REST API has no such operation"}}
	}
	if stub(rt.Operation) && d.full != nil {
		full, err := d.full()
		if err != nil {
			return []Violation{{Operation: rt.Operation.OperationID, Method: req.Method, Path: req.URL.Path,
				Template: rt.Path, Side: "request", Detail: "cannot check: " + err.Error()}}
		}
		return full.Check(ctx, ex)
	}
	base := Violation{Operation: rt.Operation.OperationID, Method: req.Method, Path: req.URL.Path, Template: rt.Path}
	opts := &openapi3filter.Options{
		MultiError:          true,
		AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
		SkipSettingDefaults: true,
	}
	r2 := req.Clone(ctx)
	r2.Body = io.NopCloser(bytes.NewReader(ex.RequestBody))
	r2.ContentLength = int64(len(ex.RequestBody))
	if len(ex.RequestBody) > 0 && r2.Header.Get("Content-Type") == "" {
		r2.Header.Set("Content-Type", "application/json")
	}
	in := &openapi3filter.RequestValidationInput{Request: r2, PathParams: params, Route: rt, Options: opts}
	var out []Violation
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		for _, p := range flatten(err) {
			v := base
			v.Side, v.Detail, v.Missing = "request", p.detail, p.missing
			out = append(out, v)
		}
	}
	if ex.Status == http.StatusNotModified || ex.Status == 0 {
		return out
	}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: ex.Status,
		Header: ex.Header, Options: opts}
	rin.SetBodyBytes(ex.ResponseBody)
	if err := openapi3filter.ValidateResponse(ctx, rin); err != nil {
		for _, p := range flatten(err) {
			v := base
			v.Side, v.Status, v.Detail, v.Missing = "response", ex.Status, p.detail, p.missing
			out = append(out, v)
		}
	}
	return out
}

// problem is one validation error: its line and whether it is a required property missing.
type problem struct {
	detail  string
	missing bool
}

// flatten turns kin-openapi's (multi) errors into one problem each, field path first.
func flatten(err error) []problem {
	var me openapi3.MultiError
	if errors.As(err, &me) {
		var out []problem
		for _, e := range me {
			out = append(out, flatten(e)...)
		}
		return out
	}
	var re *openapi3filter.RequestError
	if errors.As(err, &re) && re.Err != nil {
		out := flatten(re.Err)
		for i := range out {
			out[i].detail = prefix(re) + out[i].detail
		}
		return out
	}
	var rs *openapi3filter.ResponseError
	if errors.As(err, &rs) && rs.Err != nil {
		return flatten(rs.Err)
	}
	var se *openapi3.SchemaError
	if errors.As(err, &se) {
		field := strings.Join(se.JSONPointer(), ".")
		if field == "" {
			field = "(root)"
		}
		val := fmt.Sprintf("%v", se.Value)
		if len(val) > 80 {
			val = val[:80] + "…"
		}
		return []problem{{detail: fmt.Sprintf("field %s: %s (value %s)", field, se.Reason, val),
			missing: se.SchemaField == "required" || strings.Contains(se.Reason, "does not contain the discriminator property")}}
	}
	msg := err.Error()
	if i := strings.Index(msg, "\nSchema:"); i >= 0 {
		msg = msg[:i]
	}
	return []problem{{detail: strings.ReplaceAll(msg, "\n", " "),
		missing: strings.Contains(msg, "does not contain the discriminator property")}}
}

func prefix(re *openapi3filter.RequestError) string {
	switch {
	case re.Parameter != nil:
		return fmt.Sprintf("parameter %q in %s: ", re.Parameter.Name, re.Parameter.In)
	case re.RequestBody != nil:
		return "body: "
	}
	return ""
}

// ValidateSchema validates a JSON value (as encoding/json decodes it into an any) against the
// schema components/schemas/name of the description (one the compact copy kept, else the full
// description's when installed), e.g. a webhook payload, "webhook-repository-ruleset-deleted".
func (d *Description) ValidateSchema(name string, value any) error {
	ref := d.doc.Components.Schemas[name]
	if (ref == nil || ref.Value == nil) && d.full != nil {
		full, err := d.full()
		if err != nil {
			return err
		}
		ref = full.doc.Components.Schemas[name]
	}
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("%s: no schema %q in components/schemas", d.Source, name)
	}
	return ref.Value.VisitJSON(value)
}
