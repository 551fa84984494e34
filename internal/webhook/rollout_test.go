package webhook

import (
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/metrics"
)

// fakeClock moves only when Advance is called; due AfterFunc callbacks run then, each in
// its own goroutine as time.AfterFunc's do, and Advance waits for them.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
	// armed, when set, is signalled (without blocking) by every AfterFunc.
	armed chan struct{}
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	if c.armed != nil {
		select {
		case c.armed <- struct{}{}:
		default:
		}
	}
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !t.stopped
		t.stopped = true
		return was
	}
}

// pending returns when the callbacks neither run nor stopped are due.
func (c *fakeClock) pending() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []time.Time
	for _, t := range c.timers {
		if !t.stopped {
			out = append(out, t.at)
		}
	}
	return out
}

// Advance moves the clock by d and runs the callbacks that became due, in time order.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []*fakeTimer
	rest := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case t.stopped:
		case !t.at.After(c.now):
			t.stopped = true
			due = append(due, t)
		default:
			rest = append(rest, t)
		}
	}
	c.timers = rest
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].at.Before(due[j].at) })
	var wg sync.WaitGroup
	for _, t := range due {
		wg.Add(1)
		go func() { defer wg.Done(); t.f() }()
	}
	wg.Wait()
}

// TestRolloutEventsAdvanceTheRollout: a Flux status (not pending) or a closed pull request in a
// cluster repo of the rollout in progress queues a full apply; the same events elsewhere keep
// their old meaning (ignored, or a drift reconcile of the one repo).
func TestRolloutEventsAdvanceTheRollout(t *testing.T) {
	t.Parallel()
	status := func(repo, context, state string) string {
		return `{"id":7,"sha":"` + "0123456789abcdef0123456789abcdef01234567" + `","state":"` + state + `","context":"` + context +
			`","repository":{"full_name":"` + repo + `"},"sender":{"login":"flux"}}`
	}
	closed := func(repo string) string {
		return `{"action":"closed","number":2,"repository":{"full_name":"` + repo + `"},"sender":{"login":"alice"}}`
	}
	for _, tc := range []struct {
		name, event, body string
		want              *Job // nil: ignored
	}{
		{"Flux success", "status", status("acme/Cluster-A", "kustomization/platform/0c9c2e41", "success"),
			&Job{Kind: KindApply, Repo: "acme/control", Reason: ReasonRolloutStatus}},
		{"Flux failure", "status", status("acme/cluster-a", "kustomization/apps/7a1b2c3d", "failure"),
			&Job{Kind: KindApply, Repo: "acme/control", Reason: ReasonRolloutStatus}},
		{"Flux pending", "status", status("acme/cluster-a", "kustomization/platform/0c9c2e41", "pending"), nil},
		{"a CI status", "status", status("acme/cluster-a", "ci/build", "success"), nil},
		{"a repo outside the rollout", "status", status("acme/cluster-b", "kustomization/platform/0c9c2e41", "success"), nil},
		{"another owner's repo of the same name", "status", status("evil/cluster-a", "kustomization/platform/0c9c2e41", "failure"), nil},
		{"no repository", "status", `{"state":"success","context":"kustomization/platform/1"}`, nil},
		{"closed in another owner's repo of the same name", "pull_request", closed("evil/cluster-a"),
			&Job{Kind: KindDrift, Repo: "evil/cluster-a", Reason: "pull_request.closed"}},
		{"merged in the rollout", "pull_request", closed("acme/cluster-a"),
			&Job{Kind: KindApply, Repo: "acme/control", Reason: ReasonRolloutMerge}},
		{"merged outside the rollout", "pull_request", closed("acme/cluster-b"),
			&Job{Kind: KindDrift, Repo: "acme/cluster-b", Reason: "pull_request.closed"}},
	} {
		q := NewQueue(10)
		w := &RolloutWatch{Queue: q, Control: "acme/control", Clock: &fakeClock{}}
		w.Observe([]string{"acme/cluster-a"}, time.Time{})
		d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Metrics: metrics.New()},
			Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", Queue: q, Rollout: w})...)
		require.NoError(t, err)
		code, outcome := post{event: tc.event, delivery: "x", body: tc.body}.do(t, d)
		require.Equal(t, http.StatusAccepted, code, tc.name)
		if tc.want == nil {
			assert.Equal(t, metrics.OutcomeIgnored, outcome, tc.name)
			assert.Zero(t, q.Len(), tc.name)
			continue
		}
		got := q.Drain()
		require.Len(t, got, 1, tc.name)
		got[0].Delivery, got[0].Queued = "", time.Time{}
		assert.Equal(t, *tc.want, got[0], tc.name)
	}

	// Without a rollout in progress (none observed, or done), a status is ignored.
	q := NewQueue(10)
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Metrics: metrics.New()},
		Handlers(HandlerConfig{Control: "acme/control", Queue: q})...)
	require.NoError(t, err)
	_, outcome := post{event: "status", delivery: "y", body: status("acme/cluster-a", "kustomization/platform/1", "success")}.do(t, d)
	assert.Equal(t, metrics.OutcomeIgnored, outcome)
	code, _ := post{event: "status", delivery: "z", body: `{"state":`}.do(t, d)
	assert.Equal(t, http.StatusBadRequest, code, "a status payload that is not JSON")
	assert.Zero(t, q.Len())
}

