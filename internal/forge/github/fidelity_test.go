package github_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// instantClock's Sleep returns at once and counts the waits.
type instantClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps int
}

func (c *instantClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *instantClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.sleeps++
	return ctx.Err()
}

// routeCount counts the fake's requests on one route.
func routeCount(srv *githubtest.Server, route string) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Route == route {
			n++
		}
	}
	return n
}

// TestBotLoginFromApp: as a GitHub App, fleetbot learns its login ("<slug>[bot]") from GET /app
// with the App's JWT, never from GET /user, which GitHub answers an installation token with 403.
func TestBotLoginFromApp(t *testing.T) {
	e := newEnv(t)
	f := e.forge(t, false)
	o, err := f.Org(context.Background(), "acme")
	require.NoError(t, err)
	assert.Equal(t, []string{"fleetbot[bot]"}, o.Self)
	assert.Zero(t, routeCount(e.srv, "GET /user"), "no GET /user with an installation token")
	assert.Equal(t, 1, routeCount(e.srv, "GET /app"))
}

// TestNotAccessibleByIntegrationNotRetried: a 403 "Resource not accessible by integration" on a
// fresh installation token is an answer, not a token still replicating: one request, no wait.
func TestNotAccessibleByIntegrationNotRetried(t *testing.T) {
	e := newEnv(t)
	clock := &instantClock{now: time.Now()}
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: e.srv.APIURL(), AppID: e.srv.AppID(), PrivateKey: e.srv.AppPrivateKeyPEM(), Owner: "acme",
		Budget: ghforge.BudgetConfig{Clock: clock},
	})
	require.NoError(t, err)
	_, _, err = c.API().Users.Get(context.Background(), "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Resource not accessible by integration")
	assert.Equal(t, 1, routeCount(e.srv, "GET /user"), "sent once")
	assert.Zero(t, clock.sleeps, "no wait")
}

// TestActionsTokenUserLookupOnce: with a token fleetbot cannot tell from a personal one (an
// Actions GITHUB_TOKEN is an installation token), GET /user is asked once; its 403 leaves the
// login unknown without retries.
func TestActionsTokenUserLookupOnce(t *testing.T) {
	e := newEnv(t)
	c, err := ghforge.New(context.Background(), ghforge.Config{APIURL: e.srv.APIURL(), Token: e.srv.InstallationToken("acme"), Owner: "acme"})
	require.NoError(t, err)
	f := ghforge.NewForge(c, ghforge.ForgeOptions{})
	for range 2 {
		o, err := f.Org(context.Background(), "acme")
		require.NoError(t, err)
		assert.Empty(t, o.Self)
	}
	assert.Equal(t, 1, routeCount(e.srv, "GET /user"))
}
