package githubtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/formatter"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/fleetbot-io/fleetbot/internal/githubtest/restspec"
)

// The tests check the fake and fleetbot against GitHub's published descriptions: its REST
// description (@octokit/openapi), its GraphQL schema (@octokit/graphql-schema) and its webhook
// payload schemas (@octokit/webhooks-schemas). They read compact copies, committed under
// SchemaCopiesDir, so that `make test` needs only Go and git: each copy keeps exactly what the
// tests need of the published file, byte for byte what GenerateSchemaCopies makes of it.
// `make schemas` installs the pinned packages (scripts/github-schemas.sh) and regenerates the
// copies; TestSchemaCopiesArePublished checks them against the packages wherever those are
// installed (under CI=true they must be).

// SchemaCopiesDir is where the compact copies are, relative to the repository root.
const SchemaCopiesDir = "internal/githubtest/testdata/schemas"

// Names of the copies in SchemaCopiesDir (and a GHES description, ghes-3.N.json, the newest the
// pinned @octokit/openapi has).
const (
	RESTCopy     = "api.github.com.json"
	GraphQLCopy  = "schema.graphql"
	WebhooksCopy = "webhooks.json"
)

// publishedDir is where scripts/github-schemas.sh installs the packages, relative to the root.
const publishedDir = ".cache/github-schemas/node_modules/@octokit"

// ghesCopyRe names a GHES description of @octokit/openapi (and its compact copy).
var ghesCopyRe = regexp.MustCompile(`^ghes-3\.([0-9]+)\.json$`)

// newestGHES is the name of the newest ghes-3.N.json in dir ("" when there is none).
func newestGHES(dir string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	best, bestN := "", -1
	for _, e := range entries {
		if m := ghesCopyRe.FindStringSubmatch(e.Name()); m != nil {
			if n, _ := strconv.Atoi(m[1]); n > bestN {
				best, bestN = e.Name(), n
			}
		}
	}
	return best
}

// GenerateSchemaCopies makes the compact copies from the published packages installed under
// root (the repository root), by file name: the REST descriptions of api.github.com and of the
// newest GHES compacted to the operations the fake serves (restspec.Compact), the GraphQL schema
// cut to the fields the fake answers (graphQLSubset), and the webhook schemas cut to the events
// the fake sends and fleetbot subscribes to (webhookEvents).
func GenerateSchemaCopies(root string) (map[string][]byte, error) {
	pub := filepath.Join(root, publishedDir)
	out := map[string][]byte{}
	openapi := filepath.Join(pub, "openapi", "generated")
	ghes := newestGHES(openapi)
	if ghes == "" {
		return nil, fmt.Errorf("no ghes-3.N.json in %s (run make schemas)", openapi)
	}
	for _, name := range []string{RESTCopy, ghes} {
		full, err := os.ReadFile(filepath.Join(openapi, name))
		if err != nil {
			return nil, fmt.Errorf("reading GitHub's REST description: %w (run make schemas)", err)
		}
		compact, err := restspec.CompactCopy(full, restPatterns(), restWebhookSchemas...)
		if err != nil {
			return nil, fmt.Errorf("compacting %s: %w", name, err)
		}
		out[name] = indentJSON(compact)
	}
	sdl, err := os.ReadFile(filepath.Join(pub, "graphql-schema", "schema.graphql"))
	if err != nil {
		return nil, fmt.Errorf("reading GitHub's GraphQL schema: %w (run make schemas)", err)
	}
	if out[GraphQLCopy], err = graphQLSchemaSubset(sdl); err != nil {
		return nil, err
	}
	hooks, err := os.ReadFile(filepath.Join(pub, "webhooks-schemas", "schema.json"))
	if err != nil {
		return nil, fmt.Errorf("reading GitHub's webhook schemas: %w (run make schemas)", err)
	}
	if out[WebhooksCopy], err = webhookSchemaSubset(hooks); err != nil {
		return nil, err
	}
	return out, nil
}

// indentJSON re-indents a JSON document one space per level (the copies are reviewed as diffs),
// keeping its key order.
func indentJSON(data []byte) []byte {
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", " "); err != nil {
		return data
	}
	b.WriteByte('\n')
	return b.Bytes()
}

