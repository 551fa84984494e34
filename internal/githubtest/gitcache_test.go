package githubtest_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// restCommit writes one file on branch through the Git Data API (blob, tree, commit, ref
// update) and returns the new commit's SHA.
func restCommit(t *testing.T, c *github.Client, owner, repo, branch, path, content string) string {
	t.Helper()
	ctx := context.Background()
	ref, _, err := c.Git.GetRef(ctx, owner, repo, "refs/heads/"+branch)
	require.NoError(t, err)
	parent, _, err := c.Git.GetCommit(ctx, owner, repo, ref.GetObject().GetSHA())
	require.NoError(t, err)
	blob, _, err := c.Git.CreateBlob(ctx, owner, repo, &github.Blob{Content: github.String(content), Encoding: github.String("utf-8")})
	require.NoError(t, err)
	tree, _, err := c.Git.CreateTree(ctx, owner, repo, parent.GetTree().GetSHA(), []*github.TreeEntry{
		{Path: github.String(path), Mode: github.String("100644"), Type: github.String("blob"), SHA: blob.SHA}})
	require.NoError(t, err)
	commit, _, err := c.Git.CreateCommit(ctx, owner, repo, &github.Commit{Message: github.String("rest " + path), Tree: tree,
		Parents: []*github.Commit{{SHA: parent.SHA}}}, nil)
	require.NoError(t, err)
	_, _, err = c.Git.UpdateRef(ctx, owner, repo, &github.Reference{Ref: github.String("refs/heads/" + branch),
		Object: &github.GitObject{SHA: commit.SHA}}, false)
	require.NoError(t, err)
	return commit.GetSHA()
}

// TestRESTAndPushesInterleaved alternates REST writes and git pushes on one repository: the
// REST side keeps the repository open between requests and must see every push, and git must
// see every REST write, objects and references, right after it.
func TestRESTAndPushesInterleaved(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"README.md": "hi\n"})
	c := srv.Client()

	first := restCommit(t, c, "acme", "r", "main", "a.txt", "a\n")
	dir := t.TempDir()
	git(t, dir, "clone", "-q", srv.GitURL("acme", "r"), "w")
	w := filepath.Join(dir, "w")
	assert.Equal(t, first, git(t, w, "rev-parse", "HEAD"), "a clone right after a REST commit has it")

	require.NoError(t, os.WriteFile(filepath.Join(w, "b.txt"), []byte("b\n"), 0o644))
	git(t, w, "add", ".")
	git(t, w, "commit", "-qm", "pushed b")
	git(t, w, "push", "-q", "origin", "HEAD:main", "HEAD:side")
	pushed := git(t, w, "rev-parse", "HEAD")
	ref, _, err := c.Git.GetRef(ctx, "acme", "r", "refs/heads/main")
	require.NoError(t, err)
	assert.Equal(t, pushed, ref.GetObject().GetSHA(), "REST sees the pushed branch")
	b, _, err := c.Repositories.GetBranch(ctx, "acme", "r", "side", 0)
	require.NoError(t, err, "REST sees a branch created by a push")
	assert.Equal(t, pushed, b.GetCommit().GetSHA())

	second := restCommit(t, c, "acme", "r", "main", "c.txt", "c\n")
	git(t, w, "pull", "-q", "--ff-only", "origin", "main")
	assert.Equal(t, second, git(t, w, "rev-parse", "HEAD"), "a fetch after push and REST commit has the REST commit")
	for _, f := range []string{"a.txt", "b.txt", "c.txt"} {
		assert.FileExists(t, filepath.Join(w, f))
	}
	git(t, w, "fsck", "--strict", "--no-dangling")

	_, err = c.Git.DeleteRef(ctx, "acme", "r", "refs/heads/side")
	require.NoError(t, err)
	assert.Empty(t, git(t, w, "ls-remote", "--heads", "origin", "side"), "git sees the branch deleted through REST")
}

// TestStateDirRestart writes through REST on a server with a state directory, starts a new
// server on the same directory and reads everything back, through REST and a clone.
func TestStateDirRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	start := func() (*githubtest.Server, func()) {
		srv, err := githubtest.New(dir)
		require.NoError(t, err)
		hs := httptest.NewServer(srv)
		srv.URL = hs.URL
		return srv, func() { hs.Close(); srv.Close() }
	}
	srv, stop := start()
	_, _, err := srv.Client().Repositories.Create(ctx, "", &github.Repository{Name: github.String("r"), AutoInit: github.Bool(true)})
	require.NoError(t, err)
	owner := githubtest.DefaultUser
	sha := restCommit(t, srv.Client(), owner, "r", "main", "x.txt", "x\n")
	blob, _, err := srv.Client().Git.CreateBlob(ctx, owner, "r", &github.Blob{Content: github.String("loose\n"), Encoding: github.String("utf-8")})
	require.NoError(t, err)
	stop()

	srv, stop = start()
	defer stop()
	c := srv.Client()
	ref, _, err := c.Git.GetRef(ctx, owner, "r", "refs/heads/main")
	require.NoError(t, err)
	assert.Equal(t, sha, ref.GetObject().GetSHA())
	got, _, err := c.Git.GetBlob(ctx, owner, "r", blob.GetSHA())
	require.NoError(t, err, "a blob no commit refers to survives the restart")
	assert.Equal(t, "bG9vc2UK", got.GetContent())
	clone := t.TempDir()
	git(t, clone, "clone", "-q", srv.GitURL(owner, "r"), "w")
	data, err := os.ReadFile(filepath.Join(clone, "w", "x.txt"))
	require.NoError(t, err)
	assert.Equal(t, "x\n", string(data))
	git(t, filepath.Join(clone, "w"), "fsck", "--strict", "--no-dangling")
}
