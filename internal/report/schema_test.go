package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/invopop/jsonschema"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite schema/report.json from the Go types")

// schemaFile is the committed JSON Schema of the report, beside the control repo's schemas.
var schemaFile = filepath.Join("..", "..", "schema", "report.json")

// schemaID is where the committed schema is served from.
const schemaID = "https://raw.githubusercontent.com/fleetbot-io/fleetbot/main/schema/report.json"

// generateSchema reflects the JSON Schema of Document from its Go types and doc comments.
func generateSchema(t *testing.T) []byte {
	t.Helper()
	r := &jsonschema.Reflector{
		ExpandedStruct: true,
		// A reader of version 1 must accept fields that a later fleetbot adds to version 1.
		AllowAdditionalProperties: true,
	}
	require.NoError(t, r.AddGoComments("github.com/fleetbot-io/fleetbot/internal/report", "."))
	s := r.Reflect(&Document{})
	s.ID = jsonschema.ID(schemaID)
	s.Title = "fleetbot report"
	if v, ok := s.Properties.Get("format_version"); ok {
		v.Const = FormatVersion
	}
	if v, ok := s.Properties.Get("command"); ok {
		v.Enum = make([]any, len(Commands))
		for i, c := range Commands {
			v.Enum[i] = c
		}
	}
	if d, ok := s.Definitions["Repo"]; ok {
		if v, ok := d.Properties.Get("kind"); ok {
			v.Enum = []any{"cluster", "workspace", "management", "control"}
		}
		if v, ok := d.Properties.Get("action"); ok {
			v.Enum = make([]any, len(Actions))
			for i, a := range Actions {
				v.Enum[i] = a
			}
		}
	}
	if d, ok := s.Definitions["Outcome"]; ok {
		if v, ok := d.Properties.Get("class"); ok {
			v.Enum = make([]any, len(Classes))
			for i, c := range Classes {
				v.Enum[i] = c
			}
		}
	}
	if d, ok := s.Definitions["File"]; ok {
		if v, ok := d.Properties.Get("op"); ok {
			v.Enum = []any{"added", "changed", "removed"}
		}
	}
	b, err := json.MarshalIndent(s, "", "  ")
	require.NoError(t, err)
	return append(b, '\n')
}

// TestSchemaUpToDate fails when schema/report.json differs from what the Go types give;
// `go test ./internal/report -run TestSchemaUpToDate -update` rewrites it.
func TestSchemaUpToDate(t *testing.T) {
	got := generateSchema(t)
	if *update {
		require.NoError(t, os.WriteFile(schemaFile, got, 0o644))
	}
	want, err := os.ReadFile(schemaFile)
	require.NoError(t, err, "run `go test ./internal/report -run TestSchemaUpToDate -update` to write it")
	if !bytes.Equal(got, want) {
		t.Errorf("%s is out of date with the Go types in internal/report; run `go test ./internal/report -run TestSchemaUpToDate -update` and commit it", schemaFile)
	}
}

// compileSchema compiles the committed schema.
func compileSchema(t *testing.T) *sjs.Schema {
	t.Helper()
	f, err := os.Open(schemaFile)
	require.NoError(t, err)
	defer f.Close()
	doc, err := sjs.UnmarshalJSON(f)
	require.NoError(t, err)
	c := sjs.NewCompiler()
	require.NoError(t, c.AddResource(schemaID, doc))
	s, err := c.Compile(schemaID)
	require.NoError(t, err)
	return s
}

// TestSchemaValidatesDocuments: a full document is valid; one without format_version, of
// another version, or with an action outside the vocabulary is not.
func TestSchemaValidatesDocuments(t *testing.T) {
	s := compileSchema(t)
	valid := func(d any) error {
		b, err := json.Marshal(d)
		require.NoError(t, err)
		inst, err := sjs.UnmarshalJSON(bytes.NewReader(b))
		require.NoError(t, err)
		return s.Validate(inst)
	}
	assert.NoError(t, valid(sample()))
	for name, edit := range map[string]func(m map[string]any){
		"no format_version":    func(m map[string]any) { delete(m, "format_version") },
		"format_version 1":     func(m map[string]any) { m["format_version"] = 1 },
		"unknown command":      func(m map[string]any) { m["command"] = "destroy" },
		"action outside words": func(m map[string]any) { m["repos"].([]any)[0].(map[string]any)["action"] = "no change" },
		"class outside words": func(m map[string]any) {
			m["repos"].([]any)[0].(map[string]any)["outcome"] = map[string]any{"class": "stalled"}
		},
		"no outcome": func(m map[string]any) { delete(m["repos"].([]any)[0].(map[string]any), "outcome") },
	} {
		b, err := json.Marshal(sample())
		require.NoError(t, err)
		var m map[string]any
		require.NoError(t, json.Unmarshal(b, &m))
		edit(m)
		assert.Error(t, valid(m), name)
	}
}
