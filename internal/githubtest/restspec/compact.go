package restspec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
)

// compactVersion names Compact's output format; it is part of the cache key, so a change to
// Compact must change it.
const compactVersion = "restspec-compact-1"

// stubExtension marks an operation of a compact description that carries only its name: an
// exchange of it is checked against the full description.
const stubExtension = "x-fleetbot-stub"

// operationsExtension lists, in a copy (CompactCopy), every operation of the published
// description as "METHOD /template": a request none of them matches is one GitHub does not have.
const operationsExtension = "x-fleetbot-operations"

// LoadCompact reads the description at path for checking exchanges of the operations that
// serve (patterns in net/http.ServeMux syntax, "GET /repos/{owner}/{repo}/contents/{path...}")
// reaches, through a compacted copy (see Compact) cached in cacheDir under a name made of the
// hashes of the description and of patterns. Parsing the full description costs seconds of CPU,
// many times more under the race detector; the compact copy a fraction of it. An exchange of
// any other operation is checked against the full description, loaded then (once). A cacheDir
// that cannot be written only costs the compaction on every load.
func LoadCompact(path, cacheDir string, patterns []string) (*Description, error) {
	full, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading GitHub's REST description: %w (run scripts/github-schemas.sh)", err)
	}
	sorted := append([]string(nil), patterns...)
	sort.Strings(sorted)
	sum := sha256.Sum256(full)
	keep := sha256.Sum256([]byte(compactVersion + "\n" + strings.Join(sorted, "\n")))
	cached := filepath.Join(cacheDir, "restspec-"+hex.EncodeToString(sum[:8])+"-"+hex.EncodeToString(keep[:8])+".json")
	data, err := os.ReadFile(cached)
	if err != nil {
		if data, err = Compact(full, sorted); err != nil {
			return nil, fmt.Errorf("compacting GitHub's REST description %s: %w", path, err)
		}
		writeAtomic(cached, data) // a cache: failing to write it only costs time
	}
	d, err := load(cached, data)
	if err != nil {
		return nil, fmt.Errorf("GitHub's REST description %s, compacted into %s: %w (delete the file)", path, cached, err)
	}
	d.Source = path
	d.full = sync.OnceValues(func() (*Description, error) { return load(path, full) })
	return d, nil
}

// LoadCopy loads a compact description committed at path (what CompactCopy made of the
// published description). An exchange of an operation it does not have is checked against the
// published description at fullPath, loaded then (once), when that file exists; without it
// such an exchange is not checked (the copy cannot tell an operation GitHub lacks from one it
// left out).
func LoadCopy(path, fullPath string) (*Description, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the compact copy of GitHub's REST description: %w (run make schemas)", err)
	}
	d, err := load(path, data)
	if err != nil {
		return nil, err
	}
	d.partial = true
	if list, ok := d.doc.Extensions[operationsExtension].([]any); ok {
		d.others = map[string][]*route{}
		for _, v := range list {
			method, tmpl, _ := strings.Cut(fmt.Sprint(v), " ")
			d.others[method] = append(d.others[method], newRoute(tmpl, nil))
		}
		sortRoutes(d.others)
	}
	if _, err := os.Stat(fullPath); err == nil {
		d.full = sync.OnceValues(func() (*Description, error) { return Load(fullPath) })
	}
	return d, nil
}

// writeAtomic writes data to path through a temporary file and a rename, so a concurrent
// reader (another test binary) sees the whole file or none.
func writeAtomic(path string, data []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".restspec-*")
	if err != nil {
		return
	}
	_, werr := f.Write(data)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), path) != nil {
		_ = os.Remove(f.Name())
	}
}

// Compact returns a description that validates the operations reached by patterns exactly as
// full does, and knows every other operation by method, path and operationId only (a stub;
// LoadCompact checks their exchanges against the full description). It leaves out what
// validation never reads: descriptions, summaries, examples, extensions, tags, webhooks, and
// every component no kept operation refers to (but the schemas named by schemas, and what they
// refer to: the payloads of webhooks, for ValidateSchema).
func Compact(full []byte, patterns []string, schemas ...string) ([]byte, error) {
	return compact(full, patterns, true, schemas)
}

// CompactCopy is Compact without the stubs: a description of the operations patterns reach,
// and of every other operation only its method and path template (in a list, so that a request
// GitHub has no operation for is still told apart), as committed for the tests (LoadCopy).
func CompactCopy(full []byte, patterns []string, schemas ...string) ([]byte, error) {
	return compact(full, patterns, false, schemas)
}

