package workcopy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// workTree makes a git work tree with a committer configured and one commit of platform.yaml
// inside sub (the control repo's directory in its clone).
func workTree(t *testing.T, sub string) (root, dir string, repo *git.Repository) {
	t.Helper()
	root = t.TempDir()
	repo, err := git.PlainInit(root, false)
	require.NoError(t, err)
	cfg, err := repo.Config()
	require.NoError(t, err)
	cfg.User.Name, cfg.User.Email = "Ada", "ada@example.com"
	require.NoError(t, repo.SetConfig(cfg))
	dir = filepath.Join(root, sub)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "platform.yaml"), []byte("kind: Platform\n"), 0o644))
	wt, err := repo.Worktree()
	require.NoError(t, err)
	_, err = wt.Add(filepath.ToSlash(filepath.Join(sub, "platform.yaml")))
	require.NoError(t, err)
	_, err = wt.Commit("initial", &git.CommitOptions{})
	require.NoError(t, err)
	return root, dir, repo
}

func changedFiles(t *testing.T, repo *git.Repository, sha string) []string {
	t.Helper()
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	require.NoError(t, err)
	parent, err := c.Parent(0)
	require.NoError(t, err)
	changes, err := object.DiffTree(mustTree(t, parent), mustTree(t, c))
	require.NoError(t, err)
	var out []string
	for _, ch := range changes {
		name := ch.To.Name
		if name == "" {
			name = ch.From.Name
		}
		out = append(out, name)
	}
	return out
}

func mustTree(t *testing.T, c *object.Commit) *object.Tree {
	t.Helper()
	tr, err := c.Tree()
	require.NoError(t, err)
	return tr
}

// TestFileCommitCommitsTheFileAlone: the record is committed on its own, at its place in the
// clone, on the current branch; an edited file beside it is not taken along.
func TestFileCommitCommitsTheFileAlone(t *testing.T) {
	t.Parallel()
	_, dir, repo := workTree(t, "control")
	c, err := PrepareFileCommit(dir, "rollout/paused", true)
	require.NoError(t, err)
	require.True(t, c.Commits())
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "rollout"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rollout", "paused"), []byte("freeze\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "platform.yaml"), []byte("edited, not staged\n"), 0o644))

	sha, branch, err := c.Commit("rollout: pause", false)
	require.NoError(t, err)
	assert.Equal(t, "master", branch)
	assert.Equal(t, []string{"control/rollout/paused"}, changedFiles(t, repo, sha))

	// Its removal is one commit too, and leaves no file behind.
	c, err = PrepareFileCommit(dir, "rollout/paused", true)
	require.NoError(t, err)
	sha, _, err = c.Commit("rollout: resume", true)
	require.NoError(t, err)
	assert.Equal(t, []string{"control/rollout/paused"}, changedFiles(t, repo, sha))
	assert.NoFileExists(t, filepath.Join(dir, "rollout", "paused"))
}

// TestFileCommitRefusesOtherStagedChanges: a commit would take a staged change along, so
// nothing is prepared and the error says which file and what to do.
func TestFileCommitRefusesOtherStagedChanges(t *testing.T) {
	t.Parallel()
	root, dir, repo := workTree(t, "")
	require.NoError(t, os.WriteFile(filepath.Join(root, "other.yaml"), []byte("x: 1\n"), 0o644))
	wt, err := repo.Worktree()
	require.NoError(t, err)
	_, err = wt.Add("other.yaml")
	require.NoError(t, err)

	_, err = PrepareFileCommit(dir, "rollout/paused", true)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has staged changes (other.yaml, ...)")
	assert.Contains(t, err.Error(), "--no-commit")
	assert.Contains(t, err.Error(), "nothing was written")
}

// TestFileCommitOutsideAWorkTreeCommitsNothing: a directory outside any clone, or a commit not
// asked for, writes the file alone.
func TestFileCommitOutsideAWorkTreeCommitsNothing(t *testing.T) {
	t.Parallel()
	for name, prepare := range map[string]func() (*FileCommit, error){
		"no work tree": func() (*FileCommit, error) { return PrepareFileCommit(t.TempDir(), "rollout/paused", true) },
		"no commit wanted": func() (*FileCommit, error) {
			_, dir, _ := workTree(t, "")
			return PrepareFileCommit(dir, "rollout/paused", false)
		},
	} {
		c, err := prepare()
		require.NoError(t, err, name)
		assert.False(t, c.Commits(), name)
		sha, branch, err := c.Commit("rollout: pause", false)
		require.NoError(t, err, name)
		assert.Empty(t, sha+branch, name)
	}
}
