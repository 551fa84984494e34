package reconcile

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/gittree"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// TestLifecycle walks one fleet of ten cluster repos through the whole PR
// lifecycle against real bare git repos: first apply, merge by hand, no-op,
// a change to one cluster, base moved, revert, a human commit on the bot
// branch, a hand-edited scaffold, one removal, then a mass removal refused.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	requireGit(t)
	ctx := context.Background()
	dir := t.TempDir()
	f := openForge(t, dir)
	fl := tenClusters()
	all := repoNames(fl)

	// 1. First apply: every repo is created with a bootstrap commit on main
	// (README, CODEOWNERS, scaffold only) and the first PR.
	var progress []string
	rep, err := apply(t, f, fl, Options{Progress: func(r Result) { progress = append(progress, r.Line()) }})
	require.NoError(t, err)
	assert.Len(t, progress, 10, "one progress line per repo")
	for _, r := range rep.Results {
		assert.Equal(t, pr.ActionCreate, r.Action, r.Repo)
		assert.Equal(t, 1, r.PR, r.Repo)
		assert.Equal(t, 6, r.FilesAdded, r.Repo)
		assert.Equal(t, pr.ObjectCounts{Added: 1}, r.Objects["ConfigMap"], r.Repo)
	}
	snap, err := f.Snapshot(ctx, "acme", "cluster-c01", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, []string{".github/CODEOWNERS", "README.md", "apps/kustomization.yaml"}, snap.Files.Paths(), "bootstrap holds only README, CODEOWNERS and scaffolds")
	require.NotNil(t, snap.PR)
	assert.Equal(t, pr.StateOpen, snap.PR.State)
	assert.Equal(t, "fleetbot: sync cluster c01", snap.PR.Title)
	assert.Contains(t, snap.PR.Body, "`platform/monitoring.yaml` | added")
	assert.Contains(t, snap.PR.Body, "@acme/platform")
	assert.Contains(t, snap.PR.Body, "0123456789abcdef0123456789abcdef01234567")
	assert.Contains(t, snap.PR.Body, "<!-- fleetbot:state {\"head\":\""+snap.Bot.SHA)
	assert.Contains(t, snap.Bot.Message, "Fleetbot-Source: 0123456789abcdef0123456789abcdef01234567")
	settings, err := os.ReadFile(filepath.Join(dir, "acme", "cluster-c01.settings.json"))
	require.NoError(t, err)
	assert.Contains(t, string(settings), `"managedBy": "fleetbot"`)

	// 2. Merge every PR by hand, in every way a human would.
	for i, repo := range all {
		switch i % 4 {
		case 0:
			require.NoError(t, f.Merge(ctx, "acme", repo, 1, local.MergeFastForward))
		case 1:
			require.NoError(t, f.Merge(ctx, "acme", repo, 1, local.MergeCommit))
		case 2:
			require.NoError(t, f.Merge(ctx, "acme", repo, 1, local.MergeSquash))
		case 3: // the README's plain-git way, unknown to pulls.json
			gitUpdateRef(t, dir, repo, "refs/heads/main", "refs/heads/fleetbot/sync")
		}
	}
	mains := mainRefs(t, f, all)
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	for _, r := range rep.Results {
		// The run records each merge and deletes the merged branch: it writes, so it is a
		// cleanup, not a noop; it changes no content, so it counts as no change.
		assert.Equal(t, pr.ActionCleanup, r.Action, r.Repo)
		assert.False(t, r.Changed(), r.Repo)
	}
	assert.Equal(t, mains, mainRefs(t, f, all), "recognising merges never moves main")
	for _, repo := range all {
		pulls, err := f.PullRequests("acme", repo)
		require.NoError(t, err)
		assert.Equal(t, pr.StateMerged, pulls[0].State, repo)
		refs, err := f.Refs("acme", repo)
		require.NoError(t, err)
		assert.NotContains(t, refs, "fleetbot/sync", "merged bot branch deleted in %s", repo)
	}

	// 3. A no-op apply writes nothing at all and moves no ref.
	before, refs := dirState(t, dir), allRefs(t, f, all...)
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	assert.False(t, rep.Changed())
	assert.Equal(t, refs, allRefs(t, f, all...), "no-op moves no ref")
	assert.Equal(t, before, dirState(t, dir), "no-op writes no file")

	// 4. Change one cluster value: only that repo gets a PR.
	fl["c03"] = "v2"
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	for repo, a := range actions(rep) {
		want := string(pr.ActionNoop)
		if repo == "cluster-c03" {
			want = string(pr.ActionOpen)
		}
		assert.Equal(t, want, a, repo)
	}
	c03 := byRepo(rep)["cluster-c03"]
	assert.Equal(t, 2, c03.PR)
	assert.Equal(t, []pr.FileChange{{Path: "platform/monitoring.yaml", Op: pr.FileChanged}}, stripHashes(c03.Files))
	assert.Equal(t, map[string]pr.ObjectCounts{"ConfigMap": {Changed: 1}}, c03.Objects)

	// 4b. Another change, then main moves under the open PR: rebuilt in place.
	fl["c04"] = "v2"
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	assert.Equal(t, string(pr.ActionOpen), actions(rep)["cluster-c04"])
	newMain := humanPush(t, dir, "cluster-c04", "main", func(wt string) { writeFile(t, wt, "apps/team.yaml", "kind: ConfigMap\n") })
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	assert.Equal(t, string(pr.ActionUpdate), actions(rep)["cluster-c04"])
	assert.Equal(t, 2, byRepo(rep)["cluster-c04"].PR, "same PR, updated in place")
	snap, err = f.Snapshot(ctx, "acme", "cluster-c04", "main", "fleetbot/sync")
	require.NoError(t, err)
	assert.Equal(t, []string{newMain}, snap.Bot.Parents, "bot commit rebuilt on the moved main")
	assert.Contains(t, snap.Files, "apps/team.yaml")

	// 4c. Revert c04: the PR is closed with a comment and its branch deleted.
	fl["c04"] = "v1"
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	assert.Equal(t, string(pr.ActionClose), actions(rep)["cluster-c04"])
	pulls, err := f.PullRequests("acme", "cluster-c04")
	require.NoError(t, err)
	assert.Equal(t, pr.StateClosed, pulls[1].State)
	comments, err := f.Comments("acme", "cluster-c04", 2)
	require.NoError(t, err)
	require.Len(t, comments, 1)
	assert.Contains(t, comments[0], "already matches")
	refs4, err := f.Refs("acme", "cluster-c04")
	require.NoError(t, err)
	assert.NotContains(t, refs4, "fleetbot/sync")

	// 5. A human commit on the bot branch of c03 is left alone, reported once.
	human := humanPush(t, dir, "cluster-c03", "fleetbot/sync", func(wt string) {
		writeFile(t, wt, "platform/monitoring.yaml", "# tweaked by hand\n")
	})
	fl["c03"] = "v3" // fleetbot would like to update the PR
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	assert.Equal(t, string(pr.ActionBlocked), actions(rep)["cluster-c03"])
	assert.Contains(t, byRepo(rep)["cluster-c03"].Reason, human[:7])
	refs3, err := f.Refs("acme", "cluster-c03")
	require.NoError(t, err)
	assert.Equal(t, human, refs3["fleetbot/sync"], "human commit never overwritten")
	before = dirState(t, dir)
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	assert.Equal(t, string(pr.ActionBlocked), actions(rep)["cluster-c03"])
	assert.Equal(t, before, dirState(t, dir), "blocked is reported once, then nothing is written")
	comments, err = f.Comments("acme", "cluster-c03", 2)
	require.NoError(t, err)
	assert.Len(t, comments, 1, "said once on the PR")

	// 6. A hand-edited scaffold and a human file are left alone; a
	// hand-edited managed file is put back through a PR.
	humanPush(t, dir, "cluster-c05", "main", func(wt string) {
		writeFile(t, wt, "apps/kustomization.yaml", "resources: [podinfo.yaml]\n")
		writeFile(t, wt, "apps/podinfo.yaml", "kind: ConfigMap\n")
	})
	humanPush(t, dir, "cluster-c06", "main", func(wt string) {
		writeFile(t, wt, "platform/monitoring.yaml", "# drift\n")
	})
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	assert.Equal(t, string(pr.ActionNoop), actions(rep)["cluster-c05"], "scaffold only created when missing")
	assert.Equal(t, string(pr.ActionOpen), actions(rep)["cluster-c06"], "managed drift corrected by a PR")
	assert.Equal(t, []pr.FileChange{{Path: "platform/monitoring.yaml", Op: pr.FileChanged}}, stripHashes(byRepo(rep)["cluster-c06"].Files))

	// 7. Remove one cluster: a PR removes its managed content, the repo stays.
	delete(fl, "c10")
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	c10 := byRepo(rep)["cluster-c10"]
	assert.Equal(t, pr.ActionRemove, c10.Action)
	assert.Equal(t, 1, rep.Removals)
	snap, err = f.Snapshot(ctx, "acme", "cluster-c10", "main", "fleetbot/sync")
	require.NoError(t, err)
	require.NotNil(t, snap.PR)
	assert.Equal(t, "fleetbot: remove cluster c10", snap.PR.Title)
	removed := map[string]string{}
	for _, fc := range c10.Files {
		removed[fc.Path] = fc.Op
	}
	assert.Equal(t, map[string]string{
		"README.md": pr.FileChanged, ".github/CODEOWNERS": pr.FileChanged,
		"flux/fleetbot.yaml": pr.FileRemoved, "platform/kustomization.yaml": pr.FileRemoved, "platform/monitoring.yaml": pr.FileRemoved,
	}, removed, "scaffolds and human files stay")
	// Re-running does not count the pending removal again.
	rep, err = apply(t, f, fl, Options{})
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Removals)

	// 8. Mass removal is refused and nothing is written.
	delete(fl, "c08")
	delete(fl, "c09")
	before, refs = dirState(t, dir), allRefs(t, f, all...)
	rep, err = apply(t, f, fl, Options{})
	require.ErrorIs(t, err, ErrTooManyRemovals)
	require.NotNil(t, rep)
	assert.Equal(t, 2, rep.Removals)
	assert.Equal(t, 1, rep.MaxRemovals)
	assert.Contains(t, err.Error(), "--allow-removals")
	assert.Equal(t, before, dirState(t, dir), "refused run writes nothing")
	assert.Equal(t, refs, allRefs(t, f, all...))

	// ... unless explicitly allowed.
	rep, err = apply(t, f, fl, Options{AllowRemovals: true})
	require.NoError(t, err)
	assert.Equal(t, string(pr.ActionRemove), actions(rep)["cluster-c08"])
	assert.Equal(t, string(pr.ActionRemove), actions(rep)["cluster-c09"])

	// Reports render.
	var sb strings.Builder
	require.NoError(t, rep.WriteText(&sb))
	assert.Contains(t, sb.String(), "acme/cluster-c08")
	sb.Reset()
	require.NoError(t, rep.WriteMarkdown(&sb))
	assert.Contains(t, sb.String(), "| `acme/cluster-c08` | cluster | remove |")
	js, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.Contains(t, string(js), `"action":"remove"`)
}

