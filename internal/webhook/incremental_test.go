package webhook

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-git/go-git/v5"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// memControl is a control repo whose commits live in memory.
type memControl struct {
	mu      sync.Mutex
	head    string
	commits map[string]fs.FS
}

func (c *memControl) push(files fstest.MapFS) string {
	h := sha1.New()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h.Write([]byte(n))
		h.Write(files[n].Data)
	}
	sha := hex.EncodeToString(h.Sum(nil))
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits[sha], c.head = files, sha
	return sha
}

func (c *memControl) Head(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.head, nil
}

func (c *memControl) Tree(_ context.Context, sha string) (fs.FS, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.commits[sha]
	if !ok {
		return nil, errors.New("no such commit")
	}
	return f, nil
}

func (c *memControl) Load(ctx context.Context, sha string) (*control.Repo, error) {
	files, err := c.Tree(ctx, sha)
	if err != nil {
		return nil, err
	}
	repo, err := control.Load(files)
	if err != nil {
		return nil, err
	}
	repo.Revision = sha
	return repo, nil
}

func (c *memControl) PullRequest(context.Context, int) (string, string, error) {
	return "", "", errors.New("no pull requests here")
}

// snapshotCounter is the local forge, counting the repos each run reads.
type snapshotCounter struct {
	*local.Forge
	mu    sync.Mutex
	snaps map[string]int
}

func (f *snapshotCounter) Snapshot(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*pr.Snapshot, error) {
	f.mu.Lock()
	f.snaps[repo]++
	f.mu.Unlock()
	return f.Forge.Snapshot(ctx, owner, repo, defaultBranch, botBranch)
}

func (f *snapshotCounter) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for r := range f.snaps {
		out = append(out, r)
	}
	sort.Strings(out)
	f.snaps = map[string]int{}
	return out
}

func readControl(t *testing.T) fstest.MapFS {
	t.Helper()
	root := filepath.Join("..", "..", "testdata", "control")
	files := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(os.DirFS(root), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(root, p))
		files[p] = &fstest.MapFile{Data: b, Mode: 0o644}
		return err
	}))
	return files
}

// edit returns a copy of files with one file's old text replaced (or the file set, or deleted
// when content is "").
func edit(t *testing.T, files fstest.MapFS, name, old, new string) fstest.MapFS {
	t.Helper()
	out := fstest.MapFS{}
	for n, f := range files {
		out[n] = &fstest.MapFile{Data: append([]byte{}, f.Data...), Mode: f.Mode}
	}
	switch {
	case old == "" && new == "":
		require.Contains(t, out, name)
		delete(out, name)
	case old == "":
		out[name] = &fstest.MapFile{Data: []byte(new), Mode: 0o644}
	default:
		require.Contains(t, string(out[name].Data), old, name)
		out[name].Data = []byte(strings.Replace(string(out[name].Data), old, new, 1))
	}
	return out
}

// repoState is what a target repo holds, commit times and source commits aside.
type repoState struct {
	Main, Bot string // tree hashes
	PRs       []string
}

func forgeState(t *testing.T, root string) map[string]repoState {
	t.Helper()
	out := map[string]repoState{}
	dirs, err := filepath.Glob(filepath.Join(root, "acme", "*.git"))
	require.NoError(t, err)
	for _, d := range dirs {
		name := strings.TrimSuffix(filepath.Base(d), ".git")
		g, err := git.PlainOpen(d)
		require.NoError(t, err)
		tree := func(branch string) string {
			ref, err := g.Reference(plumbing.NewBranchReferenceName(branch), true)
			if err != nil {
				return ""
			}
			c, err := g.CommitObject(ref.Hash())
			require.NoError(t, err)
			return c.TreeHash.String()
		}
		st := repoState{Main: tree("main"), Bot: tree("fleetbot/sync")}
		if b, err := os.ReadFile(filepath.Join(root, "acme", name+".pulls.json")); err == nil {
			var pulls []struct {
				Number int    `json:"number"`
				State  string `json:"state"`
				Head   string `json:"head"`
			}
			require.NoError(t, json.Unmarshal(b, &pulls))
			for _, p := range pulls {
				st.PRs = append(st.PRs, p.State+" "+p.Head)
			}
		}
		out[name] = st
	}
	return out
}

