package fleetgen

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

func TestGenerateLoadsAndValidates(t *testing.T) {
	for _, o := range []Options{{}, {Clusters: 1, Apps: 1}, {Clusters: 120, Workspaces: 3, Apps: 20, Seed: 7}, {Clusters: 30, Apps: 45, Seed: 3}} {
		repo, err := control.Load(Generate(o))
		require.NoError(t, err, "options %+v", o)
		d := o.withDefaults()
		assert.Len(t, repo.Clusters, d.Clusters)
		assert.Len(t, repo.Workspaces, d.Workspaces)
		assert.Len(t, repo.Apps, d.Apps)
		assert.NotEmpty(t, repo.Deployments())
	}
}

func TestGenerateDeterministic(t *testing.T) {
	o := Options{Clusters: 50, Apps: 12, Seed: 42}
	assert.Equal(t, Generate(o), Generate(o))
	assert.NotEqual(t, Generate(o), Generate(Options{Clusters: 50, Apps: 12, Seed: 43}))
}

func TestWriteDir(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, WriteDir(dir, Options{Clusters: 5, Seed: 1}))
	_, err := os.Stat(filepath.Join(dir, "platform.yaml"))
	require.NoError(t, err)
	repo, err := control.LoadDir(dir)
	require.NoError(t, err)
	assert.Len(t, repo.Clusters, 5)
}
