package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newTestClient returns a token-authenticated Client on s with a fake clock.
func newTestClient(t *testing.T, s *testServer, clock *fakeClock, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{APIURL: s.apiURL(), Token: "t0ken"}
	if clock != nil {
		cfg.Budget.Clock = clock
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(context.Background(), cfg)
	require.NoError(t, err)
	return c
}

func blobHandler(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"sha":"b10b"}`)
}

func TestClientETagThroughGoGitHub(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := newTestServer(t, clock)
	var statuses []int
	s.mux.HandleFunc("GET /repos/acme/cluster-a/git/ref/heads/main", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `W/"abc"`)
		if r.Header.Get("If-None-Match") == `W/"abc"` {
			statuses = append(statuses, 304)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		statuses = append(statuses, 200)
		_, _ = io.WriteString(w, `{"ref":"refs/heads/main","object":{"sha":"c0ffee","type":"commit"}}`)
	})
	c := newTestClient(t, s, clock, nil)
	for i := range 2 {
		ref, resp, err := c.API().Git.GetRef(context.Background(), "acme", "cluster-a", "heads/main")
		require.NoError(t, err, "GET %d", i)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "GET %d is a 200 to the caller", i)
		assert.Equal(t, "c0ffee", ref.GetObject().GetSHA())
	}
	assert.Equal(t, []int{200, 304}, statuses, "the second GET is a 304 at the server")
	st := c.Stats()
	assert.Equal(t, int64(1), st.Requests.NotModified)
	assert.Equal(t, int64(1), st.Cache.Hits)
	assert.Equal(t, int64(2), st.Requests.Reads)
}

func TestClientRetries502(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := newTestServer(t, clock)
	var n atomic.Int64
	s.mux.HandleFunc("POST /repos/acme/cluster-a/git/blobs", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		blobHandler(w, r)
	})
	c := newTestClient(t, s, clock, nil)
	blob, _, err := c.API().Git.CreateBlob(context.Background(), "acme", "cluster-a", &gh.Blob{Content: gh.String("x"), Encoding: gh.String("utf-8")})
	require.NoError(t, err)
	assert.Equal(t, "b10b", blob.GetSHA())
	assert.Equal(t, int64(2), n.Load())
	assert.Equal(t, map[int]int64{502: 1, 201: 1}, c.Stats().Requests.ByStatus)
}

func TestClient422IsTerminal(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := newTestServer(t, clock)
	s.mux.HandleFunc("POST /repos/acme/cluster-a/git/trees", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"message":"Invalid tree info","errors":[]}`)
	})
	c := newTestClient(t, s, clock, nil)
	_, _, err := c.API().Git.CreateTree(context.Background(), "acme", "cluster-a", "", []*gh.TreeEntry{
		{Path: gh.String("a"), Mode: gh.String("100644"), Type: gh.String("blob"), Content: gh.String("a")},
	})
	err = Wrap(err, "creating tree", "acme/cluster-a")
	require.Error(t, err)
	assert.Len(t, s.requests(), 1, "a 422 is sent once")
	assert.Equal(t, Terminal, Classify(err))
	assert.Contains(t, err.Error(), "creating tree acme/cluster-a: ")
	assert.Empty(t, clock.slept())
}

