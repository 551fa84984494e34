package status

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// TestStatusSaysWhatWasRolledBack: the status view (text, JSON, the page's note) says which
// revision was rolled back, why, and where each restore stands.
func TestStatusSaysWhatWasRolledBack(t *testing.T) {
	in := wavesInput()
	in.Rollout = &rollout.Status{Revision: "abcdef1234", Rollback: &rollout.RollbackStatus{Revision: "abcdef1234", Reason: "c2: Flux reported a failure",
		Restores: []rollout.RestoreStatus{{Repo: "cluster-c2", To: "0123456789", PR: 9, State: rollout.RestoreOpen}},
		Stuck:    map[string]string{"cluster-c3": "no earlier merge was reported healthy here"}}}
	f := Build(in, Options{})
	require.NotNil(t, f.Rollback)
	want := "Rolled back abcdef1 because c2: Flux reported a failure: 1 repo(s) restored: cluster-c2 to 0123456 (open, #9); nothing to restore in cluster-c3."
	assert.Equal(t, want, f.Rollback.Sentence())
	var text, js bytes.Buffer
	require.NoError(t, f.WriteText(&text))
	assert.Contains(t, text.String(), want)
	require.NoError(t, f.WriteJSON(&js))
	assert.Contains(t, js.String(), `"rollback": {
      "revision": "abcdef1234"`)
}