// mergeAll fast-forwards every repo's default branch to its bot branch, as a human merging the
// pull requests would.
func mergeAll(t *testing.T, root string) (merged []string) {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(root, "acme", "*.git"))
	require.NoError(t, err)
	for _, d := range dirs {
		g, err := git.PlainOpen(d)
		require.NoError(t, err)
		bot, err := g.Reference(plumbing.NewBranchReferenceName("fleetbot/sync"), true)
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			continue
		}
		require.NoError(t, err)
		require.NoError(t, g.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName("main"), bot.Hash())))
		merged = append(merged, strings.TrimSuffix(filepath.Base(d), ".git"))
	}
	return merged
}

// TestIncrementalApplyMatchesFull: for every kind of control-repo change, a push reconciled
// incrementally (only the repos whose desired state changed) leaves every target repo exactly
// as a full reconcile of the same commit does, and reads only the repos it must.
func TestIncrementalApplyMatchesFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := func() time.Time { return time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC) }
	open := func(dir string) *local.Forge {
		f, err := local.Open(dir, local.Options{Now: clock})
		require.NoError(t, err)
		t.Cleanup(func() { _ = f.Close() })
		return f
	}
	incrDir, fullDir := t.TempDir(), t.TempDir()
	incr := &snapshotCounter{Forge: open(incrDir), snaps: map[string]int{}}
	full := open(fullDir)
	ctl := &memControl{commits: map[string]fs.FS{}}
	// The full runs' renderer: a Renderer of their own, kept warm across the steps (a warm
	// render is a cold one's bytes: fanout's TestWarmRenderReusesFiles).
	fullRenderer := fanout.NewRenderer(fanout.Options{})
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		Runner:  app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return incr, nil }),
	})
	require.NoError(t, err)

	step := func(name string, files fstest.MapFS) []string {
		t.Helper()
		sha := ctl.push(files)
		require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: sha, Reason: "push", Incremental: true}, nil), name)
		read := incr.take()
		repo, err := ctl.Load(ctx, sha)
		require.NoError(t, err, name)
		targets, err := fullRenderer.Render(repo)
		require.NoError(t, err, name)
		_, err = reconcile.Apply(ctx, full, repo, targets, reconcile.Options{})
		require.NoError(t, err, name)
		assert.Equal(t, forgeState(t, fullDir), forgeState(t, incrDir), "%s: incremental and full leave the same repos", name)
		return read
	}

	files := readControl(t)
	all := step("first push: no converged render yet, so a full run", files)
	assert.Len(t, all, 6, "every target repo")
	mergeAll(t, fullDir)
	for _, repo := range mergeAll(t, incrDir) {
		// GitHub sends pull_request.closed for each merge: a drift job per repo.
		require.NoError(t, svc.Execute(ctx, Job{Kind: KindDrift, Repo: "acme/" + repo, Reason: "pull_request.closed"}, nil))
	}
	incr.take()
	assert.Len(t, step("after the merges", files), 0, "same commit, converged: nothing to read")

	cases := []struct {
		name, file, old, new string
		want                 []string
	}{
		{"a cluster's value", "clusters/edge-1.yaml", "192.168.50.0/28", "192.168.60.0/28", []string{"cluster-edge-1"}},
		{"a workspace's app values", "workspaces/search.yaml", "    - app: podinfo", "    - app: podinfo\n      values: {podinfo_replicas: \"3\"}", []string{"workspace-search"}},
		{"a catalog app every workspace runs", "catalog/podinfo/deployment.yaml", "podinfo:6.7.1", "podinfo:6.7.2", []string{"workspace-payments", "workspace-search"}},
		{"an app's default value", "catalog/podinfo/app.yaml", `default: "Hello from podinfo"`, `default: "Hello from fleetbot"`, nil},
		{"a platform component's default value", "catalog/monitoring/app.yaml", "default: 15d", "default: 30d", nil},
		{"a platform component's values", "platform.yaml", `metallb_speaker_tolerations: "false"`, `metallb_speaker_tolerations: "true"`, nil},
		{"a new cluster", "clusters/edge-2.yaml", "", "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge-2\n  labels: {env: prod}\n", []string{"cluster-edge-2"}},
	}
	for _, c := range cases {
		files = edit(t, files, c.file, c.old, c.new)
		read := step(c.name, files)
		if c.want != nil {
			assert.Equal(t, c.want, read, "%s: only the affected repos are read", c.name)
		} else {
			assert.NotEmpty(t, read, c.name)
		}
	}
	// A removed cluster needs the whole fleet (the removal guard); the result is the same.
	files = edit(t, files, "clusters/edge-2.yaml", "", "")
	assert.Len(t, step("a removed cluster", files), 7, "a removal plans every repo")
}

