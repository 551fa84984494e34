package githubtest_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// An installation token does what the App was granted and nothing else: GitHub's 403
// "Resource not accessible by integration". A user's token is not limited by the App.
func TestInstallationTokenLimitedToAppPermissions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t, githubtest.WithAppPermissions(map[string]string{"metadata": "read", "contents": "read"}))
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "r", map[string]string{"a": "a\n"})
	c := srv.ClientWithToken(srv.InstallationToken("acme"))

	_, _, err := c.Repositories.Get(ctx, "acme", "r")
	require.NoError(t, err, "metadata: read")
	_, _, err = c.Git.GetRef(ctx, "acme", "r", "heads/main")
	require.NoError(t, err, "contents: read")

	_, resp, err := c.PullRequests.List(ctx, "acme", "r", nil)
	require.Error(t, err, "pull_requests is not granted")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Contains(t, err.Error(), "Resource not accessible by integration")

	_, _, err = c.Git.CreateRef(ctx, "acme", "r", &github.Reference{Ref: github.String("refs/heads/x"),
		Object: &github.GitObject{SHA: github.String(srv.Branch("acme", "r", "main"))}})
	require.Error(t, err, "contents: read does not write")
	assert.Contains(t, err.Error(), "Resource not accessible by integration")

	_, _, err = srv.Client().PullRequests.List(ctx, "acme", "r", nil)
	assert.NoError(t, err, "a user's token is not an installation's")
}

// A manifest that cannot grant anything is refused with the file and the fix.
func TestLoadAppPermissionsRefusesBadManifests(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"empty.yml":   "name: x\n",
		"level.yml":   "default_permissions:\n  contents: everything\n",
		"invalid.yml": "default_permissions: [\n",
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
		_, err := githubtest.LoadAppPermissions(path)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), path, name)
	}
	perms, err := githubtest.LoadAppPermissions(filepath.Join("..", "..", "app.yml"))
	require.NoError(t, err)
	assert.Equal(t, "write", perms["contents"])
}
