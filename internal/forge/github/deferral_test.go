package github_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// changedRepo is the repo the deferral tests change after the first apply.
const changedRepo = "cluster-prod-eu-1"

// appliedEnv is a fleet applied once on a fake GitHub whose clock moves only when the client
// sleeps (the client's clock is the fake's), with the target of changedRepo edited since: the
// next apply updates its pull request, and nothing else.
func appliedEnv(t *testing.T, opts ...githubtest.Option) *env {
	t.Helper()
	e := newEnv(t, append([]githubtest.Option{githubtest.WithManualClock()}, opts...)...)
	e.budget.Clock = serverTime{e.srv}
	rep := e.apply(t, e.forge(t, false))
	for _, r := range rep.Results {
		require.NoError(t, r.Err, r.Repo)
	}
	editTarget(t, e.targets, changedRepo)
	e.srv.ResetLog()
	return e
}

// TestRateLimitedRepoIsDeferredUntilTheReset: GitHub answers the writes of a repo with a
// secondary limit whose Retry-After is longer than the client waits. The repo is not failed:
// its result is deferred until the time GitHub announced (the answer's time plus Retry-After),
// and so are the report's JSON row and the run's earliest retry, which a queue requeues it at.
func TestRateLimitedRepoIsDeferredUntilTheReset(t *testing.T) {
	t.Parallel()
	e := appliedEnv(t)
	// One content-creating request an hour: the first write of the next run is refused for
	// about an hour, longer than the client's 15 minutes.
	e.srv.SetContentCreationLimit(0, 1, true)
	rep, err := reconcile.Apply(context.Background(), e.forge(t, false), e.repo, e.targets, reconcile.Options{Source: "c0ffee", Concurrency: 1})
	require.NoError(t, err, "a rate-limited repo is deferred, not failed")

	var announced time.Time
	for _, r := range e.srv.Requests() {
		if r.Status == 403 && r.RetryAfter > 0 {
			announced = r.Time.Add(r.RetryAfter)
			break
		}
	}
	require.False(t, announced.IsZero(), "the fake refused a write with Retry-After")
	assert.Greater(t, announced.Sub(e.srv.Now()), 15*time.Minute, "longer than the client waits")

	res := result(t, rep, changedRepo)
	require.Error(t, res.Err)
	assert.ErrorIs(t, res.Err, pr.ErrDeferred, "still a deferral for callers that ask the old way")
	assert.ErrorIs(t, res.Err, ghforge.ErrRateLimited)
	o := res.Outcome()
	assert.Equal(t, report.ClassDeferred, o.Class)
	assert.Equal(t, report.ReasonRateLimited, o.Reason)
	assert.Equal(t, announced.UTC(), o.RetryAt.UTC(), "deferred until the time GitHub announced")
	assert.Equal(t, announced.UTC(), rep.RetryAt().UTC(), "the run is retried at the earliest known time")
	assert.Equal(t, reconcile.ExitChanges, rep.ExitCode(true), "apply --detailed-exitcode: left for a later run")

	row := res.Row()
	assert.Equal(t, report.ActionDeferred, row.Action)
	b, err := json.Marshal(row)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"outcome":{"class":"deferred","reason":"RateLimited","retryAt":"`+announced.UTC().Format(time.RFC3339)+`"}`)
}

// TestPrimaryLimitDefersUntilXRateLimitReset: the installation's primary limit runs out right
// before a repo's writes (another tool spent it). GitHub's 403 says when the limit resets
// (x-ratelimit-reset, an hour after the window opened): the repo is deferred until then (plus
// the second of slack the client adds, since GitHub rounds the reset down), not failed.
func TestPrimaryLimitDefersUntilXRateLimitReset(t *testing.T) {
	t.Parallel()
	e := appliedEnv(t, githubtest.WithPrimaryLimit(1000))
	other := e.srv.ClientWithToken(e.srv.InstallationToken("acme"))
	var reset time.Time
	exhaust := func(ctx context.Context) {
		for range 1000 {
			_, resp, err := other.Repositories.Get(ctx, "acme", changedRepo)
			require.NoError(t, err)
			if resp.Rate.Remaining == 0 {
				reset = resp.Rate.Reset.Time
				return
			}
		}
		t.Fatal("the primary limit did not run out")
	}
	f := &exhaustBeforeWrite{Forge: e.forge(t, false), exhaust: exhaust}
	rep, err := reconcile.Apply(context.Background(), f, e.repo, e.targets, reconcile.Options{Source: "c0ffee", Concurrency: 1})
	require.NoError(t, err, "a rate-limited repo is deferred, not failed")
	require.False(t, reset.IsZero())

	res := result(t, rep, changedRepo)
	o := res.Outcome()
	assert.Equal(t, report.ClassDeferred, o.Class, "%v", res.Err)
	assert.Equal(t, report.ReasonRateLimited, o.Reason)
	assert.Equal(t, reset.Add(time.Second).UTC(), o.RetryAt.UTC(), "deferred until x-ratelimit-reset")
	assert.Equal(t, o.RetryAt, rep.RetryAt())
	for _, r := range rep.Results {
		if r.Repo != res.Repo {
			assert.False(t, r.Deferred(), "%s wrote nothing and waits for nothing", r.Repo)
		}
	}
}

// TestBudgetDeferralSaysWhen: a repo fleetbot's own write budget cannot afford within the wait
// the client accepts is deferred until the budget has room for it, on the client's clock.
func TestBudgetDeferralSaysWhen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubtest.WithManualClock())
	e.budget = ghforge.BudgetConfig{PerMinute: 1000, PerHour: 20, MaxWait: time.Minute, MinInterval: -1, Clock: serverTime{e.srv}}
	rep, err := reconcile.Apply(context.Background(), e.forge(t, false), e.repo, e.targets, reconcile.Options{Concurrency: 1})
	require.NoError(t, err)
	deferred := rep.Deferred()
	require.NotEmpty(t, deferred)
	for _, r := range deferred {
		o := r.Outcome()
		assert.Equal(t, report.ReasonBudgetExhausted, o.Reason, r.Repo)
		assert.True(t, o.RetryAt.After(e.srv.Now().Add(time.Minute)), "%s: deferred past the wait the client accepts: %s", r.Repo, o.RetryAt)
		assert.False(t, o.RetryAt.After(e.srv.Now().Add(time.Hour)), "%s: the hour window has room within the hour: %s", r.Repo, o.RetryAt)
	}
	assert.False(t, rep.RetryAt().IsZero())
}

// exhaustBeforeWrite is the GitHub forge, with exhaust run once right before the first repo's
// writes (after its write gate admitted them).
type exhaustBeforeWrite struct {
	*ghforge.Forge
	exhaust func(ctx context.Context)
	done    bool
}

func (f *exhaustBeforeWrite) Capabilities() pr.Capabilities {
	c := f.Forge.Capabilities()
	c.WriteGate = f
	return c
}

func (f *exhaustBeforeWrite) BeforeWrite(ctx context.Context, owner, repo string, cost pr.Cost) error {
	if err := f.Forge.BeforeWrite(ctx, owner, repo, cost); err != nil {
		return err
	}
	if !f.done {
		f.done = true
		f.exhaust(ctx)
	}
	return nil
}
