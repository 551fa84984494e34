package githubtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

func TestConditionalRequest304IsFree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a/b.yaml": "b\n"})
	c := srv.Client()
	get := func(etag string) *github.Response {
		req, err := c.NewRequest("GET", "repos/acme/r/git/trees/main?recursive=1", nil)
		require.NoError(t, err)
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		resp, _ := c.Do(ctx, req, nil)
		require.NotNil(t, resp)
		return resp
	}
	first := get("")
	require.Equal(t, http.StatusOK, first.StatusCode)
	etag := first.Header.Get("ETag")
	second := get(etag)
	assert.Equal(t, http.StatusNotModified, second.StatusCode)
	assert.Equal(t, first.Rate.Remaining, second.Rate.Remaining, "a 304 does not count against the limit")
	assert.Equal(t, first.Header.Get("X-Ratelimit-Used"), second.Header.Get("X-Ratelimit-Used"))
	assert.Equal(t, etag, second.Header.Get("ETag"))

	srv.Commit("acme", "r", "main", "change", map[string]string{"c": "c\n"})
	assert.Equal(t, http.StatusOK, get(etag).StatusCode, "a new tree changes the ETag")

	req, err := c.NewRequest("GET", "repos/acme/r/git/matching-refs/heads/", nil)
	require.NoError(t, err)
	var refs []*github.Reference
	resp, err := c.Do(ctx, req, &refs)
	require.NoError(t, err)
	req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
	resp, _ = c.Do(ctx, req, nil)
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
}

func TestPrimaryLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t, githubtest.WithPrimaryLimit(3), githubtest.WithManualClock())
	srv.CreateRepo("acme", "r", nil)
	c := srv.Client()
	for i := range 3 {
		_, resp, err := c.Repositories.Get(ctx, "acme", "r")
		require.NoError(t, err, "call %d", i)
		assert.Equal(t, 3, resp.Rate.Limit)
		assert.Equal(t, 2-i, resp.Rate.Remaining)
		assert.Equal(t, "core", resp.Header.Get("X-Ratelimit-Resource"))
	}
	// a fresh client: go-github would refuse client-side after seeing remaining 0
	_, resp, err := srv.Client().Repositories.Get(ctx, "acme", "r")
	var rl *github.RateLimitError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, 0, rl.Rate.Remaining)
	assert.Equal(t, srv.Now().Add(time.Hour), rl.Rate.Reset.Time.UTC(), "the window is an hour from its first request")

	// after the reset the budget is back (a fresh client: go-github holds c until the reset)
	srv.AdvanceClock(time.Hour)
	c = srv.Client()
	_, _, err = c.Repositories.Get(ctx, "acme", "r")
	require.NoError(t, err)

	// /rate_limit is free and reports the budget
	limits, _, err := c.RateLimit.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, 3, limits.GetCore().Limit)
	assert.Equal(t, 2, limits.GetCore().Remaining)
}

func TestPrimaryLimit429(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t, githubtest.WithPrimaryLimit(1), githubtest.WithPrimaryLimitStatus(http.StatusTooManyRequests))
	srv.CreateRepo("acme", "r", nil)
	c := srv.Client()
	_, _, err := c.Repositories.Get(context.Background(), "acme", "r")
	require.NoError(t, err)
	// a fresh client: go-github would refuse client-side after seeing remaining 0
	_, resp, err := srv.Client().Repositories.Get(context.Background(), "acme", "r")
	require.Error(t, err)
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "0", resp.Header.Get("X-Ratelimit-Remaining"))
}

func createBlob(c *github.Client) error {
	_, _, err := c.Git.CreateBlob(context.Background(), "acme", "r", &github.Blob{Content: github.String("x")})
	return err
}

func TestContentCreationLimitWithRetryAfter(t *testing.T) {
	t.Parallel()
	// 2 per minute, on a fake clock that moves only when told
	srv := githubtest.NewServer(t, githubtest.WithContentCreationLimit(2, 0, true), githubtest.WithManualClock())
	srv.CreateRepo("acme", "r", map[string]string{"a": "a"})
	c := srv.Client()
	require.NoError(t, createBlob(c))
	require.NoError(t, createBlob(c))
	_, _, err := c.Repositories.Get(context.Background(), "acme", "r")
	require.NoError(t, err, "reads are not content creation")

	err = createBlob(c)
	var ab *github.AbuseRateLimitError
	require.ErrorAs(t, err, &ab)
	require.NotNil(t, ab.RetryAfter)
	assert.Equal(t, time.Minute, *ab.RetryAfter, "the first of the two leaves the window in a minute")
	assert.Contains(t, ab.Message, "secondary rate limit")

	srv.AdvanceClock(*ab.RetryAfter)
	// a fresh client: go-github holds c for Retry-After of wall time
	require.NoError(t, createBlob(srv.Client()), "the minute window has passed")
	counts := srv.Counts()
	assert.Equal(t, 4, counts.ContentCreating)
}

