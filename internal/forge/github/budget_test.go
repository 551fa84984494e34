package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func created(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }

func TestBudgetContentWindowPerMinute(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	t0 := clock.Now()
	s := newTestServer(t, clock)
	s.mux.HandleFunc("/", created)
	b := NewBudget(BudgetConfig{PerMinute: 80, MinInterval: -1, Clock: clock})
	rt := NewBudgetTransport(http.DefaultTransport, b)
	for i := range 85 {
		resp := s.do(t, rt, "POST", fmt.Sprintf("/repos/o/r%d/git/blobs", i), `{}`)
		_ = readAll(t, resp)
	}
	reqs := s.requests()
	require.Len(t, reqs, 85)
	for i, r := range reqs {
		if i < 80 {
			assert.Equal(t, t0, r.At, "write %d goes at once", i+1)
		} else {
			assert.Equal(t, t0.Add(time.Minute), r.At, "write %d waits for the minute window", i+1)
		}
	}
	st := b.Stats()
	assert.Equal(t, time.Minute, st.Waited)
	assert.Equal(t, int64(85), st.ContentWrites)
	assert.Equal(t, int64(85), st.Writes)
}

func TestBudgetContentWindowPerHour(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	s := newTestServer(t, clock)
	s.mux.HandleFunc("/", created)
	b := NewBudget(BudgetConfig{PerMinute: 100, PerHour: 3, MinInterval: -1, Clock: clock})
	rt := NewBudgetTransport(http.DefaultTransport, b)
	for range 3 {
		_ = readAll(t, s.do(t, rt, "POST", "/repos/o/r/git/trees", `{}`))
	}
	ok, wait := b.Afford(1)
	assert.False(t, ok)
	assert.Equal(t, time.Hour, wait)

	req, _ := http.NewRequest("POST", s.URL+apiPrefix+"/repos/o/r/git/commits", stringsReader("{}"))
	_, err := rt.RoundTrip(req)
	var rl *RateLimitedError
	require.True(t, errors.As(err, &rl), "got %v", err)
	assert.Equal(t, "content budget", rl.Reason)
	assert.Equal(t, clock.Now().Add(time.Hour), rl.Reset)
	assert.Len(t, s.requests(), 3)
	assert.Empty(t, clock.slept(), "refused without waiting")

	// Non-content writes are not held by the content windows.
	_ = readAll(t, s.do(t, rt, "DELETE", "/repos/o/r/git/refs/heads/x", ""))
	assert.Len(t, s.requests(), 4)
}

func TestBudgetAfford(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b := NewBudget(BudgetConfig{PerMinute: 80, PerHour: 500, MinInterval: -1, Clock: clock})
	req, _ := http.NewRequest("POST", "http://x/repos/o/r/git/trees", nil)
	for range 78 {
		release, err := b.acquireWrite(req, true)
		require.NoError(t, err)
		release()
	}
	ok, wait := b.Afford(2)
	assert.True(t, ok)
	assert.Zero(t, wait)
	ok, wait = b.Afford(3)
	assert.True(t, ok)
	assert.Equal(t, time.Minute, wait, "the third write waits for the window")
	ok, wait = b.Afford(500)
	assert.False(t, ok, "500 more do not fit within MaxWait")
	// 78+500 = 578: 500 fit in the first hour (80 a minute), the last 78 when the first 78 expire.
	assert.Equal(t, time.Hour, wait)

	b.Pause(clock.Now().Add(20 * time.Minute))
	ok, wait = b.Afford(1)
	assert.False(t, ok)
	assert.Equal(t, 20*time.Minute, wait)
}

func TestBudgetSerialisesWrites(t *testing.T) {
	t.Parallel()
	s := newTestServer(t, nil)
	var writes, reads inFlight
	// The first read is held until a second one is in flight, which only happens if reads are
	// not serialised (if they are, the test hangs and go test -timeout names it); writes get a
	// moment to overlap.
	twoReads := make(chan struct{})
	var twoOnce sync.Once
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			reads.enter()
			if reads.cur.Load() >= 2 {
				twoOnce.Do(func() { close(twoReads) })
			}
			defer reads.leave()
			select {
			case <-twoReads:
			case <-r.Context().Done():
			}
			return
		}
		writes.enter()
		defer writes.leave()
		time.Sleep(5 * time.Millisecond) // a window for a second write to (wrongly) overlap; not a wait
	})
	rt := NewBudgetTransport(http.DefaultTransport, NewBudget(BudgetConfig{MinInterval: -1})) // system clock: no spacing
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() { _ = readAll(t, s.do(t, rt, "PATCH", fmt.Sprintf("/repos/o/r%d/pulls/1", i), `{}`)) })
		wg.Go(func() { _ = readAll(t, s.do(t, rt, "GET", fmt.Sprintf("/repos/o/r%d", i), "")) })
	}
	wg.Wait()
	assert.Equal(t, int64(1), writes.max.Load(), "one mutation in flight")
	assert.Greater(t, reads.max.Load(), int64(1), "reads are not serialised")
}

