package githubtest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var updateSchemas = flag.Bool("update-schemas", false, "regenerate the compact copies of GitHub's descriptions (internal/githubtest/testdata/schemas) from the packages scripts/github-schemas.sh installed")

// TestSchemaCopiesArePublished: each committed compact copy is byte for byte what
// GenerateSchemaCopies makes of the pinned published package (@octokit/openapi,
// @octokit/graphql-schema, @octokit/webhooks-schemas), so the tests that read the copies check
// against GitHub's descriptions, not against an edited copy. It needs the packages (`make
// schemas` installs them, and regenerates the copies with -update-schemas): without them it is
// skipped, except under CI=true, where .ci/run installs them.
func TestSchemaCopiesArePublished(t *testing.T) {
	root, err := moduleRoot()
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(root, publishedDir)); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("GitHub's published descriptions are needed under CI=true to check the compact copies: %v (run make schemas)", err)
		}
		t.Skipf("GitHub's published descriptions are not installed (make schemas installs them): %v", err)
	}
	got, err := GenerateSchemaCopies(root)
	require.NoError(t, err)
	dir := filepath.Join(root, SchemaCopiesDir)
	if *updateSchemas {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range entries {
			if _, ok := got[e.Name()]; !ok {
				require.NoError(t, os.Remove(filepath.Join(dir, e.Name())), "a copy no package makes any more")
			}
		}
		for name, data := range got {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
		}
		return
	}
	for name, data := range got {
		have, err := os.ReadFile(filepath.Join(dir, name))
		if !assert.NoError(t, err, "%s: missing; run make schemas", name) {
			continue
		}
		assert.True(t, bytes.Equal(data, have), "%s is not what make schemas makes of the published package (%d bytes, %d committed): run make schemas", name, len(data), len(have))
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		_, ok := got[e.Name()]
		assert.True(t, ok, "%s: no published package makes it; run make schemas", e.Name())
	}
}

// TestRESTCopyCoversTheFake: the compact REST descriptions validate every route the fake
// serves in full (a route added without `make schemas` would be checked against nothing).
func TestRESTCopyCoversTheFake(t *testing.T) {
	t.Parallel()
	d, err := restSpec()
	require.NoError(t, err)
	ghes, err := ghesSpec()
	require.NoError(t, err)
	for _, p := range restPatterns() {
		assert.True(t, d.CoversPattern(p), "%s: not in the compact copy %s: run make schemas", p, RESTCopy)
		assert.True(t, ghes.CoversPattern(p), "%s: not in the compact GHES copy: run make schemas (or GHES lacks it)", p)
	}
}
