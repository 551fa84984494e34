package app

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
)

// afterCtx is a context that is done from its n-th Err call on: a signal landing after n-1
// files were written, counted, not timed.
type afterCtx struct {
	context.Context
	calls *atomic.Int32
	n     int32
}

func (c afterCtx) Err() error {
	if c.calls.Add(1) >= c.n {
		return context.Canceled
	}
	return nil
}

// TestGenerateIsNeverHalfWritten: a signal in the middle of dev generate leaves --out as it was
// (missing) and nothing beside it; without one, the repo lands whole.
func TestGenerateIsNeverHalfWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "ctl")
	_, err := GenerateControlRepo(afterCtx{Context: context.Background(), calls: &atomic.Int32{}, n: 5}, out, GenerateOptions{Clusters: 20, Apps: 3, Seed: 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "generate interrupted (context canceled): "+out+" is unchanged")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written, nothing left beside --out")

	require.NoError(t, os.Mkdir(out, 0o755)) // an empty --out is taken
	n, err := GenerateControlRepo(context.Background(), out, GenerateOptions{Clusters: 20, Apps: 3, Seed: 1})
	require.NoError(t, err)
	assert.Greater(t, n, 20)
	_, err = LoadDir(context.Background(), fanout.NewRenderer(fanout.Options{}), out)
	assert.NoError(t, err, "the generated repo loads")
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1)
}

// TestWorkspaceCheckOf: the check of a workspace as the control repo defines it, for a caller
// holding the control repo (serve checking a workspace pull request): its namespace, level and
// the platform's allowlist.
func TestWorkspaceCheckOf(t *testing.T) {
	t.Parallel()
	repo, err := LoadDir(context.Background(), fanout.NewRenderer(fanout.Options{}), filepath.Join("..", "..", "testdata", "control"))
	require.NoError(t, err)
	wc, ok := WorkspaceCheckOf(repo, "payments")
	require.True(t, ok)
	assert.Equal(t, WorkspaceCheck{Workspace: "payments", Namespace: "payments", PodSecurity: "restricted"}, wc)
	repo.Workspace("search").Spec.PodSecurity = "baseline"
	repo.Platform.Spec.Tenants.Allow = []control.TenantKind{{APIGroup: "monitoring.coreos.com", Kind: "ServiceMonitor"}}
	wc, ok = WorkspaceCheckOf(repo, "search")
	require.True(t, ok)
	assert.Equal(t, "baseline", wc.PodSecurity)
	assert.Equal(t, repo.Platform.Spec.Tenants.Allow, wc.Allow)
	_, ok = WorkspaceCheckOf(repo, "nope")
	assert.False(t, ok)
	k, err := ParseTenantKind("ServiceMonitor.monitoring.coreos.com")
	require.NoError(t, err)
	assert.Equal(t, control.TenantKind{APIGroup: "monitoring.coreos.com", Kind: "ServiceMonitor"}, k)
	k, err = ParseTenantKind("ConfigMap")
	require.NoError(t, err)
	assert.Equal(t, control.TenantKind{Kind: "ConfigMap"}, k)
	_, err = ParseTenantKind(".apps")
	assert.Error(t, err)
}
