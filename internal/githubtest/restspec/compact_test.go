package restspec

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinyDescription is a description in GitHub's shape: a kept operation whose schema has a
// property named like a dropped keyword, one operation the patterns do not reach, and a
// component only that one refers to.
const tinyDescription = `{
  "openapi": "3.0.3",
  "info": {"title": "tiny", "version": "1"},
  "tags": [{"name": "repos"}],
  "x-webhooks": {"push": {}},
  "paths": {
    "/repos/{owner}/{repo}": {
      "parameters": [{"$ref": "#/components/parameters/owner"}, {"$ref": "#/components/parameters/repo"}],
      "patch": {
        "operationId": "repos/update", "summary": "Update a repository", "x-github": {"category": "repos"},
        "requestBody": {"content": {"application/json": {
          "schema": {"type": "object", "properties": {
            "description": {"type": "string", "description": "the repository's description"},
            "visibility": {"type": "string", "enum": ["public", "private"], "default": "public"}
          }, "additionalProperties": false},
          "examples": {"default": {"$ref": "#/components/examples/repo"}}
        }}},
        "responses": {"200": {"description": "ok", "content": {"application/json": {
          "schema": {"$ref": "#/components/schemas/repository"}}}}}
      },
      "delete": {
        "operationId": "repos/delete",
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/unused"}}}},
        "responses": {"204": {"description": "gone"}}
      }
    }
  },
  "components": {
    "parameters": {
      "owner": {"name": "owner", "in": "path", "required": true, "schema": {"type": "string"}},
      "repo": {"name": "repo", "in": "path", "required": true, "schema": {"type": "string"}}
    },
    "schemas": {
      "repository": {"type": "object", "required": ["name"], "properties": {
        "name": {"type": "string"}, "owner": {"$ref": "#/components/schemas/owner"}}},
      "owner": {"type": "object", "required": ["login"], "properties": {"login": {"type": "string"}}},
      "unused": {"type": "object", "required": ["confirm"], "properties": {"confirm": {"type": "boolean"}}}
    },
    "examples": {"repo": {"value": {"name": "r"}}}
  }
}`

func TestCompactKeepsWhatValidationReads(t *testing.T) {
	t.Parallel()
	out, err := Compact([]byte(tinyDescription), []string{"PATCH /repos/{owner}/{repo}"})
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(out, &doc))
	text := string(out)

	for _, gone := range []string{"x-webhooks", "tags", "summary", "x-github", "examples", "the repository's description", `"unused"`} {
		assert.NotContains(t, text, gone, "compact description keeps %s", gone)
	}
	props := doc["paths"].(map[string]any)["/repos/{owner}/{repo}"].(map[string]any)["patch"].(map[string]any)["requestBody"].(map[string]any)["content"].(map[string]any)["application/json"].(map[string]any)["schema"].(map[string]any)["properties"].(map[string]any)
	assert.Contains(t, props, "description", "a property named description is data, not documentation")
	assert.Equal(t, map[string]any{"type": "string", "enum": []any{"public", "private"}, "default": "public"}, props["visibility"])
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	assert.Contains(t, schemas, "repository")
	assert.Contains(t, schemas, "owner", "a component referred to by a kept component is kept")
	del := doc["paths"].(map[string]any)["/repos/{owner}/{repo}"].(map[string]any)["delete"]
	assert.Equal(t, map[string]any{"operationId": "repos/delete", stubExtension: true}, del)
}

