package local

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func gitCmd(t *testing.T, dir string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestGitHandlerServesFetchesOnly(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	f := open(t, root)
	c := seed(t, f, map[string]string{"README.md": "hello\n"})
	h, err := GitHandler(root, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	work := t.TempDir()
	out, err := gitCmd(t, work, "clone", "-q", srv.URL+"/acme/r.git", "r")
	require.NoError(t, err, out)
	data, err := os.ReadFile(filepath.Join(work, "r", "README.md"))
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(data))
	head, err := gitCmd(t, filepath.Join(work, "r"), "rev-parse", "HEAD")
	require.NoError(t, err)
	assert.Equal(t, c.SHA, strings.TrimSpace(head), "the clone has the forge's main")

	// The URL fleetbot renders into Flux objects has no .git, as on GitHub.
	out, err = gitCmd(t, work, "clone", "-q", srv.URL+"/acme/r", "r2")
	require.NoError(t, err, out)

	// A push is refused and nothing changes on the forge.
	repo := filepath.Join(work, "r")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "x"), []byte("x\n"), 0o644))
	_, err = gitCmd(t, repo, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qam", "x", "--allow-empty")
	require.NoError(t, err)
	out, err = gitCmd(t, repo, "push", "-q", "origin", "HEAD:main")
	require.Error(t, err, "push must be refused")
	assert.Contains(t, out, "403")
	main, err := gitCmd(t, root, "--git-dir", filepath.Join(root, "acme", "r.git"), "rev-parse", "main")
	require.NoError(t, err)
	assert.Equal(t, c.SHA, strings.TrimSpace(main), "main unchanged after the refused push")
}

func TestGitHandlerRefusesOtherPaths(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	f := open(t, root)
	seed(t, f, map[string]string{"README.md": "hello\n"})
	h, err := GitHandler(root, nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/acme/r.git/info/refs?service=git-upload-pack", http.StatusOK},
		{"GET", "/acme/r.git/info/refs?service=git-receive-pack", http.StatusForbidden},
		{"POST", "/acme/r.git/git-receive-pack", http.StatusForbidden},
		{"GET", "/acme/r.git/info/refs", http.StatusForbidden}, // dumb protocol
		{"GET", "/acme/r.git/HEAD", http.StatusForbidden},      // dumb protocol
		{"GET", "/acme/r.git/config", http.StatusForbidden},    // a file of the repo
		{"GET", "/acme/missing.git/info/refs?service=git-upload-pack", http.StatusNotFound},
		{"GET", "/../acme/r.git/info/refs?service=git-upload-pack", http.StatusNotFound},
		{"GET", "/acme/..%2F..%2Fetc.git/info/refs?service=git-upload-pack", http.StatusNotFound},
		{"GET", "/acme/r/info/refs?service=git-upload-pack", http.StatusOK}, // GitHub-style, no .git
		{"GET", "/acme/r/info/refs", http.StatusForbidden},
		{"GET", "/acme/r.git.git/info/refs?service=git-upload-pack", http.StatusNotFound},
		{"GET", "/acme.git/info/refs?service=git-upload-pack", http.StatusNotFound},
	} {
		req := httptest.NewRequest(tc.method, "http://x"+tc.path, nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, tc.want, rec.Code, "%s %s: %s", tc.method, tc.path, rec.Body.String())
	}
}

func TestGitHandlerNeedsAForge(t *testing.T) {
	t.Parallel()
	_, err := GitHandler(filepath.Join(t.TempDir(), "none"), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not a directory")
}