func TestClient429WaitsRetryAfter(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	t0 := clock.Now()
	s := newTestServer(t, clock)
	var n atomic.Int64
	s.mux.HandleFunc("POST /repos/acme/cluster-a/pulls", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "90")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"number":1}`)
	})
	c := newTestClient(t, s, clock, nil)
	pr, _, err := c.API().PullRequests.Create(context.Background(), "acme", "cluster-a", &gh.NewPullRequest{Title: gh.String("sync")})
	require.NoError(t, err)
	assert.Equal(t, 1, pr.GetNumber())
	reqs := s.requests()
	require.Len(t, reqs, 2, "nothing else sent while waiting")
	assert.Equal(t, t0, reqs[0].At)
	assert.Equal(t, t0.Add(90*time.Second), reqs[1].At)
	assert.Equal(t, int64(1), c.Stats().Budget.Pauses)
}

func TestClientSecondaryLimitPausesAllWriters(t *testing.T) {
	t.Parallel()
	clock := newGatedClock()
	t0 := clock.Now()
	s := newTestServer(t, &clock.fakeClock)
	var first sync.Once
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		limited := false
		if r.Method != http.MethodGet {
			first.Do(func() { limited = true })
		}
		switch {
		case limited:
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"message":"You have exceeded a secondary rate limit.","documentation_url":"https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}`)
		case r.Method == http.MethodGet:
			_, _ = io.WriteString(w, `{}`)
		default:
			blobHandler(w, r)
		}
	})
	c, err := New(context.Background(), Config{APIURL: s.apiURL(), Token: "t0ken", Budget: BudgetConfig{Clock: clock}})
	require.NoError(t, err)

	var wg sync.WaitGroup
	blob := func(repo string) {
		_, _, err := c.API().Git.CreateBlob(context.Background(), "acme", repo, &gh.Blob{Content: gh.String("x")})
		assert.NoError(t, err, repo)
	}
	wg.Go(func() { blob("r0") })
	assert.Equal(t, 30*time.Second, <-clock.sleeping, "the limited write waits Retry-After")

	// While it waits, other writers and a reader start: all of them must wait too.
	for i := 1; i <= 5; i++ {
		wg.Go(func() { blob(fmt.Sprintf("r%d", i)) })
	}
	wg.Go(func() {
		_, _, err := c.API().Repositories.Get(context.Background(), "acme", "r9")
		assert.NoError(t, err)
	})
	// A writer holding the write slot and the reader each wait for the pause; one that does
	// not never arrives here, and go test -timeout names the hang.
	for range 2 {
		<-clock.sleeping
	}
	time.Sleep(50 * time.Millisecond)
	assert.Len(t, s.requests(), 1, "nothing is sent while the installation is paused")

	close(clock.release)
	wg.Wait()
	reqs := s.requests()
	require.Len(t, reqs, 8, "one limited write, its retry, five writes, one read")
	for _, r := range reqs[1:] {
		assert.False(t, r.At.Before(t0.Add(30*time.Second)), "%s %s sent at +%s, during the pause", r.Method, r.Path, r.At.Sub(t0))
	}
}

func TestClientContentLimiter(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	t0 := clock.Now()
	s := newTestServer(t, clock)
	s.mux.HandleFunc("POST /repos/acme/{repo}/git/blobs", blobHandler)
	c := newTestClient(t, s, clock, func(cfg *Config) { cfg.Budget.PerMinute, cfg.Budget.MinInterval = 80, -1 })
	ok, wait := c.Budget().Afford(85)
	assert.True(t, ok)
	assert.Equal(t, time.Minute, wait, "85 writes: the last ones wait a minute")
	for i := range 85 {
		_, _, err := c.API().Git.CreateBlob(context.Background(), "acme", "r"+strconv.Itoa(i), &gh.Blob{Content: gh.String("x")})
		require.NoError(t, err, "write %d", i+1)
	}
	reqs := s.requests()
	require.Len(t, reqs, 85)
	assert.Equal(t, t0, reqs[79].At, "the 80th goes at once")
	assert.Equal(t, t0.Add(time.Minute), reqs[80].At, "the 81st waits for the window")
	st := c.Stats()
	assert.Equal(t, int64(85), st.Requests.ContentWrites)
	assert.Equal(t, time.Minute, st.Budget.Waited)
}

