package githubtest_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// GitHub's points limit: a write costs 5 points, a read 1, per endpoint group and minute; the
// answer is a secondary limit, here a 429 with Retry-After, and the window passes.
func TestPointsLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t, githubtest.WithManualClock(), githubtest.WithPointsLimit(12, true),
		githubtest.WithSecondaryLimitStatus(http.StatusTooManyRequests))
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "r", map[string]string{"a": "a\n"})
	c := srv.ClientWithToken(srv.InstallationToken("acme"))
	comment := func() (*github.Response, error) {
		_, resp, err := c.Repositories.Edit(ctx, "acme", "r", &github.Repository{Description: github.String("x")})
		return resp, err
	}
	_, err := comment() // 5 points
	require.NoError(t, err)
	_, err = comment() // 10
	require.NoError(t, err)
	_, _, err = c.Repositories.Get(ctx, "acme", "r") // 11
	require.NoError(t, err)
	resp, err := comment() // 16 > 12
	require.Error(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Contains(t, err.Error(), "secondary rate limit")
	assert.NotEmpty(t, resp.Header.Get("Retry-After"))
	_, _, err = c.Repositories.Get(ctx, "acme", "r") // a read still fits: 12
	require.NoError(t, err)

	srv.AdvanceClock(time.Minute)
	c = srv.ClientWithToken(srv.InstallationToken("acme")) // go-github v62 holds c until reset
	_, err = comment()
	assert.NoError(t, err, "the window passed")
}

// GitHub's guidance, enforced: one mutation at a time per principal, a second apart.
func TestMutationPacing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t, githubtest.WithManualClock(), githubtest.WithMutationPacing(time.Second))
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "r", map[string]string{"a": "a\n"})
	c := srv.ClientWithToken(srv.InstallationToken("acme"))
	edit := func() (*github.Response, error) {
		_, resp, err := c.Repositories.Edit(ctx, "acme", "r", &github.Repository{Description: github.String("x")})
		return resp, err
	}
	_, err := edit()
	require.NoError(t, err)
	resp, err := edit()
	require.Error(t, err, "less than a second later")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Retry-After"))
	// go-github v62 then refuses every request of c until x-ratelimit-reset: a new client.
	c = srv.ClientWithToken(srv.InstallationToken("acme"))
	_, _, err = c.Repositories.Get(ctx, "acme", "r")
	assert.NoError(t, err, "reads are not paced")
	srv.AdvanceClock(time.Second)
	_, err = edit()
	assert.NoError(t, err)
}
