package githubtest_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
		"GIT_AUTHOR_NAME=Human", "GIT_AUTHOR_EMAIL=human@example.com",
		"GIT_COMMITTER_NAME=Human", "GIT_COMMITTER_EMAIL=human@example.com")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

func errStatus(t *testing.T, err error) int {
	t.Helper()
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er)
	return er.Response.StatusCode
}

func TestGitDataCommitThenClone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "cluster-a", map[string]string{"README.md": "hello\n", "old/x.yaml": "x: 1\n"})
	c := srv.ClientWithToken(srv.InstallationToken("acme"))
	srv.ResetLog()

	base, _, err := c.Git.GetRef(ctx, "acme", "cluster-a", "heads/main")
	require.NoError(t, err)
	parent, _, err := c.Git.GetCommit(ctx, "acme", "cluster-a", base.GetObject().GetSHA())
	require.NoError(t, err)

	tree, _, err := c.Git.CreateTree(ctx, "acme", "cluster-a", parent.GetTree().GetSHA(), []*github.TreeEntry{
		{Path: github.String("platform/a/b.yaml"), Mode: github.String("100644"), Type: github.String("blob"), Content: github.String("b: 2\n")},
		{Path: github.String("old/x.yaml"), Mode: github.String("100644"), Type: github.String("blob")}, // sha: null deletes
	})
	require.NoError(t, err)
	commit, _, err := c.Git.CreateCommit(ctx, "acme", "cluster-a", &github.Commit{
		Message: github.String("fleetbot: sync"), Tree: tree, Parents: []*github.Commit{{SHA: parent.SHA}},
	}, nil)
	require.NoError(t, err)
	assert.True(t, commit.GetVerification().GetVerified(), "a commit without author is verified")
	assert.Equal(t, "fleetbot[bot]", commit.GetAuthor().GetName(), "an App's API commit is authored by its bot")
	assert.Equal(t, "GitHub", commit.GetCommitter().GetName(), "and committed by web-flow, as on GitHub")

	_, _, err = c.Git.CreateRef(ctx, "acme", "cluster-a", &github.Reference{
		Ref: github.String("refs/heads/fleetbot/sync"), Object: &github.GitObject{SHA: commit.SHA}})
	require.NoError(t, err)

	counts := srv.Counts()
	assert.Equal(t, githubtest.Counts{Reads: 2, Writes: 3, ContentCreating: 3}, counts)

	dir := t.TempDir()
	git(t, dir, "clone", "-q", "--branch", "fleetbot/sync", srv.GitURL("acme", "cluster-a"), "repo")
	data, err := os.ReadFile(filepath.Join(dir, "repo", "platform/a/b.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "b: 2\n", string(data))
	assert.NoFileExists(t, filepath.Join(dir, "repo", "old/x.yaml"))
	assert.FileExists(t, filepath.Join(dir, "repo", "README.md"))
	assert.Equal(t, commit.GetSHA(), git(t, filepath.Join(dir, "repo"), "rev-parse", "HEAD"))
	assert.Equal(t, tree.GetSHA(), git(t, filepath.Join(dir, "repo"), "rev-parse", "HEAD^{tree}"), "tree SHAs are real git SHAs")
}

func TestPushThenRESTRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "workspace-pay", map[string]string{"README.md": "hi\n"})
	dir := t.TempDir()
	git(t, dir, "clone", "-q", srv.GitURL("acme", "workspace-pay"), "w")
	w := filepath.Join(dir, "w")
	require.NoError(t, os.WriteFile(filepath.Join(w, "apps.yaml"), []byte("apps: []\n"), 0o644))
	git(t, w, "add", ".")
	git(t, w, "commit", "-qm", "human change")
	git(t, w, "push", "-q", "origin", "HEAD:main", "HEAD:feature")
	head := git(t, w, "rev-parse", "HEAD")

	c := srv.Client()
	fc, _, _, err := c.Repositories.GetContents(ctx, "acme", "workspace-pay", "apps.yaml", &github.RepositoryContentGetOptions{Ref: "main"})
	require.NoError(t, err)
	content, err := fc.GetContent()
	require.NoError(t, err)
	assert.Equal(t, "apps: []\n", content)

	b, _, err := c.Repositories.GetBranch(ctx, "acme", "workspace-pay", "feature", 0)
	require.NoError(t, err)
	assert.Equal(t, head, b.GetCommit().GetSHA())
	assert.Nil(t, b.GetCommit().Author, "an unknown email is not linked to a user")

	cmp, _, err := c.Repositories.CompareCommits(ctx, "acme", "workspace-pay", "main", "feature", nil)
	require.NoError(t, err)
	assert.Equal(t, "identical", cmp.GetStatus())
	assert.Empty(t, srv.Pulls("acme", "workspace-pay"))

	refs, _, err := c.Git.ListMatchingRefs(ctx, "acme", "workspace-pay", &github.ReferenceListOptions{Ref: "heads/"})
	require.NoError(t, err)
	require.Len(t, refs, 2)
	assert.Equal(t, "refs/heads/feature", refs[0].GetRef())
}

