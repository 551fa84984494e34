package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRolloutSmall runs the rollout measurement on a small fleet: five waves, each check
// opening exactly its wave's pull requests, one gate read per 100 clusters, the rollout done.
// 15 clusters put at least one in each wave (fleetgen's seed 1: 2, 5, 3, 3 and 2); the
// measurement's sizes are cmd/benchtable's (make bench).
func TestRolloutSmall(t *testing.T) {
	t.Parallel()
	res, err := Rollout(context.Background(), RolloutOptions{Clusters: 15, Apps: 2})
	require.NoError(t, err)
	require.Len(t, res.Waves, 5)
	total := 0
	for _, w := range res.Waves {
		assert.Equal(t, w.Clusters, w.Opened, w.Name)
		assert.Equal(t, 1, w.GateRequests, "%s: 15 clusters are one GraphQL query", w.Name)
		total += w.Clusters
	}
	assert.Equal(t, 15, total, "every cluster is in a wave")
	assert.Zero(t, res.Idle.Writes, "a check while the canary soaks writes nothing: %v", res.Idle.Routes)
	assert.True(t, res.Done)
}