func TestBudgetDeadlineAware(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b := NewBudget(BudgetConfig{PerMinute: 1, Clock: clock})
	rt := NewBudgetTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Request: r}, nil
	}), b)
	req, _ := http.NewRequest("POST", "http://x/repos/o/r/git/trees", nil)
	_, err := rt.RoundTrip(req)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ = http.NewRequestWithContext(ctx, "POST", "http://x/repos/o/r/git/trees", nil)
	_, err = rt.RoundTrip(req)
	assert.ErrorIs(t, err, ErrRateLimited, "a wait past the deadline fails at once")
	assert.Empty(t, clock.slept())
	assert.Equal(t, int64(1), b.Stats().Refused)
}

func TestBudgetPauseHoldsReadsAndWrites(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	t0 := clock.Now()
	s := newTestServer(t, clock)
	s.mux.HandleFunc("/", created)
	b := NewBudget(BudgetConfig{Clock: clock})
	b.Pause(t0.Add(45 * time.Second))
	b.Pause(t0.Add(10 * time.Second)) // a shorter pause does not shorten it
	rt := NewBudgetTransport(http.DefaultTransport, b)
	_ = readAll(t, s.do(t, rt, "GET", "/repos/o/r", ""))
	_ = readAll(t, s.do(t, rt, "PUT", "/repos/o/r/branches/main/protection", "{}"))
	for _, r := range s.requests() {
		assert.False(t, r.At.Before(t0.Add(45*time.Second)), "%s %s sent during the pause", r.Method, r.Path)
	}
	assert.Equal(t, int64(1), b.Stats().Pauses)
}

// GitHub's guidance: mutations of an installation one at a time, at least a second apart.
func TestBudgetSpacesMutations(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	b := NewBudget(BudgetConfig{Clock: clock})
	assert.Equal(t, DefaultMinInterval, b.Config().MinInterval)
	req := httptest.NewRequest("PATCH", "https://api.github.com/repos/o/r", nil)
	var starts []time.Time
	for i := 0; i < 3; i++ {
		release, err := b.acquireWrite(req, false)
		require.NoError(t, err)
		starts = append(starts, clock.Now())
		release()
	}
	for i := 1; i < len(starts); i++ {
		assert.GreaterOrEqual(t, starts[i].Sub(starts[i-1]), time.Second, "mutation %d", i)
	}
	none := NewBudget(BudgetConfig{Clock: newFakeClock(), MinInterval: -1})
	assert.Zero(t, none.Config().MinInterval)
}

// Afford counts the second between mutations: 100 writes take at least 99 s.
func TestBudgetAffordCountsInterval(t *testing.T) {
	t.Parallel()
	b := NewBudget(BudgetConfig{PerMinute: 1000, PerHour: 10000, Clock: newFakeClock()})
	ok, wait := b.Afford(100)
	assert.True(t, ok)
	assert.Equal(t, 99*time.Second, wait)
}

// TestBudgetSharedAmongReplicas: with three live replicas sharing the installation, this one
// gets a third of each window (80/3 = 26 a minute, 500/3 = 166 an hour), so together they stay
// within GitHub's limits; when one leaves, the two left get half each.
func TestBudgetSharedAmongReplicas(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	replicas := 3
	b := NewBudget(BudgetConfig{MinInterval: -1, Clock: clock, Share: func() int { return replicas }})
	ok, wait := b.Afford(26)
	assert.True(t, ok)
	assert.Zero(t, wait, "26 writes fit this replica's minute")
	_, wait = b.Afford(27)
	assert.Equal(t, time.Minute, wait, "the 27th waits for the next minute")
	_, wait = b.Afford(167)
	assert.Equal(t, time.Hour, wait, "the 167th waits for the next hour")

	replicas = 2
	_, wait = b.Afford(40)
	assert.Zero(t, wait, "two replicas: 40 a minute each")
	_, wait = b.Afford(41)
	assert.Equal(t, time.Minute, wait)

	replicas = 0 // not joined yet: as if alone
	_, wait = b.Afford(80)
	assert.Zero(t, wait)
}
