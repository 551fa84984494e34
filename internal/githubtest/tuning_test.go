package githubtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

func TestSetContentCreationLimitAtRunTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a": "a\n"})
	c := srv.Client()
	blob := func() int {
		_, resp, _ := c.Git.CreateBlob(ctx, "acme", "r", &github.Blob{Content: github.String("x"), Encoding: github.String("utf-8")})
		require.NotNil(t, resp)
		return resp.StatusCode
	}
	for range 3 {
		require.Equal(t, http.StatusCreated, blob(), "no limit yet")
	}
	srv.SetContentCreationLimit(2, 0, false)
	assert.Equal(t, http.StatusCreated, blob(), "content created with no limit on does not count")
	assert.Equal(t, http.StatusCreated, blob())
	assert.Equal(t, http.StatusForbidden, blob(), "the 3rd in the minute is refused")
	srv.SetContentCreationLimit(0, 0, false)
	c = srv.Client() // go-github remembers a secondary limit; a new client does not
	assert.Equal(t, http.StatusCreated, blob(), "limit off again")
}

func TestDisablePersistence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, err := githubtest.New(dir)
	require.NoError(t, err)
	srv.DisablePersistence()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer srv.Close()
	srv.URL = hs.URL
	srv.CreateTeam("acme", "platform")
	_, _, err = srv.Client().Repositories.Create(context.Background(), "acme", &github.Repository{Name: github.String("r")})
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "state.json"))
	assert.True(t, os.IsNotExist(err), "no state.json written: %v", err)
}
