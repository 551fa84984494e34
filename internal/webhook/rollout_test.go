package webhook

import (
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
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

// TestRolloutWatchWakesUpOnTheClock: the wake-up queues one full apply when the clock reaches
// it, not before; a newer verdict replaces it; a done rollout cancels it.
func TestRolloutWatchWakesUpOnTheClock(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	q := NewQueue(jobqueue.Config{Capacity: 10})
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