// A compact description finds the same violations as the full one, for its kept operations and
// (through the full description) for the others.
func TestLoadCompactChecksAsTheFullDescription(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "api.json")
	require.NoError(t, os.WriteFile(path, []byte(tinyDescription), 0o644))
	full, err := Load(path)
	require.NoError(t, err)
	cache := filepath.Join(dir, "cache")
	compact, err := LoadCompact(path, cache, []string{"PATCH /repos/{owner}/{repo}"})
	require.NoError(t, err)
	cached, err := os.ReadDir(cache)
	require.NoError(t, err)
	require.Len(t, cached, 1, "one compact copy in the cache")
	again, err := LoadCompact(path, cache, []string{"PATCH /repos/{owner}/{repo}"})
	require.NoError(t, err, "loading from the cache")

	exchanges := []struct {
		method, body, resp string
		status             int
	}{
		{"PATCH", `{"description": "d", "visibility": "secret"}`, `{"owner": {}}`, 200},
		{"PATCH", `{"color": "red"}`, `{"name": "r", "owner": {"login": "o"}}`, 200},
		{"PATCH", `{"description": "d"}`, `{"name": "r"}`, 200},
		{"DELETE", `{"confirm": "yes"}`, ``, 204},
		{"DELETE", `{}`, ``, 204},
	}
	for _, ex := range exchanges {
		check := func(d *Description) []string {
			req := httptest.NewRequest(ex.method, "/repos/acme/r", strings.NewReader(ex.body))
			var out []string
			for _, v := range d.Check(context.Background(), Exchange{Request: req, RequestBody: []byte(ex.body),
				Status: ex.status, Header: http.Header{"Content-Type": {"application/json"}}, ResponseBody: []byte(ex.resp)}) {
				out = append(out, v.String())
			}
			return out
		}
		want := check(full)
		assert.Equal(t, want, check(compact), "%s %s", ex.method, ex.body)
		assert.Equal(t, want, check(again), "%s %s (cached)", ex.method, ex.body)
		if ex.body != `{}` && ex.body != `{"description": "d"}` {
			assert.NotEmpty(t, want, "%s %s: the full description refuses it", ex.method, ex.body)
		}
	}
}

// A committed copy (CompactCopy, LoadCopy) validates the operations it keeps as the full
// description does; of the others it knows the paths only: without the full description an
// exchange of one is not checked, one GitHub has no operation for is still a violation; with the
// full description installed, both are checked against it.
func TestCopyKnowsEveryOperationByPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fullPath := filepath.Join(dir, "api.json")
	require.NoError(t, os.WriteFile(fullPath, []byte(tinyDescription), 0o644))
	data, err := CompactCopy([]byte(tinyDescription), []string{"PATCH /repos/{owner}/{repo}"})
	require.NoError(t, err)
	assert.NotContains(t, string(data), stubExtension, "no stubs in a copy")
	assert.Contains(t, string(data), `"DELETE /repos/{owner}/{repo}"`, "the other operations by path")
	copyPath := filepath.Join(dir, "copy.json")
	require.NoError(t, os.WriteFile(copyPath, data, 0o644))

	check := func(d *Description, method, path, body string) []string {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		var out []string
		for _, v := range d.Check(context.Background(), Exchange{Request: req, RequestBody: []byte(body),
			Status: 204, Header: http.Header{"Content-Type": {"application/json"}}}) {
			out = append(out, v.String())
		}
		return out
	}
	bare, err := LoadCopy(copyPath, filepath.Join(dir, "not-installed.json"))
	require.NoError(t, err)
	assert.NotEmpty(t, check(bare, "PATCH", "/repos/acme/r", `{"visibility": "secret"}`), "a kept operation is checked")
	assert.Empty(t, check(bare, "DELETE", "/repos/acme/r", `{"confirm": "yes"}`), "another operation is not checked without the full description")
	assert.Equal(t, []string{"GET /nowhere: request: GitHub's REST API has no such operation"}, check(bare, "GET", "/nowhere", ""))

	withFull, err := LoadCopy(copyPath, fullPath)
	require.NoError(t, err)
	assert.NotEmpty(t, check(withFull, "DELETE", "/repos/acme/r", `{"confirm": "yes"}`), "checked against the full description")
	assert.NotEmpty(t, check(withFull, "GET", "/nowhere", ""))
}
