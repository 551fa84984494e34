package githubtest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// GitHub's ETags vary by token (its responses carry Vary: Accept, Authorization): an ETag
// taken with one installation token gives no 304 to the next one, which replaces it hourly.
func TestETagVariesByToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a.yaml": "a\n"})
	first := srv.ClientWithToken(srv.InstallationToken("acme"))
	second := srv.ClientWithToken(srv.InstallationToken("acme"))
	get := func(c *github.Client, etag string) *github.Response {
		req, err := c.NewRequest("GET", "repos/acme/r/git/matching-refs/heads/", nil)
		require.NoError(t, err)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, _ := c.Do(ctx, req, nil)
		require.NotNil(t, resp)
		return resp
	}
	resp := get(first, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Vary"), "Authorization")
	assert.Contains(t, resp.Header.Get("Vary"), "Accept")
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)

	assert.Equal(t, http.StatusNotModified, get(first, etag).StatusCode, "same token, same ETag: 304")
	other := get(second, etag)
	assert.Equal(t, http.StatusOK, other.StatusCode, "another token's request is not validated by this ETag")
	assert.NotEqual(t, etag, other.Header.Get("ETag"))
}