// TestRolloutWatchWakesUpOnTheClock: the wake-up queues one full apply when the clock reaches
// it, not before; a newer verdict replaces it; a done rollout cancels it.
func TestRolloutWatchWakesUpOnTheClock(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	q := NewQueue(10)
	w := &RolloutWatch{Queue: q, Control: "acme/control", Clock: clock}
	soakEnd := clock.Now().Add(time.Hour)
	w.Observe([]string{"acme/cluster-a"}, soakEnd)
	assert.Equal(t, soakEnd, w.Next())
	clock.Advance(59 * time.Minute)
	assert.Zero(t, q.Len(), "not before the soak ends")
	w.Observe([]string{"acme/cluster-a"}, soakEnd) // the same verdict again (a resync)
	clock.Advance(time.Minute)
	got := q.Drain()
	require.Len(t, got, 1, "one apply when the soak ends, not one per observation")
	assert.Equal(t, KindApply, got[0].Kind)
	assert.Equal(t, ReasonRolloutTimer, got[0].Reason)
	assert.Equal(t, "acme/control", got[0].Repo)
	assert.True(t, w.Next().IsZero())

	// A newer verdict moves the wake-up: the old time passes without a job.
	w.Observe([]string{"acme/cluster-a"}, clock.Now().Add(time.Hour))
	w.Observe([]string{"acme/cluster-a"}, clock.Now().Add(2*time.Hour))
	clock.Advance(time.Hour)
	assert.Zero(t, q.Len(), "the replaced wake-up does not fire")
	clock.Advance(time.Hour)
	assert.Len(t, q.Drain(), 1)

	// The rollout done: no repo takes part, no wake-up.
	w.Observe([]string{"acme/cluster-a"}, clock.Now().Add(time.Hour))
	w.Observe(nil, time.Time{})
	assert.False(t, w.Active("acme/cluster-a"))
	clock.Advance(2 * time.Hour)
	assert.Zero(t, q.Len())

	// An apply of a control repo with waves begins: its cluster repos count at once (a
	// merge during the apply queues the next one); the pending wake-up stays.
	w.Observe(nil, clock.Now().Add(time.Hour))
	w.Begin([]string{"acme/Cluster-C"})
	assert.True(t, w.Active("acme/cluster-c"))
	assert.Equal(t, clock.Now().Add(time.Hour), w.Next())
	w.Observe(nil, time.Time{})
	assert.False(t, w.Active("acme/cluster-c"), "the verdict settles it: done")

	// A nil watch watches nothing (serve without it, the CLI).
	var none *RolloutWatch
	none.Observe([]string{"acme/cluster-a"}, clock.Now())
	none.Begin([]string{"acme/cluster-a"})
	assert.False(t, none.Active("acme/cluster-a"))
	none.Stop()
}
