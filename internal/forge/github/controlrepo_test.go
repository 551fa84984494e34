package github_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// TestFetchControl clones a control repo from the fake GitHub over smart HTTP, shallow and
// into memory, and loads it.
func TestFetchControl(t *testing.T) {
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "control", map[string]string{"README.md": "old\n"})
	files := map[string]string{
		"platform.yaml":   "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n",
		"clusters/a.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: a}\nspec:\n  admins: [a-admins]\n",
	}
	sha := srv.Commit("acme", "control", "main", "control", files)
	fsys, got, err := ghforge.FetchControl(context.Background(), srv.URL, githubtest.DefaultToken, "acme", "control", "main")
	require.NoError(t, err)
	assert.Equal(t, sha, got)
	repo, err := control.Load(fsys)
	require.NoError(t, err)
	assert.Equal(t, "acme", repo.Platform.Spec.Owner)
	require.Len(t, repo.Clusters, 1)

	_, _, err = ghforge.FetchControl(context.Background(), srv.URL, "wrong", "acme", "control", "main")
	require.ErrorIs(t, err, ghforge.ErrControlUnreadable)
	assert.NotContains(t, err.Error(), "wrong")
	_, _, err = ghforge.FetchControl(context.Background(), srv.URL, githubtest.DefaultToken, "acme", "missing", "")
	require.ErrorIs(t, err, ghforge.ErrControlUnreadable)
}
