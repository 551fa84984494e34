package control

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var update = flag.Bool("update", false, "rewrite the committed JSON Schemas in schema/ from the Go types")

// schemaDir holds the committed schemas, one per kind, for editors (README "Editor support").
const schemaDir = "../../schema"

// schemaBase is where the committed schemas are served from, for their $id.
const schemaBase = "https://raw.githubusercontent.com/fleetbot-io/fleetbot/main/schema/"

// kindSchemas are the control-repo kinds, their Go type and their schema file.
var kindSchemas = []struct {
	kind, file string
	typ        any
}{
	{KindPlatform, "platform.json", &Platform{}},
	{KindCluster, "cluster.json", &Cluster{}},
	{KindWorkspace, "workspace.json", &Workspace{}},
	{KindApp, "app.json", &App{}},
}

// scalar is any YAML scalar: the loader reads numbers and booleans in values as their text.
func scalar() *jsonschema.Schema {
	return &jsonschema.Schema{AnyOf: []*jsonschema.Schema{{Type: "string"}, {Type: "number"}, {Type: "boolean"}}}
}

// generateSchema reflects the JSON Schema of one kind from its Go type and doc comments.
func generateSchema(t *testing.T, kind string, typ any, file string) []byte {
	t.Helper()
	r := &jsonschema.Reflector{
		ExpandedStruct: true, // the kind itself at the root, its parts under $defs
		FieldNameTag:   "yaml",
		Mapper: func(rt reflect.Type) *jsonschema.Schema {
			switch rt {
			case reflect.TypeFor[intstr.IntOrString](), reflect.TypeFor[CountOrPercent]():
				return &jsonschema.Schema{
					Description: "a count or a percentage (\"10%\")",
					OneOf: []*jsonschema.Schema{
						{Type: "integer", Minimum: "0"},
						{Type: "string", Pattern: `^[0-9]+%$`},
					},
				}
			case reflect.TypeFor[Values]():
				// The loader reads any YAML scalar as a string value.
				return &jsonschema.Schema{
					Type:                 "object",
					Description:          "values for the ${name} references of the app manifests",
					AdditionalProperties: scalar(),
				}
			}
			return nil
		},
	}
	require.NoError(t, r.AddGoComments("github.com/fleetbot-io/fleetbot/internal/control", "."))
	s := r.Reflect(typ)
	s.ID = jsonschema.ID(schemaBase + file)
	s.Title = "fleetbot " + kind
	s.Properties.Set("apiVersion", &jsonschema.Schema{Const: APIVersion})
	s.Properties.Set("kind", &jsonschema.Schema{Const: kind})
	if kind == KindCluster || kind == KindWorkspace {
		// Every field of their spec is optional, and so is the spec itself.
		s.Required = slices.DeleteFunc(s.Required, func(f string) bool { return f == "spec" })
	}
	enums := map[string][]any{
		"RepoSpec.visibility":       {"private", "internal", "public"},
		"PullRequestSpec.merge":     {MergeManual, MergeAuto},
		"Wave.merge":                {MergeManual, MergeAuto},
		"AccessSpec.mode":           {AccessEnforce, AccessAdditive},
		"AppSpec.scope":             {ScopeCluster, ScopeNamespaced},
		"Requirement.operator":      {"In", "NotIn", "Exists", "DoesNotExist"},
		"Component.podSecurity":     {PodSecurityPrivileged, PodSecurityBaseline, PodSecurityRestricted},
		"WorkspaceSpec.podSecurity": {PodSecurityRestricted, PodSecurityBaseline},
		"RolloutSpec.onFailure":     {OnFailureHalt, OnFailureRollback},
		"Wave.onFailure":            {OnFailureHalt, OnFailureRollback},
		"Wave.approval":             {ApprovalRequired},
		"ChangeWindow.kind":         {WindowAllow, WindowDeny},
		"HealthSpec.provider":       {HealthGitHub, HealthGenericHMAC},
	}
	if d, ok := s.Definitions["ChangeWindow"]; ok {
		if v, ok := d.Properties.Get("days"); ok && v.Items != nil {
			v.Items.Enum = []any{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}
		}
		if v, ok := d.Properties.Get("start"); ok {
			v.Pattern = `^([01][0-9]|2[0-3]):[0-5][0-9]$`
		}
	}
	if d, ok := s.Definitions["ValueSpec"]; ok {
		if v, ok := d.Properties.Get("default"); ok {
			v.Type, v.AnyOf = "", scalar().AnyOf
		}
	}
	for def, d := range s.Definitions {
		for pair := d.Properties.Oldest(); pair != nil; pair = pair.Next() {
			if e, ok := enums[def+"."+pair.Key]; ok {
				pair.Value.Enum = e
			}
		}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

// TestSchemaUpToDate fails when a committed schema differs from what the Go types give;
// `go test ./internal/control -run TestSchemaUpToDate -update` rewrites them.
func TestSchemaUpToDate(t *testing.T) {
	for _, k := range kindSchemas {
		t.Run(k.kind, func(t *testing.T) {
			got := generateSchema(t, k.kind, k.typ, k.file)
			p := filepath.Join(schemaDir, k.file)
			if *update {
				require.NoError(t, os.WriteFile(p, got, 0o644))
			}
			want, err := os.ReadFile(p)
			require.NoError(t, err, "run `go test ./internal/control -run TestSchemaUpToDate -update` to write it")
			if !bytes.Equal(got, want) {
				t.Errorf("%s is out of date with the Go types in internal/control; run `go test ./internal/control -run TestSchemaUpToDate -update` and commit it", p)
			}
		})
	}
}

// compileSchemas compiles the committed schemas, keyed by kind.
func compileSchemas(t *testing.T) map[string]*sjs.Schema {
	t.Helper()
	c := sjs.NewCompiler()
	out := map[string]*sjs.Schema{}
	for _, k := range kindSchemas {
		f, err := os.Open(filepath.Join(schemaDir, k.file))
		require.NoError(t, err)
		doc, err := sjs.UnmarshalJSON(f)
		f.Close()
		require.NoError(t, err)
		require.NoError(t, c.AddResource(schemaBase+k.file, doc))
		out[k.kind], err = c.Compile(schemaBase + k.file)
		require.NoError(t, err)
	}
	return out
}

// yamlToJSONValue turns a parsed YAML document into the generic value the validator takes.
func yamlToJSONValue(t *testing.T, data []byte) any {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal(data, &v))
	b, err := json.Marshal(v)
	require.NoError(t, err)
	doc, err := sjs.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return doc
}

// controlObjects lists the object files of a control repo: platform.yaml, clusters/*.yaml,
// workspaces/*.yaml and catalog/*/app.yaml.
func controlObjects(t *testing.T, fsys fs.FS) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{"platform.yaml", "clusters/*.yaml", "workspaces/*.yaml", "catalog/*/app.yaml"} {
		m, err := fs.Glob(fsys, pat)
		require.NoError(t, err)
		out = append(out, m...)
	}
	return out
}

