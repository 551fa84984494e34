package githubtest

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInitBare: the repository initBare writes is a bare repository to git and go-git, with
// HEAD on the default branch, and a second init of the same directory is refused.
func TestInitBare(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "acme", "r.git")
	require.NoError(t, initBare(dir, "trunk"))
	err := initBare(dir, "main")
	require.ErrorIs(t, err, git.ErrRepositoryAlreadyExists)
	assert.Contains(t, err.Error(), dir)

	r, err := git.PlainOpen(dir)
	require.NoError(t, err, "go-git opens it")
	cfg, err := r.Config()
	require.NoError(t, err)
	assert.True(t, cfg.Core.IsBare)
	g, err := openGit(dir, nil)
	require.NoError(t, err)
	assert.True(t, g.empty())

	if _, err := exec.LookPath("git"); err != nil {
		return
	}
	for args, want := range map[string]string{
		"rev-parse --is-bare-repository": "true",
		"symbolic-ref HEAD":              "refs/heads/trunk",
		"count-objects":                  "0 objects, 0 kilobytes",
	} {
		out, err := exec.Command("git", append([]string{"--git-dir", dir}, strings.Fields(args)...)...).CombinedOutput()
		require.NoError(t, err, "git %s: %s", args, out)
		assert.Equal(t, want, strings.TrimSpace(string(out)), "git %s", args)
	}
}
