package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
)

// provisionControlDir copies testdata/provision/control to a temp dir the
// test may edit.
func provisionControlDir(t *testing.T) string {
	return copyTestdata(t, "provision/control")
}

func (c *controlRun) plan(source string, opts Options) *Report {
	c.t.Helper()
	repo, err := control.LoadDir(c.dir)
	require.NoError(c.t, err)
	targets, err := c.renderer.Render(repo)
	require.NoError(c.t, err)
	opts.Source = source
	opts.Concurrency = 4
	rep, err := Plan(context.Background(), c.f, repo, targets, opts)
	require.NoError(c.t, err)
	return rep
}

// mergeAll merges the open fleetbot PR of every repo of the report.
func (c *controlRun) mergeAll(rep *Report) {
	c.t.Helper()
	for _, r := range rep.Results {
		if r.PR == 0 || !r.Action.Writes() {
			continue
		}
		repo := strings.TrimPrefix(r.Repo, "acme/")
		require.NoError(c.t, c.f.Merge(context.Background(), "acme", repo, r.PR, local.MergeCommit), repo)
	}
}

// TestProvisionByPullRequest walks a provisioned cluster through its life in
// the management repo: created, scaled and upgraded by one PR whose plan
// names the values that change, removed with the default Retain (orphaned,
// nothing destroyed, not counted as a destruction), and removed after
// deletionPolicy: Delete was merged (destroys its machines, counts against
// maxRemovals).
func TestProvisionByPullRequest(t *testing.T) {
	t.Parallel()
	requireGit(t)
	c := &controlRun{t: t, dir: provisionControlDir(t), f: openForge(t, t.TempDir()), renderer: fanout.NewRenderer(fanout.Options{})}

	rep, err := c.apply("c1", Options{})
	require.NoError(t, err)
	hub := byRepo(rep)["mgmt-hub-eu"]
	assert.Equal(t, fanout.KindManagement, hub.Kind)
	assert.Equal(t, []string{"prod-eu-2: new cluster on management cluster hub-eu: Kubernetes v1.36.1, 2 node pools (5 machines), deletion policy Retain"}, hub.Provision)
	assert.Equal(t, []string{"edge-3: new cluster on management cluster hub-us: Kubernetes v1.35.4, 1 node pool (4 machines), deletion policy Delete"},
		byRepo(rep)["capi-hub-us"].Provision)
	c.mergeAll(rep)
	rep, err = c.apply("c1", Options{})
	require.NoError(t, err)
	require.False(t, rep.Changed(), "merged: nothing to do")

	// Scale and upgrade: one PR, in the management repo only.
	edit(t, c.dir, "clusters/prod-eu-2.yaml", "count: 3", "count: 5")
	edit(t, c.dir, "clusters/prod-eu-2.yaml", "v1.36.1", "v1.37.2")
	rep = c.plan("c2", Options{})
	var changed []string
	for _, r := range rep.Results {
		if r.Changed() {
			changed = append(changed, r.Repo)
		}
	}
	assert.Equal(t, []string{"acme/mgmt-hub-eu"}, changed, "a value change is one PR in the management repo")
	hub = byRepo(rep)["mgmt-hub-eu"]
	assert.Equal(t, []string{"prod-eu-2: kubernetesVersion v1.36.1 → v1.37.2; nodePools.workers.count 3 → 5"}, hub.Provision)
	var table strings.Builder
	require.NoError(t, rep.WriteText(&table))
	assert.Contains(t, table.String(), "nodePools.workers.count 3 → 5", "the plan's table shows it")
	rep, err = c.apply("c2", Options{})
	require.NoError(t, err)
	snap, err := c.f.Snapshot(context.Background(), "acme", "mgmt-hub-eu", "main", "fleetbot/sync")
	require.NoError(t, err)
	require.NotNil(t, snap.PR)
	assert.Contains(t, snap.PR.Body, "### What this does\n\n- prod-eu-2: kubernetesVersion v1.36.1 → v1.37.2; nodePools.workers.count 3 → 5\n",
		"the management repo's PR says it too")
	c.mergeAll(rep)

	// Retire with the default Retain: an orphaning step, nothing destroyed.
	clusterFile := filepath.Join(c.dir, "clusters", "prod-eu-2.yaml")
	saved, err := os.ReadFile(clusterFile)
	require.NoError(t, err)
	require.NoError(t, os.Remove(clusterFile))
	rep = c.plan("c3", Options{AllowRemovals: true})
	hub = byRepo(rep)["mgmt-hub-eu"]
	require.Len(t, hub.Provision, 1)
	assert.Contains(t, hub.Provision[0], "removing cluster prod-eu-2 orphans it: deletion policy Retain (as merged) keeps its HelmRelease, so Cluster API destroys none of its 2 node pools (7 machines)")
	assert.Equal(t, 1, rep.Removals, "only the cluster repo's removal counts: nothing is destroyed")

	// Setting Delete in the same change as the removal is no different: the
	// merged HelmRelease still says Retain (and Flux still sees prune: disabled).
	// Merge Delete first, then remove: the plan destroys the machines.
	require.NoError(t, os.WriteFile(clusterFile, []byte(strings.Replace(string(saved), "    values:", "    deletionPolicy: Delete\n    values:", 1)), 0o644))
	rep = c.plan("c4", Options{})
	assert.Equal(t, []string{"prod-eu-2: deletionPolicy Retain → Delete"}, byRepo(rep)["mgmt-hub-eu"].Provision)
	rep, err = c.apply("c4", Options{})
	require.NoError(t, err)
	c.mergeAll(rep)
	require.NoError(t, os.Remove(clusterFile))
	rep = c.plan("c5", Options{})
	hub = byRepo(rep)["mgmt-hub-eu"]
	assert.Equal(t, []string{"deleting cluster prod-eu-2 destroys its 2 node pools (7 machines) through Cluster API (deletion policy Delete, as merged)"}, hub.Provision)
	assert.Equal(t, 2, rep.Removals, "the destroyed cluster counts against maxRemovals with its cluster repo")
	require.Error(t, rep.Refused, "2 removals of 5 targets exceed maxRemovals (10%% = 1)")
	assert.ErrorIs(t, rep.Refused, ErrTooManyRemovals)
	rep = c.plan("c5", Options{AllowRemovals: true})
	assert.NoError(t, rep.Refused)
}

