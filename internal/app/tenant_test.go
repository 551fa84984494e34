package app

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/policy"
)

// TestFleetTenant: a repo name is a tenant repo when the fleet renders a workspace or cluster
// repo of that name, whatever its case; the workspace's namespace comes from the control repo.
func TestFleetTenant(t *testing.T) {
	t.Parallel()
	fl, err := Config{}.Load(context.Background(), filepath.Join("..", "..", "testdata", "control"))
	require.NoError(t, err)
	ws, ok := fl.Tenant("ACME/Workspace-Payments")
	require.True(t, ok)
	require.NotEmpty(t, ws.Rendered)
	for h, c := range ws.Rendered {
		assert.Equal(t, gittree.BlobHash(c), h, "content by its git blob hash")
	}
	ws.Rendered = nil
	assert.Equal(t, Tenant{Repo: "acme/workspace-payments", Kind: TenantWorkspace, Name: "payments", Namespace: "payments",
		Workspace: WorkspaceCheck{Workspace: "payments", Namespace: "payments", PodSecurity: "restricted"}}, ws)
	c, ok := fl.Tenant("acme/cluster-edge-1")
	require.True(t, ok)
	c.Rendered = nil
	assert.Equal(t, Tenant{Repo: "acme/cluster-edge-1", Kind: TenantCluster, Name: "edge-1"}, c)
	for _, repo := range []string{"acme/control", "acme/workspace-nope", "other/workspace-payments", "acme/cluster-edge-1/x", ""} {
		_, ok := fl.Tenant(repo)
		assert.False(t, ok, repo)
	}

	check := RequiredCheck{Context: "fleetbot tenant", AppID: 7}
	before := fl.Targets[0].Access.Protection
	fl.RequireCheck(check)
	for _, tg := range fl.Targets {
		if tg.Kind == fanout.KindWorkspace || tg.Kind == fanout.KindCluster {
			assert.Equal(t, []policy.RequiredCheck{check}, tg.Access.Protection.RequiredChecks, tg.Repo)
		} else {
			assert.Empty(t, tg.Access.Protection.RequiredChecks, tg.Repo)
		}
	}
	assert.Empty(t, before.RequiredChecks, "the protection is replaced, not changed in place")
}

// TestCheckTenantIsCheckWorkspace: serve's tenant check on a repo's files finds what check
// workspace finds on a checkout of them, with the workspace's namespace and ServiceAccount.
func TestCheckTenantIsCheckWorkspace(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"clusters/edge-1/kustomization.yaml": "resources: [../../apps]\n",
		"apps/kustomization.yaml":            "resources: [ns.yaml]\n",
		"apps/ns.yaml":                       "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: mine\n",
	}
	dir := t.TempDir()
	writeFiles(t, dir, files)
	wantEntries, want, err := CheckWorkspaceRepo(dir, "payments", "payments")
	require.NoError(t, err)
	require.NotEmpty(t, want)

	in := map[string][]byte{}
	for p, c := range files {
		in[p] = []byte(c)
	}
	entries, got := CheckTenant(Tenant{Kind: TenantWorkspace, Name: "payments", Namespace: "payments"}, in)
	assert.Equal(t, wantEntries, entries)
	assert.Equal(t, want, got)
	assert.Equal(t, "apps/ns.yaml", got[0].File)
	assert.Equal(t, 2, got[0].Line, "the kind line of the object")

	entries, got = CheckTenant(Tenant{Kind: TenantCluster, Name: "edge-1"}, in)
	assert.Equal(t, []string{"apps"}, entries)
	assert.Empty(t, got, "a cluster admin may create a Namespace")
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		name := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(name), 0o755))
		require.NoError(t, os.WriteFile(name, []byte(c), 0o644))
	}
}
