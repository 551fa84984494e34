package github_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
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

// changeTarget edits one managed file of the first cluster target, so the next apply updates its
// pull request; it returns the target's repo.
func changeTarget(t *testing.T, e *env) string {
	t.Helper()
	for _, tg := range e.targets {
		if tg.Kind != fanout.KindCluster {
			continue
		}
		for p, c := range tg.Files {
			if strings.HasPrefix(p, "platform/") && strings.HasSuffix(p, ".yaml") {
				tg.Files[p] = append(append([]byte(nil), c...), []byte("# changed\n")...)
				return tg.Repo
			}
		}
	}
	t.Fatal("no cluster target with a platform file")
	return ""
}

// result returns the report's entry for repo.
func result(t *testing.T, rep *reconcile.Report, repo string) reconcile.Result {
	t.Helper()
	for _, r := range rep.Results {
		if strings.HasSuffix(r.Repo, "/"+repo) || r.Repo == repo {
			return r
		}
	}
	t.Fatalf("no result for %s", repo)
	return reconcile.Result{}
}

// TestInterruptedUpdateColdCache: an update interrupted after the bot branch moved (the PR body,
// which records fleetbot's head, not yet rewritten) is finished by the next run with a cold
// snapshot cache (a new Action run, a restarted serve). GitHub says the commit was committed by
// "GitHub" (web-flow), not by fleetbot's bot: fleetbot knows it by its tree trailer, not by who
// committed it, and neither blocks the PR nor comments on it.
func TestInterruptedUpdateColdCache(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []githubtest.Option
	}{{name: "github.com"}, {name: "GHES", opts: []githubtest.Option{githubtest.WithEnterpriseServer()}}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			e.apply(t, e.forge(t, false))
			repo := changeTarget(t, e)
			e.srv.Fault("PATCH /repos/{owner}/{repo}/pulls/{number}", githubtest.FaultSpec{Status: 500, Message: "interrupted here"})
			_, _ = reconcile.Apply(context.Background(), e.forge(t, false), e.repo, e.targets, reconcile.Options{Source: "c0ffee"})
			e.srv.ClearFaults()
			bot := e.srv.Branch("acme", repo, "fleetbot/sync")
			c, _, err := e.srv.Client().Git.GetCommit(context.Background(), "acme", repo, bot)
			require.NoError(t, err)
			require.NotEqual(t, "fleetbot[bot]", c.GetCommitter().GetName(), "GitHub's committer is not the bot")

			e.cacheDir = t.TempDir() // cold cache
			rep := e.apply(t, e.forge(t, false))
			r := result(t, rep, repo)
			assert.Equal(t, pr.ActionUpdate, r.Action, "%s: %s", repo, r.Line())
			ps := e.srv.Pulls("acme", repo)
			require.Len(t, ps, 1)
			assert.Contains(t, ps[0].GetBody(), bot, "the PR body now records the bot head")
			for _, cm := range e.srv.Comments("acme", repo, ps[0].GetNumber()) {
				assert.NotContains(t, cm, "did not make")
			}
			rep = e.apply(t, e.forge(t, false))
			assert.Equal(t, pr.ActionNoop, result(t, rep, repo).Action, "then nothing to do")
		})
	}
}