func gitUpdateRef(t *testing.T, dir, repo, ref, to string) {
	t.Helper()
	cmd := execGit(dir, repo, "update-ref", ref, to)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))
}

func mainRefs(t *testing.T, f *local.Forge, repos []string) map[string]string {
	out := map[string]string{}
	for _, r := range repos {
		refs, err := f.Refs("acme", r)
		require.NoError(t, err)
		out[r] = refs["main"]
	}
	return out
}

func stripHashes(fs []pr.FileChange) []pr.FileChange {
	out := make([]pr.FileChange, len(fs))
	for i, f := range fs {
		out[i] = pr.FileChange{Path: f.Path, Op: f.Op}
	}
	return out
}

var _ = gittree.EmptyTree

// TestMergedByHandThenMainMoved: a PR merged by hand with plain git, then
// a human commit on main (flux bootstrap's, say), then a change. The next
// apply records #1 merged before it opens #2: the local forge refuses a
// second open PR from the same branch, and the new PR must not be the one
// recorded merged. Found by the end-to-end test (make e2e).
func TestMergedByHandThenMainMoved(t *testing.T) {
	t.Parallel()
	requireGit(t)
	dir := t.TempDir()
	f := openForge(t, dir)
	fl := tenClusters()
	_, err := apply(t, f, fl, Options{})
	require.NoError(t, err)

	gitUpdateRef(t, dir, "cluster-c01", "refs/heads/main", "refs/heads/fleetbot/sync")
	humanPush(t, dir, "cluster-c01", "main", func(wt string) { writeFile(t, wt, "flux/flux-system/gotk-sync.yaml", "kind: GitRepository\n") })
	fl["c01"] = "v2"
	rep, err := apply(t, f, fl, Options{})
	require.NoError(t, err)
	c01 := byRepo(rep)["cluster-c01"]
	assert.Equal(t, pr.ActionOpen, c01.Action)
	assert.Equal(t, 2, c01.PR)
	pulls, err := f.PullRequests("acme", "cluster-c01")
	require.NoError(t, err)
	require.Len(t, pulls, 2)
	assert.Equal(t, pr.StateMerged, pulls[0].State, "#1 was merged by hand")
	assert.Equal(t, pr.StateOpen, pulls[1].State, "#2 carries the change")
}
