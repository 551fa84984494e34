package app

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// TestRolloutRecordsCommitted: skip and rollback write their record with the content's digest
// and commit that one file; the control repo then loads them as current, and the same record
// again writes nothing.
func TestRolloutRecordsCommitted(t *testing.T) {
	_, dir, repo := controlClone(t, "ctl")
	loaded, err := control.Load(os.DirFS(dir))
	require.NoError(t, err)

	res, err := SkipCluster(dir, loaded, "edge-1", "switched off", true)
	require.NoError(t, err)
	assert.True(t, res.Changed)
	assert.Len(t, res.Commit, 40)
	assert.Equal(t, "rollout: skip cluster edge-1\n\nswitched off", headMessage(t, repo))
	clean(t, repo)

	res, err = RollBack(dir, loaded, "", true)
	require.NoError(t, err)
	assert.Equal(t, "rollout/rollback.yaml", res.File)
	assert.Equal(t, "rollout: roll back", headMessage(t, repo))
	clean(t, repo)

	again, err := control.Load(os.DirFS(dir))
	require.NoError(t, err)
	assert.Equal(t, loaded.Digest, again.Digest, "records are no input of the render")
	assert.Equal(t, map[string]bool{"edge-1": true}, again.SkippedClusters())
	assert.NotNil(t, again.RolledBack())

	res, err = SkipCluster(dir, loaded, "edge-1", "switched off", true)
	require.NoError(t, err)
	assert.False(t, res.Changed, "already recorded")

	_, err = ApproveWave(dir, loaded, "canary", "", true)
	assert.ErrorContains(t, err, `wave "canary" does not require approval: the waves with approval: required are none`)
}
