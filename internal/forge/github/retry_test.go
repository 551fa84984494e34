package github

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sequence answers the n-th request with statuses[n] (the last one repeating), running set to
// add headers.
func sequence(statuses []int, set func(n int, w http.ResponseWriter)) http.HandlerFunc {
	var n atomic.Int64
	return func(w http.ResponseWriter, r *http.Request) {
		i := int(n.Add(1) - 1)
		if set != nil {
			set(i, w)
		}
		w.WriteHeader(statuses[min(i, len(statuses)-1)])
		_, _ = io.WriteString(w, `{"message":"status `+strconv.Itoa(statuses[min(i, len(statuses)-1)])+`"}`)
	}
}

func TestRetryTransportStatuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		statuses []int
		want     int
		requests int
	}{
		{"502 then ok", []int{502, 200}, 200, 2},
		{"503 504 then ok", []int{503, 504, 200}, 200, 3},
		{"5xx exhausts attempts", []int{502}, 502, DefaultMaxAttempts},
		{"501 is not transient", []int{501, 200}, 501, 1},
		{"500 is not retried", []int{500, 200}, 500, 1},
		{"422 is terminal", []int{422, 200}, 422, 1},
		{"404", []int{404, 200}, 404, 1},
		{"403 without a limit is a permission error", []int{403, 200}, 403, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newFakeClock()
			s := newTestServer(t, clock)
			s.mux.Handle("/repos/o/r/git/trees", sequence(tc.statuses, nil))
			rt := NewRetryTransport(http.DefaultTransport, RetryConfig{Clock: clock})
			resp := s.do(t, rt, "POST", "/repos/o/r/git/trees", `{"tree":[]}`)
			_ = readAll(t, resp)
			assert.Equal(t, tc.want, resp.StatusCode)
			assert.Len(t, s.requests(), tc.requests)
			assert.Len(t, clock.slept(), tc.requests-1, "one backoff per retry")
			for _, d := range clock.slept() {
				assert.LessOrEqual(t, d, defaultMaxDelay)
			}
		})
	}
}

func TestRetryTransportReplaysBody(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := newTestServer(t, clock)
	var bodies []string
	n := 0
	s.mux.HandleFunc("/repos/o/r/git/blobs", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		n++
		if n == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	rt := NewRetryTransport(http.DefaultTransport, RetryConfig{Clock: clock})
	resp := s.do(t, rt, "POST", "/repos/o/r/git/blobs", `{"content":"hello"}`)
	_ = readAll(t, resp)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, []string{`{"content":"hello"}`, `{"content":"hello"}`}, bodies)
}

func TestRetryTransportRetryAfter(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := newTestServer(t, clock)
	s.mux.Handle("/repos/o/r/pulls", sequence([]int{429, 201}, func(n int, w http.ResponseWriter) {
		if n == 0 {
			w.Header().Set("Retry-After", "30")
		}
	}))
	rt := NewRetryTransport(http.DefaultTransport, RetryConfig{Clock: clock})
	resp := s.do(t, rt, "POST", "/repos/o/r/pulls", `{}`)
	_ = readAll(t, resp)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	reqs := s.requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, []time.Duration{30 * time.Second}, clock.slept())
	assert.GreaterOrEqual(t, reqs[1].At.Sub(reqs[0].At), 30*time.Second, "nothing sent before Retry-After")
}