// graphQLSubset lists, per type of GitHub's GraphQL schema, the fields the fake answers (its
// executor, graphql*.go): the subset GraphQLCopy keeps. A field the fake starts to answer is
// added here, then `make schemas`. Enums, scalars and input types the kept fields and their
// arguments name are kept whole; interfaces a kept type implements are kept when they are
// listed here and the type keeps their fields.
var graphQLSubset = map[string][]string{
	"Query":                             {"repository", "repositoryOwner", "organization", "user", "rateLimit"},
	"Mutation":                          {"enablePullRequestAutoMerge", "updateRefs"},
	"RepositoryOwner":                   {"id", "login", "repositories"},
	"Actor":                             {"login"},
	"Node":                              {"id"},
	"Organization":                      {"id", "login", "repositories"},
	"User":                              {"id", "login", "repositories"},
	"Bot":                               {"id", "login"},
	"RepositoryConnection":              {"nodes", "edges", "totalCount", "pageInfo"},
	"RepositoryEdge":                    {"node", "cursor"},
	"PageInfo":                          {"hasNextPage", "hasPreviousPage", "endCursor", "startCursor"},
	"Repository":                        {"id", "name", "nameWithOwner", "description", "isArchived", "autoMergeAllowed", "isPrivate", "visibility", "url", "repositoryTopics", "defaultBranchRef", "ref", "pullRequests", "object"},
	"RepositoryTopicConnection":         {"nodes", "edges", "totalCount", "pageInfo"},
	"RepositoryTopicEdge":               {"node", "cursor"},
	"RepositoryTopic":                   {"topic"},
	"Topic":                             {"name"},
	"Ref":                               {"name", "prefix", "target"},
	"GitObject":                         {"oid"},
	"Commit":                            {"oid", "statusCheckRollup", "status", "tree", "checkSuites"},
	"CheckSuiteConnection":              {"nodes", "totalCount", "pageInfo"},
	"CheckSuite":                        {"checkRuns"},
	"CheckRunConnection":                {"nodes", "totalCount", "pageInfo"},
	"CheckRun":                          {"databaseId", "name", "status", "startedAt"},
	"Tree":                              {"oid"},
	"StatusCheckRollup":                 {"state"},
	"Status":                            {"state", "contexts"},
	"StatusContext":                     {"context", "state", "createdAt", "description", "targetUrl"},
	"PullRequestConnection":             {"nodes", "edges", "totalCount", "pageInfo"},
	"PullRequestEdge":                   {"node", "cursor"},
	"PullRequest":                       {"id", "number", "state", "title", "body", "url", "headRefName", "baseRefName", "headRefOid", "merged", "isCrossRepository", "isDraft", "createdAt", "reviewDecision", "mergedAt", "mergeCommit", "autoMergeRequest"},
	"AutoMergeRequest":                  {"enabledAt", "mergeMethod", "enabledBy"},
	"RateLimit":                         {"cost", "limit", "remaining", "used", "resetAt", "nodeCount"},
	"EnablePullRequestAutoMergePayload": {"clientMutationId", "pullRequest", "actor"},
	"UpdateRefsPayload":                 {"clientMutationId"},
}