// TestProvisionPlanReadsHandEditedReleases: a management repo whose default
// branch holds a HelmRelease file that does not parse (a hand edit) is
// planned, not failed: the PR rewrites it, and its removal is counted as a
// possible destruction since its deletion policy is unknown.
func TestProvisionPlanReadsHandEditedReleases(t *testing.T) {
	t.Parallel()
	requireGit(t)
	forgeDir := t.TempDir()
	c := &controlRun{t: t, dir: provisionControlDir(t), f: openForge(t, forgeDir), renderer: fanout.NewRenderer(fanout.Options{})}
	rep, err := c.apply("c1", Options{})
	require.NoError(t, err)
	c.mergeAll(rep)
	humanPush(t, forgeDir, "mgmt-hub-eu", "main", func(wt string) {
		writeFile(t, wt, "provision/clusters/prod-eu-2.yaml", "kind: HelmRelease\nspec: [not, a, mapping\n")
	})
	rep = c.plan("c2", Options{})
	hub := byRepo(rep)["mgmt-hub-eu"]
	require.NoError(t, hub.Err)
	require.Len(t, hub.Provision, 1)
	assert.Contains(t, hub.Provision[0], "prod-eu-2: the HelmRelease on the default branch cannot be read (parsing: ")
	assert.Contains(t, hub.Provision[0], "the PR rewrites it")

	require.NoError(t, os.Remove(filepath.Join(c.dir, "clusters", "prod-eu-2.yaml")))
	rep = c.plan("c3", Options{})
	hub = byRepo(rep)["mgmt-hub-eu"]
	require.Len(t, hub.Provision, 1)
	assert.Contains(t, hub.Provision[0], "removing cluster prod-eu-2 may destroy its machines")
	assert.Equal(t, 2, rep.Removals, "an unknown policy counts as a destruction")
	assert.ErrorIs(t, rep.Refused, ErrTooManyRemovals)
}