func TestRetryTransportSecondaryWithoutHeaders(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := newTestServer(t, clock)
	n := 0
	s.mux.HandleFunc("/repos/o/r/issues/1/comments", func(w http.ResponseWriter, r *http.Request) {
		n++
		if n == 1 {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	rt := NewRetryTransport(http.DefaultTransport, RetryConfig{Clock: clock})
	resp := s.do(t, rt, "POST", "/repos/o/r/issues/1/comments", `{}`)
	_ = readAll(t, resp)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, []time.Duration{DefaultSecondaryWait}, clock.slept())
}

func TestRetryTransportPrimaryLimit(t *testing.T) {
	t.Parallel()
	t.Run("reset within MaxWait: wait and retry", func(t *testing.T) {
		clock := newFakeClock()
		s := newTestServer(t, clock)
		reset := clock.Now().Add(2 * time.Minute)
		s.mux.Handle("/repos/o/r", sequence([]int{403, 200}, func(n int, w http.ResponseWriter) {
			if n == 0 {
				w.Header().Set("X-RateLimit-Remaining", "0")
				w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
			}
		}))
		b := NewBudget(BudgetConfig{Clock: clock})
		rt := NewRetryTransport(http.DefaultTransport, RetryConfig{Clock: clock, Budget: b})
		resp := s.do(t, rt, "GET", "/repos/o/r", "")
		_ = readAll(t, resp)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, []time.Duration{2*time.Minute + time.Second}, clock.slept())
		assert.Equal(t, reset.Add(time.Second), b.Stats().PausedUntil, "the budget is paused for everyone")
	})
	t.Run("reset far away: ErrRateLimited at once", func(t *testing.T) {
		clock := newFakeClock()
		s := newTestServer(t, clock)
		reset := clock.Now().Add(50 * time.Minute)
		s.mux.Handle("/repos/o/r", sequence([]int{429}, func(n int, w http.ResponseWriter) {
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		}))
		rt := NewRetryTransport(http.DefaultTransport, RetryConfig{Clock: clock})
		req, _ := http.NewRequest("GET", s.URL+apiPrefix+"/repos/o/r", nil)
		_, err := rt.RoundTrip(req)
		require.ErrorIs(t, err, ErrRateLimited)
		var rl *RateLimitedError
		require.True(t, errors.As(err, &rl))
		assert.Equal(t, reset.Add(time.Second), rl.Reset)
		assert.Equal(t, "primary", rl.Reason)
		assert.Equal(t, RateLimited, Classify(err))
		assert.Len(t, s.requests(), 1)
		assert.Empty(t, clock.slept())
	})
}

func TestRetryTransportWaitRespectsContext(t *testing.T) {
	t.Parallel()
	clock := &blockingClock{fakeClock: *newFakeClock(), sleeping: make(chan struct{})}
	s := newTestServer(t, nil)
	s.mux.Handle("/repos/o/r", sequence([]int{429}, func(n int, w http.ResponseWriter) { w.Header().Set("Retry-After", "600") }))
	rt := NewRetryTransport(http.DefaultTransport, RetryConfig{Clock: clock})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-clock.sleeping; cancel() }()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+apiPrefix+"/repos/o/r", nil)
	_, err := rt.RoundTrip(req)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Len(t, s.requests(), 1)
}

func TestRetryTransportNetworkErrors(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	var calls atomic.Int64
	failing := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls.Add(1)
		return nil, errors.New("connection reset")
	})
	rt := NewRetryTransport(failing, RetryConfig{Clock: clock, MaxAttempts: 3})
	req, _ := http.NewRequest("GET", "http://example.invalid/api/v3/repos/o/r", nil)
	_, err := rt.RoundTrip(req)
	assert.Error(t, err)
	assert.Equal(t, int64(3), calls.Load(), "reads are retried")

	calls.Store(0)
	req, _ = http.NewRequest("POST", "http://example.invalid/api/v3/repos/o/r/pulls", stringsReader("{}"))
	_, err = rt.RoundTrip(req)
	assert.Error(t, err)
	assert.Equal(t, int64(1), calls.Load(), "a write that may have landed is not blindly resent")
}

// GitHub's guidance for a secondary limit that names no time: wait a minute, then, if the
// limit persists, an exponentially increasing time. A 429 is a secondary limit too.
func TestRetryTransportSecondaryBackoffIsExponential(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusForbidden, http.StatusTooManyRequests} {
		clock := newFakeClock()
		s := newTestServer(t, clock)
		n := 0
		s.mux.HandleFunc("/repos/o/r/issues/1/comments", func(w http.ResponseWriter, r *http.Request) {
			n++
			if n <= 3 {
				w.WriteHeader(status)
				_, _ = io.WriteString(w, `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}`)
				return
			}
			w.WriteHeader(http.StatusCreated)
		})
		rt := NewRetryTransport(http.DefaultTransport, RetryConfig{Clock: clock})
		resp := s.do(t, rt, "POST", "/repos/o/r/issues/1/comments", `{}`)
		_ = readAll(t, resp)
		assert.Equal(t, http.StatusCreated, resp.StatusCode, "status %d", status)
		assert.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute}, clock.slept(), "status %d", status)
	}
}
