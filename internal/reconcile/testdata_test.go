package reconcile

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// controlDir copies the example control repo (testdata/control at the repo
// root) to a temp dir the test may edit.
func controlDir(t *testing.T) string {
	return copyTestdata(t, "control")
}

// copyTestdata copies testdata/<dir> at the repo root to a temp dir the test may edit.
func copyTestdata(t *testing.T, dir string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, os.CopyFS(dst, os.DirFS(filepath.Join("..", "..", "testdata", filepath.FromSlash(dir)))))
	return dst
}

func edit(t *testing.T, dir, rel, old, new string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}

type controlRun struct {
	t        *testing.T
	dir      string
	f        *local.Forge
	renderer *fanout.Renderer
}

func (c *controlRun) apply(source string, opts Options) (*Report, error) {
	c.t.Helper()
	repo, err := control.LoadDir(c.dir)
	require.NoError(c.t, err)
	targets, err := c.renderer.Render(repo)
	require.NoError(c.t, err)
	opts.Source = source
	if opts.Concurrency == 0 {
		opts.Concurrency = 4
	}
	return Apply(context.Background(), c.f, repo, targets, opts)
}

// TestLifecycleFromTestdata drives the lifecycle from the example control
// repo through the real loader and renderer.
func TestLifecycleFromTestdata(t *testing.T) {
	t.Parallel()
	requireGit(t)
	ctx := context.Background()
	forgeDir := t.TempDir()
	c := &controlRun{t: t, dir: controlDir(t), f: openForge(t, forgeDir), renderer: fanout.NewRenderer(fanout.Options{})}

	start := time.Now()
	rep, err := c.apply("c1", Options{})
	require.NoError(t, err)
	t.Logf("first apply: %d repos in %s", len(rep.Results), time.Since(start))
	var repos []string
	for _, r := range rep.Results {
		assert.Equal(t, pr.ActionCreate, r.Action, r.Repo)
		repos = append(repos, strings.TrimPrefix(r.Repo, "acme/"))
	}
	require.Contains(t, repos, "cluster-prod-eu-1")
	require.Contains(t, repos, "workspace-payments")

	// Merge by hand, then the merges are recognised.
	for i, repo := range repos {
		if i%2 == 0 {
			gitUpdateRef(t, forgeDir, repo, "refs/heads/main", "refs/heads/fleetbot/sync")
		} else {
			require.NoError(t, c.f.Merge(ctx, "acme", repo, 1, local.MergeCommit))
		}
	}
	rep, err = c.apply("c1", Options{})
	require.NoError(t, err)
	assert.False(t, rep.Changed())

	// No-op: nothing written, no ref moved.
	before, refs := dirState(t, forgeDir), allRefs(t, c.f, repos...)
	start = time.Now()
	rep, err = c.apply("c2", Options{})
	require.NoError(t, err)
	t.Logf("no-op apply: %d repos in %s", len(rep.Results), time.Since(start))
	assert.False(t, rep.Changed())
	assert.Equal(t, before, dirState(t, forgeDir))
	assert.Equal(t, refs, allRefs(t, c.f, repos...))

	// One cluster value changes: only that repo gets a PR.
	edit(t, c.dir, "clusters/edge-1.yaml", "192.168.50.0/28", "192.168.60.0/28")
	rep, err = c.apply("c3", Options{})
	require.NoError(t, err)
	for repo, a := range actions(rep) {
		want := string(pr.ActionNoop)
		if repo == "cluster-edge-1" {
			want = string(pr.ActionOpen)
		}
		assert.Equal(t, want, a, repo)
	}
	edge := byRepo(rep)["cluster-edge-1"]
	assert.NotEmpty(t, edge.Objects, "objects changed are reported")

	// A human commit on the bot branch is left alone.
	human := humanPush(t, forgeDir, "cluster-edge-1", "fleetbot/sync", func(wt string) {
		writeFile(t, wt, "apps/hand.yaml", "kind: ConfigMap\n")
	})
	edit(t, c.dir, "clusters/edge-1.yaml", "192.168.60.0/28", "192.168.70.0/28")
	rep, err = c.apply("c4", Options{})
	require.NoError(t, err)
	assert.Equal(t, string(pr.ActionBlocked), actions(rep)["cluster-edge-1"])
	r, err := c.f.Refs("acme", "cluster-edge-1")
	require.NoError(t, err)
	assert.Equal(t, human, r["fleetbot/sync"])

	// A hand-edited scaffold is left alone.
	humanPush(t, forgeDir, "workspace-payments", "main", func(wt string) {
		writeFile(t, wt, "apps/kustomization.yaml", "resources: [api.yaml]\n")
		writeFile(t, wt, "apps/api.yaml", "kind: ConfigMap\n")
	})
	rep, err = c.apply("c5", Options{})
	require.NoError(t, err)
	assert.Equal(t, string(pr.ActionNoop), actions(rep)["workspace-payments"])

	// Remove one cluster: a removal PR; its workspace repo drops its folder.
	require.NoError(t, os.Remove(filepath.Join(c.dir, "clusters", "staging-eu-1.yaml")))
	rep, err = c.apply("c6", Options{})
	require.NoError(t, err)
	acts := actions(rep)
	assert.Equal(t, string(pr.ActionRemove), acts["cluster-staging-eu-1"])
	assert.Equal(t, string(pr.ActionOpen), acts["workspace-search"])
	assert.Equal(t, 1, rep.Removals)

	// Mass removal is refused, nothing written.
	require.NoError(t, os.Remove(filepath.Join(c.dir, "clusters", "prod-us-1.yaml")))
	require.NoError(t, os.Remove(filepath.Join(c.dir, "clusters", "prod-eu-1.yaml")))
	before, refs = dirState(t, forgeDir), allRefs(t, c.f, repos...)
	rep, err = c.apply("c7", Options{})
	require.ErrorIs(t, err, ErrTooManyRemovals)
	assert.Equal(t, 2, rep.Removals)
	assert.Equal(t, before, dirState(t, forgeDir))
	assert.Equal(t, refs, allRefs(t, c.f, repos...))
}