// graphQLSchemaSubset cuts GitHub's schema to graphQLSubset (see there), printed as SDL in the
// published schema's order, without descriptions and directives (validation reads neither).
func graphQLSchemaSubset(sdl []byte) ([]byte, error) {
	doc, err := parser.ParseSchema(&ast.Source{Name: "schema.graphql", Input: string(sdl)})
	if err != nil {
		return nil, fmt.Errorf("parsing GitHub's GraphQL schema: %w", err)
	}
	defs := map[string]*ast.Definition{}
	for _, d := range doc.Definitions {
		defs[d.Name] = d
	}
	keep := map[string]*ast.Definition{}
	var need func(name string) error
	need = func(name string) error {
		if keep[name] != nil || isBuiltinScalar(name) {
			return nil
		}
		d := defs[name]
		if d == nil {
			return fmt.Errorf("GitHub's GraphQL schema has no type %s", name)
		}
		switch d.Kind {
		case ast.Object, ast.Interface, ast.Union:
			fields, listed := graphQLSubset[name]
			if !listed {
				return fmt.Errorf("GraphQL type %s is reached by a field the fake answers but is not in graphQLSubset", name)
			}
			c := *d
			c.Description, c.Directives, c.Fields, c.Position = "", nil, nil, nil
			for _, f := range d.Fields {
				if slices.Contains(fields, f.Name) {
					c.Fields = append(c.Fields, stripField(f))
				}
			}
			if len(c.Fields) != len(fields) {
				return fmt.Errorf("GitHub's GraphQL type %s lacks some of the fields %v", name, fields)
			}
			keep[name] = &c
			for _, f := range c.Fields {
				for _, a := range f.Arguments {
					if err := need(a.Type.Name()); err != nil {
						return err
					}
				}
				if err := need(f.Type.Name()); err != nil {
					return err
				}
			}
		case ast.InputObject:
			c := *d
			c.Description, c.Directives, c.Fields, c.Position = "", nil, nil, nil
			for _, f := range d.Fields {
				c.Fields = append(c.Fields, stripField(f))
			}
			keep[name] = &c
			for _, f := range c.Fields {
				if err := need(f.Type.Name()); err != nil {
					return err
				}
			}
		default: // enums and scalars, whole
			c := *d
			c.Description, c.Directives, c.Position = "", nil, nil
			var values ast.EnumValueList
			for _, v := range d.EnumValues {
				values = append(values, &ast.EnumValueDefinition{Name: v.Name})
			}
			c.EnumValues = values
			keep[name] = &c
		}
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(graphQLSubset)) {
		if err := need(name); err != nil {
			return nil, err
		}
	}
	// A kept type implements a kept interface only if it keeps all of that interface's fields.
	for _, d := range keep {
		var ifaces []string
		for _, i := range d.Interfaces {
			if it := keep[i]; it != nil && it.Kind == ast.Interface && keepsFields(d, it) {
				ifaces = append(ifaces, i)
			}
		}
		d.Interfaces = ifaces
		if d.Kind == ast.Union {
			var types []string
			for _, t := range d.Types {
				if keep[t] != nil {
					types = append(types, t)
				}
			}
			d.Types = types
		}
	}
	out := &ast.SchemaDocument{}
	for _, d := range doc.Definitions {
		if c := keep[d.Name]; c != nil {
			out.Definitions = append(out.Definitions, c)
			delete(keep, d.Name) // a name defined twice in the published SDL is printed once
		}
	}
	for _, sd := range doc.Schema {
		c := *sd
		c.Description, c.Directives, c.Position = "", nil, nil
		var ops ast.OperationTypeDefinitionList
		for _, op := range sd.OperationTypes {
			if _, ok := graphQLSubset[op.Type]; ok {
				ops = append(ops, &ast.OperationTypeDefinition{Operation: op.Operation, Type: op.Type})
			}
		}
		c.OperationTypes = ops
		out.Schema = append(out.Schema, &c)
	}
	var b bytes.Buffer
	b.WriteString("# The part of GitHub's GraphQL schema (@octokit/graphql-schema) the fake GitHub answers:\n" +
		"# generated by `make schemas` (internal/githubtest/schemacopies.go); do not edit.\n\n")
	formatter.NewFormatter(&b, formatter.WithIndent("  ")).FormatSchemaDocument(out)
	return b.Bytes(), nil
}

// stripField is a field definition without its description and directives (its arguments'
// too); its type and arguments are kept.
func stripField(f *ast.FieldDefinition) *ast.FieldDefinition {
	c := *f
	c.Description, c.Directives, c.Position = "", nil, nil
	var args ast.ArgumentDefinitionList
	for _, a := range f.Arguments {
		ac := *a
		ac.Description, ac.Directives, ac.Position = "", nil, nil
		args = append(args, &ac)
	}
	c.Arguments = args
	return &c
}

// keepsFields reports whether d keeps every field of interface it.
func keepsFields(d, it *ast.Definition) bool {
	for _, f := range it.Fields {
		if d.Fields.ForName(f.Name) == nil {
			return false
		}
	}
	return true
}

func isBuiltinScalar(name string) bool {
	switch name {
	case "String", "Int", "Float", "Boolean", "ID":
		return true
	}
	return false
}

