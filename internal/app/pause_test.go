package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// controlClone is a git work tree whose one commit holds the example control repo under
// sub ("" for the root), with its own committer: the control repo pause and resume commit in.
func controlClone(t *testing.T, sub string) (root, dir string, repo *git.Repository) {
	t.Helper()
	root = t.TempDir()
	dir = filepath.Join(root, sub)
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(moduleRoot, "testdata", "control"))))
	repo, err := git.PlainInit(root, false)
	require.NoError(t, err)
	cfg, err := repo.Config()
	require.NoError(t, err)
	cfg.User.Name, cfg.User.Email = "Platform Admin", "admin@example.com"
	require.NoError(t, repo.SetConfig(cfg))
	wt, err := repo.Worktree()
	require.NoError(t, err)
	require.NoError(t, wt.AddGlob("."))
	sig := &object.Signature{Name: "Platform Admin", Email: "admin@example.com", When: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	_, err = wt.Commit("control repo", &git.CommitOptions{Author: sig})
	require.NoError(t, err)
	return root, dir, repo
}

func headMessage(t *testing.T, repo *git.Repository) string {
	t.Helper()
	h, err := repo.Head()
	require.NoError(t, err)
	c, err := repo.CommitObject(h.Hash())
	require.NoError(t, err)
	return c.Message
}

func clean(t *testing.T, repo *git.Repository) {
	t.Helper()
	wt, err := repo.Worktree()
	require.NoError(t, err)
	st, err := wt.Status()
	require.NoError(t, err)
	assert.True(t, st.IsClean(), "the work tree is clean after the commit: %v", st)
}

// TestPauseResumeRecordedInGit: pause writes rollout/paused with the reason and commits that
// one file; the control repo then loads paused with that reason. Pausing again for the same
// reason does nothing; resume removes it in a commit of its own, and resuming again does
// nothing. It works for a control repo in a subdirectory of its clone too.
func TestPauseResumeRecordedInGit(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"", "fleet"} {
		_, dir, repo := controlClone(t, sub)
		res, err := PauseRollout(dir, "canary p99 latency doubled", true)
		require.NoError(t, err, sub)
		assert.True(t, res.Changed)
		assert.NotEmpty(t, res.Commit)
		assert.Equal(t, "master", res.Branch)
		assert.Equal(t, "rollout: pause\n\ncanary p99 latency doubled", strings.TrimSpace(headMessage(t, repo)))
		clean(t, repo)
		b, err := os.ReadFile(filepath.Join(dir, "rollout", "paused"))
		require.NoError(t, err)
		assert.Equal(t, "canary p99 latency doubled\n", string(b))
		loaded, err := control.LoadDir(dir)
		require.NoError(t, err)
		require.NotNil(t, loaded.Paused)
		assert.Equal(t, "canary p99 latency doubled", loaded.Paused.Reason)

		again, err := PauseRollout(dir, "canary p99 latency doubled", true)
		require.NoError(t, err)
		assert.False(t, again.Changed, "already paused for that reason")
		assert.Empty(t, again.Commit)

		res, err = ResumeRollout(dir, true)
		require.NoError(t, err)
		assert.True(t, res.Changed)
		assert.NotEmpty(t, res.Commit)
		assert.Equal(t, "rollout: resume", strings.TrimSpace(headMessage(t, repo)))
		clean(t, repo)
		assert.NoFileExists(t, filepath.Join(dir, "rollout", "paused"))
		assert.NoDirExists(t, filepath.Join(dir, "rollout"))
		loaded, err = control.LoadDir(dir)
		require.NoError(t, err)
		assert.Nil(t, loaded.Paused)

		res, err = ResumeRollout(dir, true)
		require.NoError(t, err)
		assert.False(t, res.Changed, "not paused")
	}
}

// TestPauseWithoutGit: outside a git work tree, or with commit false, the file is written and
// nothing is committed.
func TestPauseWithoutGit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(filepath.Join(moduleRoot, "testdata", "control"))))
	res, err := PauseRollout(dir, "", true)
	require.NoError(t, err)
	assert.True(t, res.Changed)
	assert.Empty(t, res.Commit)
	loaded, err := control.LoadDir(dir)
	require.NoError(t, err)
	require.NotNil(t, loaded.Paused)
	assert.Empty(t, loaded.Paused.Reason)

	_, cdir, repo := controlClone(t, "")
	before, err := repo.Head()
	require.NoError(t, err)
	res, err = PauseRollout(cdir, "x", false)
	require.NoError(t, err)
	assert.True(t, res.Changed)
	assert.Empty(t, res.Commit)
	after, err := repo.Head()
	require.NoError(t, err)
	assert.Equal(t, before.Hash(), after.Hash(), "--no-commit commits nothing")
	res, err = ResumeRollout(cdir, false)
	require.NoError(t, err)
	assert.True(t, res.Changed)
	assert.NoFileExists(t, filepath.Join(cdir, "rollout", "paused"))
}

// TestPauseRefusals: a bad reason, a directory that is not a control repo, other staged
// changes (the commit would take them along) and a rollout path that is not a directory are
// errors saying what to do, and nothing is written or committed.
func TestPauseRefusals(t *testing.T) {
	t.Parallel()
	_, dir, repo := controlClone(t, "")
	head := func() string {
		h, err := repo.Head()
		require.NoError(t, err)
		return h.Hash().String()
	}
	start := head()
	pauseFile := filepath.Join(dir, "rollout", "paused")

	_, err := PauseRollout(dir, strings.Repeat("x", control.MaxPauseBytes), true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "more than the 4096 rollout/paused may have")
	_, err = PauseRollout(dir, "bad\x00byte", true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not UTF-8 text")
	_, err = PauseRollout(filepath.Join(dir, "clusters"), "x", true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a control repo (no platform.yaml)")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "clusters", "new.yaml"), []byte("x: 1\n"), 0o644))
	wt, err := repo.Worktree()
	require.NoError(t, err)
	_, err = wt.Add("clusters/new.yaml")
	require.NoError(t, err)
	_, err = PauseRollout(dir, "x", true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has staged changes (clusters/new.yaml, ...): commit or unstage them first")
	assert.NoFileExists(t, pauseFile)
	_, err = wt.Remove("clusters/new.yaml")
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "rollout"), []byte("notes\n"), 0o644))
	_, err = PauseRollout(dir, "x", true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "rollout is not a directory")
	assert.Equal(t, start, head(), "nothing committed")
}