func TestClientPrimaryLimitFarAway(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := newTestServer(t, clock)
	reset := clock.Now().Add(3 * time.Hour)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-RateLimit-Limit", "5000")
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"message":"API rate limit exceeded"}`)
	})
	c := newTestClient(t, s, clock, nil)
	_, _, err := c.API().Repositories.Get(context.Background(), "acme", "r")
	require.ErrorIs(t, err, ErrRateLimited)
	var rl *RateLimitedError
	require.True(t, errors.As(err, &rl))
	assert.Equal(t, reset.Add(time.Second), rl.Reset)
	assert.Equal(t, RateLimited, Classify(Wrap(err, "reading repo", "acme/r")))
	assert.True(t, errors.Is(Wrap(err, "reading repo", "acme/r"), ErrRateLimited))

	// The installation is paused until the reset: the next request fails without being sent.
	_, _, err = c.API().Git.CreateBlob(context.Background(), "acme", "r", &gh.Blob{Content: gh.String("x")})
	assert.ErrorIs(t, err, ErrRateLimited)
	assert.Len(t, s.requests(), 1)
	assert.Empty(t, clock.slept())
}

func TestClientNotFound(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	s.mux.HandleFunc("/", notFound)
	c := newTestClient(t, s, nil, nil)
	_, _, err := c.API().Repositories.Get(context.Background(), "acme", "gone")
	err = Wrap(err, "reading repo", "acme/gone")
	assert.ErrorIs(t, err, ErrNotFound)
	assert.True(t, IsNotFound(err))
	assert.Equal(t, NotFound, Classify(err))
}

func TestNewConfigErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := New(ctx, Config{})
	assert.ErrorContains(t, err, "no credentials")
	_, err = New(ctx, Config{Token: "t", AppID: 1, PrivateKey: []byte("k")})
	assert.ErrorContains(t, err, "choose one")
	_, err = New(ctx, Config{Token: "t", APIURL: "https://user:hunter2@ghe.example.com/api/v3/"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
	_, err = New(ctx, Config{Token: "t", APIURL: "ghe.example.com"})
	assert.Error(t, err, "a relative API URL is rejected")
}

func TestAPIURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, base, upload string }{
		{"", "https://api.github.com/", "https://uploads.github.com/"},
		{"https://api.github.com/", "https://api.github.com/", "https://uploads.github.com/"},
		{"https://ghe.example.com/api/v3/", "https://ghe.example.com/api/v3/", "https://ghe.example.com/api/uploads/"},
		{"https://ghe.example.com/api/v3", "https://ghe.example.com/api/v3/", "https://ghe.example.com/api/uploads/"},
		{"https://ghe.example.com", "https://ghe.example.com/api/v3/", "https://ghe.example.com/api/uploads/"},
	} {
		c, err := newAPIClient(http.DefaultTransport, tc.in, "")
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.base, c.BaseURL.String(), tc.in)
		assert.Equal(t, tc.upload, c.UploadURL.String(), tc.in)
		assert.Equal(t, DefaultUserAgent, c.UserAgent)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	resp := func(code int) *http.Response {
		req, _ := http.NewRequest("GET", "https://api.github.com/repos/o/r", nil)
		return &http.Response{StatusCode: code, Request: req, Header: http.Header{}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, OK},
		{"read-only", fmt.Errorf("x: %w", ErrReadOnly), Terminal},
		{"our rate limit", &RateLimitedError{Reason: "primary"}, RateLimited},
		{"go-github RateLimitError", &gh.RateLimitError{Response: resp(403)}, RateLimited},
		{"go-github AbuseRateLimitError", &gh.AbuseRateLimitError{Response: resp(403)}, RateLimited},
		{"429 ErrorResponse", &gh.ErrorResponse{Response: resp(429)}, RateLimited},
		{"403 secondary message", &gh.ErrorResponse{Response: resp(403), Message: "You have exceeded a secondary rate limit"}, RateLimited},
		{"403 permissions", &gh.ErrorResponse{Response: resp(403), Message: "Resource not accessible by integration"}, Terminal},
		{"422", &gh.ErrorResponse{Response: resp(422)}, Terminal},
		{"401", &gh.ErrorResponse{Response: resp(401)}, Terminal},
		{"404", &gh.ErrorResponse{Response: resp(404)}, NotFound},
		{"502", &gh.ErrorResponse{Response: resp(502)}, Retryable},
		{"501", &gh.ErrorResponse{Response: resp(501)}, Terminal},
		{"202 accepted", &gh.AcceptedError{}, Retryable},
		{"deadline", context.DeadlineExceeded, Retryable},
		{"wrapped 404", Wrap(&gh.ErrorResponse{Response: resp(404)}, "reading", "o/r"), NotFound},
		{"invalid config", errors.New("platform.yaml:3: unknown field"), Terminal},
	} {
		assert.Equal(t, tc.want, Classify(tc.err), tc.name)
	}
	assert.Equal(t, "rate-limited", RateLimited.String())
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "https://REDACTED@ghe.example.com/api/v3/", RedactURL("https://user:pw@ghe.example.com/api/v3/"))
	assert.Equal(t, "https://x/y?access_token=REDACTED&page=2", RedactURL("https://x/y?access_token=abc&page=2"))
	assert.NotContains(t, RedactURL("https://user:pw@ho st/%zz"), "pw")
}

// GitHub's documented CODEOWNERS error "Invalid owner on line 7:" says nothing after the
// colon: fleetbot's message names the owner and where it is.
func TestCodeownersMessage(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `"docs@" at column 7 of "*.txt docs@"`, codeownersMessage(&gh.CodeownersError{
		Line: 7, Column: 7, Kind: "Invalid owner", Source: "*.txt docs@", Message: "Invalid owner on line 7:\n\n  *.txt docs@\n        ^"}))
	assert.Equal(t, "Did you mean `**/*.rb`?", codeownersMessage(&gh.CodeownersError{
		Line: 3, Column: 1, Kind: "Invalid pattern", Source: "***/*.rb @monalisa", Message: "Invalid pattern on line 3: Did you mean `**/*.rb`?\n\n  ***/*.rb @monalisa\n  ^"}))
}