// TestCoalescedApplyIsFullIfEitherIs: a push (incremental) coalesced with a resync or an
// installation change (full) runs in full, whichever came first.
func TestCoalescedApplyIsFullIfEitherIs(t *testing.T) {
	t.Parallel()
	push := Job{Kind: KindApply, Repo: "acme/control", Reason: "push", Incremental: true}
	resync := Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"}
	assert.False(t, push.merge(resync).Incremental)
	assert.False(t, resync.merge(push).Incremental)
	assert.True(t, push.merge(push).Incremental)
}

// TestShardedServiceAppliesItsOwnRepos: replica 0 of 2 reads and writes only the repos jump
// hashing gives it, and ignores drift on the others; replica 1 does the rest.
func TestShardedServiceAppliesItsOwnRepos(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	forge, ctl, sha := localFleet(t)
	var all []string
	var svcs []*Service
	for i := range 2 {
		shard := reconcile.Shard{Index: i, Count: 2}
		svc, err := NewService(ServiceConfig{
			Control: ctl,
			Runner:  app.Config{Shard: shard}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return forge, nil }),
		})
		require.NoError(t, err)
		svcs = append(svcs, svc)
		require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: sha, Reason: "resync"}, nil))
		read := forge.take()
		require.NotEmpty(t, read, "shard %d", i)
		for _, r := range read {
			assert.True(t, shard.Owns(r), "shard %d read %s", i, r)
		}
		all = append(all, read...)
	}
	sort.Strings(all)
	assert.Len(t, all, 6, "together the shards cover every repo once: %v", all)
	// Drift on a repo goes to its owner; the other replica leaves it to that one's resync.
	for _, r := range all {
		owner := reconcile.ShardOf(r, 2)
		require.NoError(t, svcs[1-owner].Execute(ctx, Job{Kind: KindDrift, Repo: "acme/" + r}, nil))
		assert.Empty(t, forge.take(), "replica %d ignores drift on %s", 1-owner, r)
		require.NoError(t, svcs[owner].Execute(ctx, Job{Kind: KindDrift, Repo: "acme/" + r}, nil))
		assert.Equal(t, []string{r}, forge.take(), "replica %d reconciles %s", owner, r)
	}
}

// TestServiceClaimsWhatItApplies: an apply job claims, before it touches a target repo, every
// repo for a full run and only the changed ones for a push; a drift job claims nothing (its
// repos are its keys in the queue).
func TestServiceClaimsWhatItApplies(t *testing.T) {
	t.Parallel()
	forge, ctl, sha := localFleet(t)
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		Runner:  app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return forge, nil }),
	})
	require.NoError(t, err)
	var claims []string
	ctx := context.Background()
	lease := leaseFunc(func(_ context.Context, repos []string, all bool) error {
		if len(forge.take()) > 0 {
			t.Error("a target repo was read before the claim")
		}
		if all {
			claims = append(claims, "all")
		} else {
			claims = append(claims, strings.Join(repos, ","))
		}
		return nil
	})
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: sha, Reason: "resync"}, lease))
	assert.Equal(t, []string{"all"}, claims, "a resync claims every repo")
	forge.take()

	head := ctl.push(edit(t, readControl(t), "clusters/edge-1.yaml", "192.168.50.0/28", "192.168.51.0/28"))
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: head, Reason: "push", Incremental: true}, lease))
	assert.Equal(t, []string{"all", "cluster-edge-1"}, claims, "a push claims the repos it changed")

	require.NoError(t, svc.Execute(ctx, Job{Kind: KindDrift, Repo: "acme/cluster-prod-eu-1", Reason: "push"}, lease))
	assert.Len(t, claims, 2, "a drift claims nothing")

	refused := leaseFunc(func(context.Context, []string, bool) error { return context.Canceled })
	forge.take()
	err = svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: head, Reason: "resync"}, refused)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, forge.take(), "no claim, no repo touched")
}

// leaseFunc is a jobqueue.Lease made of a function.
type leaseFunc func(ctx context.Context, repos []string, all bool) error

func (f leaseFunc) Claim(ctx context.Context, repos []string, all bool) error {
	return f(ctx, repos, all)
}