// compact is Compact, with stubs for the other operations or without them.
func compact(full []byte, patterns []string, stubs bool, schemas []string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(full))
	dec.UseNumber() // numbers (minimum, maximum, defaults) stay as written
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	paths, _ := doc["paths"].(map[string]any)
	if paths == nil {
		return nil, fmt.Errorf("no paths")
	}
	// The operations patterns reach, found the way Match finds a request's.
	routes := map[string][]*route{}
	for tmpl, item := range paths {
		for method := range item.(map[string]any) {
			if m := strings.ToUpper(method); isMethod(m) {
				routes[m] = append(routes[m], newRoute(tmpl, nil))
			}
		}
	}
	sortRoutes(routes)
	kept := map[string]bool{} // "METHOD template"
	for _, p := range patterns {
		method, path, ok := strings.Cut(p, " ")
		if !ok {
			return nil, fmt.Errorf("pattern %q has no method", p)
		}
		if rt, _ := matchRoutes(routes[method], samplePath(path)); rt != nil {
			kept[method+" "+rt.template] = true
		}
	}

	outPaths := map[string]any{}
	for tmpl, raw := range paths {
		item := raw.(map[string]any)
		out := map[string]any{}
		keptOne := false
		for k, v := range item {
			m := strings.ToUpper(k)
			if !isMethod(m) {
				continue
			}
			if kept[m+" "+tmpl] {
				out[k] = strip(v)
				keptOne = true
				continue
			}
			if stubs {
				op, _ := v.(map[string]any)
				out[k] = map[string]any{"operationId": op["operationId"], stubExtension: true}
			}
		}
		if len(out) == 0 {
			continue
		}
		if keptOne {
			if ps, ok := item["parameters"]; ok {
				out["parameters"] = strip(ps)
			}
		}
		outPaths[tmpl] = out
	}

	comps, _ := doc["components"].(map[string]any)
	outComps := map[string]any{}
	if ss, ok := comps["securitySchemes"]; ok {
		outComps["securitySchemes"] = ss
	}
	// Every component reachable from the kept operations, by breadth-first search.
	seen := map[string]bool{}
	queue := refs(outPaths, nil)
	for _, name := range schemas {
		queue = append(queue, "#/components/schemas/"+name)
	}
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		if seen[ref] {
			continue
		}
		seen[ref] = true
		// A string that only looks like a reference is kept out; a reference to a missing
		// component fails when the compact description is loaded, as it would in full.
		parts := strings.Split(strings.TrimPrefix(ref, "#/components/"), "/")
		if len(parts) != 2 {
			continue
		}
		kind, name := parts[0], strings.NewReplacer("~1", "/", "~0", "~").Replace(parts[1])
		group, _ := comps[kind].(map[string]any)
		c, ok := group[name]
		if !ok {
			continue
		}
		c = strip(c)
		if outComps[kind] == nil {
			outComps[kind] = map[string]any{}
		}
		outComps[kind].(map[string]any)[name] = c
		queue = refs(c, queue)
	}

	out := map[string]any{"openapi": doc["openapi"], "info": doc["info"], "paths": outPaths, "components": outComps}
	if !stubs {
		var ops []string
		for tmpl, raw := range paths {
			for method := range raw.(map[string]any) {
				if m := strings.ToUpper(method); isMethod(m) && !kept[m+" "+tmpl] {
					ops = append(ops, m+" "+tmpl)
				}
			}
		}
		sort.Strings(ops)
		out[operationsExtension] = ops
	}
	if s, ok := doc["servers"]; ok {
		out["servers"] = s
	}
	return json.Marshal(out)
}

func isMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete, http.MethodOptions,
		http.MethodHead, http.MethodPatch, http.MethodTrace:
		return true
	}
	return false
}

// samplePath turns a ServeMux pattern's path into a request path it matches: each wildcard
// becomes one segment "x" ("{$}" nothing).
func samplePath(pattern string) string {
	segs := strings.Split(pattern, "/")
	for i, s := range segs {
		switch {
		case s == "{$}":
			segs[i] = ""
		case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
			segs[i] = "x"
		}
	}
	return strings.Join(segs, "/")
}

// dropped are the keywords validation never reads (extensions "x-..." are dropped too).
var dropped = map[string]bool{
	"description": true, "summary": true, "example": true, "examples": true,
	"externalDocs": true, "tags": true,
}

// named are the keywords whose value maps names (of properties, media types, statuses,
// headers...) to objects: their keys are data, never dropped.
var named = map[string]bool{
	"properties": true, "patternProperties": true, "responses": true, "content": true,
	"headers": true, "encoding": true, "links": true, "callbacks": true, "mapping": true,
	"variables": true, "definitions": true, "$defs": true, "dependentSchemas": true,
}

// literal are the keywords whose value is data (a default, the allowed values), kept as is.
var literal = map[string]bool{"default": true, "enum": true, "const": true, "required": true}

// strip returns an OpenAPI object (operation, schema, parameter...) without the keywords
// validation never reads.
func strip(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, c := range v {
			switch {
			case dropped[k] || strings.HasPrefix(k, "x-"):
			case literal[k]:
				out[k] = c
			case named[k]:
				if m, ok := c.(map[string]any); ok {
					n := make(map[string]any, len(m))
					for name, e := range m {
						n[name] = strip(e)
					}
					out[k] = n
				} else {
					out[k] = strip(c)
				}
			default:
				out[k] = strip(c)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, c := range v {
			out[i] = strip(c)
		}
		return out
	}
	return v
}

// refs appends every component reference in v ("$ref" values and discriminator mappings: any
// string naming "#/components/...") to to.
func refs(v any, to []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for _, c := range v {
			to = refs(c, to)
		}
	case []any:
		for _, c := range v {
			to = refs(c, to)
		}
	case string:
		if strings.HasPrefix(v, "#/components/") {
			to = append(to, v)
		}
	}
	return to
}

// stub says whether a loaded operation is a stub of a compact description.
func stub(op *openapi3.Operation) bool {
	_, ok := op.Extensions[stubExtension]
	return ok
}

// CoversPattern reports whether the description validates the exchanges of the operation a
// ServeMux pattern ("GET /repos/{owner}/{repo}") reaches in full: it has the operation and
// it is not a stub of a compact description.
func (d *Description) CoversPattern(pattern string) bool {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok {
		return false
	}
	rt, _, ok := d.Match(method, samplePath(path))
	return ok && !stub(rt.Operation)
}
