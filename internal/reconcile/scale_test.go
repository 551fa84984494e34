package reconcile

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// TestScale measures a first apply and a no-op apply over a synthetic fleet
// on the local forge. Run with FLEETBOT_SCALE=1; it logs timings.
func TestScale(t *testing.T) {
	t.Parallel()
	if os.Getenv("FLEETBOT_SCALE") == "" {
		t.Skip("set FLEETBOT_SCALE=1 to measure")
	}
	ctl := t.TempDir()
	require.NoError(t, fleetgen.WriteDir(ctl, fleetgen.Options{Clusters: 200, Workspaces: 20}))
	repo, err := control.LoadDir(ctl)
	require.NoError(t, err)
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
	require.NoError(t, err)
	f := openForge(t, t.TempDir())
	for _, run := range []string{"first", "no-op"} {
		start := time.Now()
		rep, err := Apply(context.Background(), f, repo, targets, Options{Concurrency: 8})
		require.NoError(t, err)
		t.Logf("%s apply: %d repos in %s (changed=%v)", run, len(rep.Results), time.Since(start), rep.Changed())
	}
}