// TestSchemaAcceptsTheExampleControlRepos: every object the loader accepts in the example and
// test control repos is valid against the committed schema of its kind, so an editor using the
// schema never flags what fleetbot takes.
func TestSchemaAcceptsTheExampleControlRepos(t *testing.T) {
	schemas := compileSchemas(t)
	for _, dir := range []string{"../../testdata/control", validDir} {
		_, err := LoadDir(dir)
		require.NoError(t, err, "the loader accepts %s", dir)
		fsys := os.DirFS(dir)
		files := controlObjects(t, fsys)
		require.NotEmpty(t, files)
		for _, f := range files {
			t.Run(path.Join(filepath.Base(dir), f), func(t *testing.T) {
				data, err := fs.ReadFile(fsys, f)
				require.NoError(t, err)
				doc := yamlToJSONValue(t, data)
				kind, _ := doc.(map[string]any)["kind"].(string)
				s, ok := schemas[kind]
				require.True(t, ok, "kind %q has a schema", kind)
				assert.NoError(t, s.Validate(doc))
			})
		}
	}
}

// TestSchemaRejectsWhatTheLoaderRejects: for mistakes an editor can see in one file, the schema
// and the loader agree that the object is wrong.
func TestSchemaRejectsWhatTheLoaderRejects(t *testing.T) {
	schemas := compileSchemas(t)
	for name, tc := range map[string]struct{ kind, file, yaml string }{
		"unknown field":    {KindCluster, "clusters/a.yaml", "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: a}\nspec: {workspace: x, colour: red}\n"},
		"wrong apiVersion": {KindCluster, "clusters/a.yaml", "apiVersion: fleetbot.io/v1\nkind: Cluster\nmetadata: {name: a}\nspec: {}\n"},
		"bad scope":        {KindApp, "catalog/a/app.yaml", "apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata: {name: a}\nspec: {scope: global}\n"},
		"no metadata name": {KindWorkspace, "workspaces/a.yaml", "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {labels: {a: b}}\nspec: {}\n"},
		"bad access mode":  {KindPlatform, "platform.yaml", "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: p}\nspec: {owner: acme, admins: [x], access: {mode: strict}}\n"},
		"bad maxRemovals":  {KindPlatform, "platform.yaml", "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: p}\nspec: {owner: acme, admins: [x], maxRemovals: lots}\n"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Error(t, schemas[tc.kind].Validate(yamlToJSONValue(t, []byte(tc.yaml))), "schema rejects it")
			_, err := Load(fixture(t, map[string]string{tc.file: tc.yaml}))
			assert.Error(t, err, "loader rejects it")
		})
	}
}

// TestSchemaAcceptsWhatTheLoaderAccepts: short objects the loader takes are valid against the
// schema too, so an editor does not flag them.
func TestSchemaAcceptsWhatTheLoaderAccepts(t *testing.T) {
	schemas := compileSchemas(t)
	b, err := os.ReadFile(filepath.Join(validDir, "platform.yaml"))
	require.NoError(t, err)
	validPlatform := string(b) + "\n"
	for name, tc := range map[string]struct{ kind, file, yaml string }{
		"cluster without spec":   {KindCluster, "clusters/a.yaml", "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: a}\n"},
		"workspace without spec": {KindWorkspace, "workspaces/a.yaml", "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: a}\n"},
		"maxRemovals as a count": {KindPlatform, "platform.yaml", validPlatform + "  maxRemovals: 3\n  access: {maxAccessRemovals: 50%}\n"},
		"maxRemovals as a share": {KindPlatform, "platform.yaml", validPlatform + "  maxRemovals: 20%\n"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.NoError(t, schemas[tc.kind].Validate(yamlToJSONValue(t, []byte(tc.yaml))), "schema accepts it")
			_, err := Load(fixture(t, map[string]string{tc.file: tc.yaml}))
			require.NoError(t, err, "loader accepts it")
		})
	}
}