func TestContentCreationHourLimitWithoutRetryAfter(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t, githubtest.WithContentCreationLimit(0, 2, false))
	srv.CreateRepo("acme", "r", map[string]string{"a": "a"})
	c := srv.Client()
	require.NoError(t, createBlob(c))
	require.NoError(t, createBlob(c))
	err := createBlob(c)
	var ab *github.AbuseRateLimitError
	require.ErrorAs(t, err, &ab)
	assert.Empty(t, ab.Response.Header.Get("Retry-After"))
	assert.NotEqual(t, "0", ab.Response.Header.Get("X-Ratelimit-Remaining"), "a secondary limit is not the primary one")

	srv.AdvanceClock(time.Hour)
	require.NoError(t, createBlob(srv.Client()), "a fresh client after an hour of fake time")
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t, githubtest.WithConcurrencyLimit(1))
	srv.CreateRepo("acme", "r", nil)
	srv.CreateRepo("acme", "slow", nil)
	// The request for "slow" stays in flight until its context is cancelled.
	srv.Fault("GET /api/v3/repos/acme/slow", githubtest.FaultSpec{Latency: time.Hour})
	slowCtx, cancel := context.WithCancel(ctx)
	slowDone := make(chan error, 1)
	go func() {
		for {
			// a fresh client each time: go-github holds a client that met a secondary limit
			_, _, err := srv.Client().Repositories.Get(slowCtx, "acme", "slow")
			var ab *github.AbuseRateLimitError
			if errors.As(err, &ab) && slowCtx.Err() == nil {
				continue // it arrived while a request to "r" was in flight: over the limit too
			}
			slowDone <- err
			return
		}
	}()
	// Until the slow request is in flight, a request to "r" is alone and answered; once it is,
	// the next one is over the limit.
	var err error
	deadline := time.Now().Add(time.Minute)
	for {
		_, _, err = srv.Client().Repositories.Get(ctx, "acme", "r")
		if err != nil || time.Now().After(deadline) {
			break
		}
		runtime.Gosched()
	}
	cancel()
	var ab *github.AbuseRateLimitError
	assert.ErrorAs(t, err, &ab, "the second request in flight is over the limit")
	<-slowDone
}

func TestFaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a": "a"})
	c := srv.Client()

	srv.Fault("POST /repos/{owner}/{repo}/git/blobs", githubtest.FaultSpec{Status: http.StatusBadGateway, OnCall: 2})
	require.NoError(t, createBlob(c))
	err := createBlob(c)
	assert.Equal(t, http.StatusBadGateway, errStatus(t, err), "second call fails")
	require.NoError(t, createBlob(c))

	srv.ClearFaults()
	srv.Fault("GET /api/v3/repos/acme/*", githubtest.FaultSpec{Status: http.StatusInternalServerError, Times: 1})
	_, _, err = c.Repositories.Get(ctx, "acme", "r")
	assert.Equal(t, http.StatusInternalServerError, errStatus(t, err))
	_, _, err = c.Repositories.Get(ctx, "acme", "r")
	require.NoError(t, err, "Times: 1 fires once")

	srv.Fault("GET /rate_limit", githubtest.FaultSpec{Latency: 150 * time.Millisecond})
	start := time.Now()
	_, _, err = c.RateLimit.Get(ctx)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	srv.Fault("*", githubtest.FaultSpec{Drop: true}) // net/http retries an idempotent request once
	_, _, err = c.Repositories.Get(ctx, "acme", "r")
	require.Error(t, err)
	srv.ClearFaults()
	var er *github.ErrorResponse
	assert.False(t, errors.As(err, &er), "a dropped connection has no response: %v", err)

	reqs := srv.Requests()
	last := reqs[len(reqs)-1]
	assert.Equal(t, 0, last.Status)
	assert.Equal(t, "GET /repos/{owner}/{repo}", last.Route)
}

func TestPaginationAcrossPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	for i := range 75 {
		srv.CreateRepo("acme", fmt.Sprintf("repo-%02d", i), nil)
	}
	c := srv.Client()
	opt := &github.RepositoryListByOrgOptions{Sort: "full_name", ListOptions: github.ListOptions{PerPage: 30}}
	var names []string
	pages := 0
	for {
		repos, resp, err := c.Repositories.ListByOrg(ctx, "acme", opt)
		require.NoError(t, err)
		pages++
		for _, r := range repos {
			names = append(names, r.GetName())
		}
		if pages == 1 {
			assert.Equal(t, 3, resp.LastPage)
			assert.Contains(t, resp.Header.Get("Link"), `rel="next"`)
		}
		if resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	assert.Equal(t, 3, pages)
	require.Len(t, names, 75)
	assert.Equal(t, "repo-00", names[0])
	assert.Equal(t, "repo-74", names[74])
}

func TestRequestLogClassifiesNoOp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a": "a"})
	srv.ResetLog()
	c := srv.Client()
	_, _, err := c.Git.GetTree(ctx, "acme", "r", "main", true)
	require.NoError(t, err)
	_, _, err = c.PullRequests.List(ctx, "acme", "r", nil)
	require.NoError(t, err)
	assert.Equal(t, githubtest.Counts{Reads: 2}, srv.Counts(), "a no-op makes zero writes")
	for _, e := range srv.Requests() {
		assert.Equal(t, githubtest.Read, e.Class, e.Route)
		assert.Equal(t, githubtest.DefaultUser, e.Principal)
	}
}
