package github_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBlobsAreReadOnce: a blob is content-addressed, so the forge answers a second read of
// the same hash (the next wave check's plan of a held repo) from memory: no request. A hash
// that does not exist is still an error, and is not remembered.
func TestBlobsAreReadOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.srv.CreateRepo("acme", "cluster-x", map[string]string{"flux/fleetbot.yaml": "kind: Kustomization\n"})
	tree, _, err := e.srv.Client().Git.GetTree(ctx, "acme", "cluster-x", "main", true)
	require.NoError(t, err)
	var hash string
	for _, en := range tree.Entries {
		if en.GetPath() == "flux/fleetbot.yaml" {
			hash = en.GetSHA()
		}
	}
	require.NotEmpty(t, hash)
	f := e.forge(t, true)
	blobReads := func() int {
		n := 0
		for _, r := range e.srv.Requests() {
			if strings.HasSuffix(r.Route, "/git/blobs/{sha}") {
				n++
			}
		}
		return n
	}
	e.srv.ResetLog()
	b, err := f.Blob(ctx, "acme", "cluster-x", hash)
	require.NoError(t, err)
	assert.Equal(t, "kind: Kustomization\n", string(b))
	b[0] = 'X' // the caller's copy
	b, err = f.Blob(ctx, "acme", "cluster-x", hash)
	require.NoError(t, err)
	assert.Equal(t, "kind: Kustomization\n", string(b), "the cache hands out copies")
	assert.Equal(t, 1, blobReads(), "read once")

	missing := strings.Repeat("0", 40)
	_, err = f.Blob(ctx, "acme", "cluster-x", missing)
	require.Error(t, err)
	_, err = f.Blob(ctx, "acme", "cluster-x", missing)
	require.Error(t, err)
	assert.Equal(t, 3, blobReads(), "a missing blob is asked for each time")
}