func TestEmptyRepo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	c := srv.Client()
	repo, _, err := c.Repositories.Create(ctx, "acme", &github.Repository{Name: github.String("cluster-b"), Private: github.Bool(true)})
	require.NoError(t, err)
	assert.Equal(t, "private", repo.GetVisibility())
	assert.Equal(t, 0, repo.GetSize())

	_, _, err = c.Git.GetRef(ctx, "acme", "cluster-b", "heads/main")
	assert.Equal(t, http.StatusConflict, errStatus(t, err))
	_, _, err = c.Git.CreateBlob(ctx, "acme", "cluster-b", &github.Blob{Content: github.String("x")})
	assert.Equal(t, http.StatusConflict, errStatus(t, err))
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er)
	assert.Equal(t, "Git Repository is empty.", er.Message)

	_, _, err = c.Repositories.CreateFile(ctx, "acme", "cluster-b", "README.md", &github.RepositoryContentFileOptions{
		Message: github.String("bootstrap"), Content: []byte("# cluster-b\n")})
	require.NoError(t, err)
	got, ok := srv.File("acme", "cluster-b", "main", "README.md")
	require.True(t, ok)
	assert.Equal(t, "# cluster-b\n", got)

	_, _, err = c.Repositories.Create(ctx, "acme", &github.Repository{Name: github.String("cluster-b")})
	assert.Equal(t, http.StatusUnprocessableEntity, errStatus(t, err))
}

func TestRefUpdateFastForwardAndTrees(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a.txt": "a\n"})
	first := srv.Branch("acme", "r", "main")
	second := srv.Commit("acme", "r", "main", "two", map[string]string{"b.txt": "b\n"})
	c := srv.Client()

	_, _, err := c.Git.CreateRef(ctx, "acme", "r", &github.Reference{Ref: github.String("refs/heads/x"), Object: &github.GitObject{SHA: &second}})
	require.NoError(t, err)
	_, _, err = c.Git.CreateRef(ctx, "acme", "r", &github.Reference{Ref: github.String("refs/heads/x"), Object: &github.GitObject{SHA: &second}})
	assert.Equal(t, http.StatusUnprocessableEntity, errStatus(t, err), "ref exists")

	back := &github.Reference{Ref: github.String("refs/heads/x"), Object: &github.GitObject{SHA: &first}}
	_, _, err = c.Git.UpdateRef(ctx, "acme", "r", back, false)
	require.Equal(t, http.StatusUnprocessableEntity, errStatus(t, err))
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er)
	assert.Equal(t, "Update is not a fast forward", er.Message)
	_, _, err = c.Git.UpdateRef(ctx, "acme", "r", back, true)
	require.NoError(t, err)
	assert.Equal(t, first, srv.Branch("acme", "r", "x"))

	// trees by branch name, recursive, with ETag
	tree, resp, err := c.Git.GetTree(ctx, "acme", "r", "main", true)
	require.NoError(t, err)
	require.Len(t, tree.Entries, 2)
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)

	_, err = c.Git.DeleteRef(ctx, "acme", "r", "heads/x")
	require.NoError(t, err)
	_, err = c.Git.DeleteRef(ctx, "acme", "r", "heads/x")
	assert.Equal(t, http.StatusUnprocessableEntity, errStatus(t, err))
	_, _, err = c.Git.GetRef(ctx, "acme", "r", "heads/x")
	assert.Equal(t, http.StatusNotFound, errStatus(t, err))

	blob, _, err := c.Git.CreateBlob(ctx, "acme", "r", &github.Blob{Content: github.String("hello"), Encoding: github.String("utf-8")})
	require.NoError(t, err)
	got, _, err := c.Git.GetBlob(ctx, "acme", "r", blob.GetSHA())
	require.NoError(t, err)
	assert.Equal(t, "aGVsbG8=", got.GetContent())
	assert.Equal(t, "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0", blob.GetSHA(), "git hash-object of 'hello'")
}
