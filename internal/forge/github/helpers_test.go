package github

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// apiPrefix is where the test servers serve the API, go-github style: a client that builds an
// absolute URL without the base URL hits the catch-all and fails the test.
const apiPrefix = "/api/v3"

// testServer is an httptest server serving mux under apiPrefix and recording every request.
type testServer struct {
	*httptest.Server
	mux   *http.ServeMux
	clock *fakeClock // may be nil

	mu   sync.Mutex
	reqs []seenRequest
}

type seenRequest struct {
	Method, Path string
	Header       http.Header
	At           time.Time // fake-clock time of arrival
}

func newTestServer(t *testing.T, clock *fakeClock) *testServer {
	t.Helper()
	s := &testServer{mux: http.NewServeMux(), clock: clock}
	root := http.NewServeMux()
	root.Handle(apiPrefix+"/", http.StripPrefix(apiPrefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		s.mux.ServeHTTP(w, r)
	})))
	root.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("request outside %s: %s %s", apiPrefix, r.Method, r.URL)
		http.Error(w, "outside the API prefix", http.StatusBadRequest)
	})
	s.Server = httptest.NewServer(root)
	t.Cleanup(s.Close)
	return s
}

func (s *testServer) record(r *http.Request) {
	var at time.Time
	if s.clock != nil {
		at = s.clock.Now()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, seenRequest{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), At: at})
}

func (s *testServer) requests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.reqs...)
}

// apiURL is the base URL a client should use.
func (s *testServer) apiURL() string { return s.URL + apiPrefix + "/" }

// get sends a GET for path (relative to the API root) through rt.
func (s *testServer) do(t *testing.T, rt http.RoundTripper, method, path, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, s.URL+apiPrefix+path, stringsReader(body))
	require.NoError(t, err)
	resp, err := rt.RoundTrip(req)
	require.NoError(t, err, "%s %s", method, path)
	return resp
}

// fakeClock's Sleep advances time at once, so waits measured in minutes cost nothing; the sleeps
// are recorded for assertions.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.sleeps = append(c.sleeps, d)
	return nil
}

func (c *fakeClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// blockingClock's Sleep waits for the context only, to test cancellation while waiting.
type blockingClock struct {
	fakeClock
	sleeping chan struct{}
}

func (c *blockingClock) Sleep(ctx context.Context, d time.Duration) error {
	close(c.sleeping)
	<-ctx.Done()
	return ctx.Err()
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// inFlight tracks the maximum number of concurrent handler executions.
type inFlight struct {
	cur, max atomic.Int64
}

func (f *inFlight) enter() {
	n := f.cur.Add(1)
	for {
		m := f.max.Load()
		if n <= m || f.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (f *inFlight) leave() { f.cur.Add(-1) }

func stringsReader(s string) io.Reader {
	if s == "" {
		return nil
	}
	return strings.NewReader(s)
}

// gatedClock's Sleep reports itself on sleeping and blocks until release is closed, then wakes
// at its start time plus d, so a test can act while requests are waiting.
type gatedClock struct {
	fakeClock
	sleeping chan time.Duration
	release  chan struct{}
}

func newGatedClock() *gatedClock {
	return &gatedClock{fakeClock: *newFakeClock(), sleeping: make(chan time.Duration, 100), release: make(chan struct{})}
}

func (c *gatedClock) Sleep(ctx context.Context, d time.Duration) error {
	start := c.Now()
	c.sleeping <- d
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-c.release:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if wake := start.Add(d); wake.After(c.now) {
		c.now = wake
	}
	c.sleeps = append(c.sleeps, d)
	return nil
}
