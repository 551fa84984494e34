package bench

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSimulateSmall runs the rollout simulation on a small fleet (make bench runs it at 1,000
// clusters, 2 % silent and 1 % failing): with a budget that covers each wave's silent and
// failing clusters the rollout completes without a human; with a budget of 0 the first failure
// rolls it back, and the restored repos are merged and healthy again. At 100 clusters the
// shares are larger (10 % silent, 5 % failing, budget 15 %), so that the small waves have
// some. It asserts outcomes, not timings.
func TestSimulateSmall(t *testing.T) {
	t.Parallel()
	res, err := Simulate(context.Background(), SimulateOptions{Clusters: 100, Apps: 2, Budget: "15%", SilentPercent: 10, FailingPercent: 5})
	require.NoError(t, err)
	assert.True(t, res.Done, "the rollout completes within budget")
	assert.False(t, res.RolledBack)
	assert.Positive(t, res.Failing, "some clusters failed")
	assert.Positive(t, res.Silent, "some clusters never reported")

	res, err = Simulate(context.Background(), SimulateOptions{Clusters: 100, Apps: 2, Budget: "0", SilentPercent: 10, FailingPercent: 5})
	require.NoError(t, err)
	assert.False(t, res.Done)
	assert.True(t, res.RolledBack, "over a budget of 0 the rollout rolls back")
	assert.Positive(t, res.Restored, "the repos the revision reached are restored and healthy")
}