// webhookEvents are the events whose payload schemas WebhooksCopy keeps: those the fake sends
// and those fleetbot's App subscribes to (app.yml default_events, installation events).
// https://docs.github.com/webhooks/webhook-events-and-payloads
var webhookEvents = []string{
	"branch_protection_rule_event", "check_run_event", "check_suite_event", "installation_event",
	"installation_repositories_event", "member_event", "pull_request_event", "push$event",
	"repository_event", "status$event", "team_event",
}

// restWebhookSchemas are the payload schemas of webhooks the fake sends that @octokit/webhooks-schemas
// (7.6.1) does not describe, kept from GitHub's REST description (its x-webhooks refer to them):
// repository_ruleset's, one per action.
// https://docs.github.com/webhooks/webhook-events-and-payloads#repository_ruleset
var restWebhookSchemas = []string{
	"webhook-repository-ruleset-created", "webhook-repository-ruleset-edited", "webhook-repository-ruleset-deleted",
}

// webhookDropped are the keywords of the webhook schemas validation never reads (and octokit's
// own tsAdditionalProperties).
var webhookDropped = map[string]bool{
	"description": true, "title": true, "examples": true, "$comment": true, "tsAdditionalProperties": true,
}

// webhookSchemaSubset keeps of @octokit/webhooks-schemas the definitions webhookEvents reach,
// and a oneOf of those events, without what validation never reads.
func webhookSchemaSubset(data []byte) ([]byte, error) {
	var doc struct {
		Schema      string                     `json:"$schema"`
		Definitions map[string]json.RawMessage `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parsing GitHub's webhook schemas: %w", err)
	}
	keep := map[string]any{}
	queue := slices.Clone(webhookEvents)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, done := keep[name]; done {
			continue
		}
		raw, ok := doc.Definitions[name]
		if !ok {
			return nil, fmt.Errorf("GitHub's webhook schemas have no definition %s", name)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("webhook schema %s: %w", name, err)
		}
		v = stripSchema(v)
		keep[name] = v
		for _, ref := range schemaRefs(v, nil) {
			queue = append(queue, strings.TrimPrefix(ref, "#/definitions/"))
		}
	}
	var oneOf []map[string]string
	events := slices.Clone(webhookEvents)
	sort.Strings(events)
	for _, e := range events {
		oneOf = append(oneOf, map[string]string{"$ref": "#/definitions/" + e})
	}
	out, err := json.Marshal(map[string]any{"$schema": doc.Schema, "definitions": keep, "oneOf": oneOf})
	if err != nil {
		return nil, err
	}
	return indentJSON(out), nil
}

// stripSchema drops webhookDropped keywords (a property of that name stays: its key is data).
func stripSchema(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, c := range v {
			switch {
			case k == "$schema":
			case webhookDropped[k]:
			case k == "properties" || k == "patternProperties" || k == "definitions":
				if m, ok := c.(map[string]any); ok {
					n := make(map[string]any, len(m))
					for name, e := range m {
						n[name] = stripSchema(e)
					}
					out[k] = n
					continue
				}
				out[k] = stripSchema(c)
			default:
				out[k] = stripSchema(c)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, c := range v {
			out[i] = stripSchema(c)
		}
		return out
	}
	return v
}

// schemaRefs appends the definitions v refers to ("#/definitions/...").
func schemaRefs(v any, to []string) []string {
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			if s, ok := c.(string); ok && k == "$ref" && strings.HasPrefix(s, "#/definitions/") {
				to = append(to, s)
				continue
			}
			to = schemaRefs(c, to)
		}
	case []any:
		for _, c := range v {
			to = schemaRefs(c, to)
		}
	}
	return to
}

// SchemaCopy reads one compact copy from the repository the working directory is in.
func SchemaCopy(name string) ([]byte, string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, "", err
	}
	path := filepath.Join(root, SchemaCopiesDir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("reading the compact copy of GitHub's description: %w", err)
	}
	return data, path, nil
}

// GHESCopy is the name of the GHES description's compact copy ("ghes-3.N.json").
func GHESCopy() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	name := newestGHES(filepath.Join(root, SchemaCopiesDir))
	if name == "" {
		return "", fmt.Errorf("no compact copy of a GHES description in %s (run make schemas)", SchemaCopiesDir)
	}
	return name, nil
}
