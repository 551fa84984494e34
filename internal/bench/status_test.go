package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// TestStatusPageSmallFleet runs the /status measurement on a small fleet: every page
// answers, the view has a row per target repo (the management repo included) and a bar per
// wave. Its times are not checked here (see make bench).
func TestStatusPageSmallFleet(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, fleetgen.WriteDir(dir, fleetgen.Options{Clusters: 60, Apps: 4, Seed: 1}))
	res, err := StatusPage(dir)
	require.NoError(t, err)
	assert.Equal(t, 60, res.Clusters)
	assert.Equal(t, 60+1+1, res.Repos, "60 cluster repos, 60/50 workspace repos, the management repo")
	assert.Equal(t, 4, res.Waves, "dev, staging, prod-eu and the rest")
	require.Len(t, res.Pages, 4)
	for _, p := range res.Pages {
		assert.Equal(t, StatusPageRuns, p.Runs, p.Name)
		assert.Greater(t, p.Bytes, 1000, p.Name)
		assert.LessOrEqual(t, p.Median, p.Max, p.Name)
	}
	assert.Positive(t, res.Slowest())
}
