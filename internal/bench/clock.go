package bench

import (
	"context"
	"sync"
	"time"
)

// VirtualClock is the client's clock in the fan-out measurement: wall time
// since it started plus every wait it skipped. A Sleep does not block: it
// moves the clock (and, through advance, the fake GitHub's clock) forward
// by the wait, so hours of content-creation budget pass in seconds while
// request handling keeps its real duration. Sleeps add up: two goroutines
// waiting at once for the same instant move the clock twice, so a run with
// concurrent waits (only pauses after a 403 cause them: content waits hold
// the budget's one write slot) reads as longer than it was, never shorter.
type VirtualClock struct {
	mu       sync.Mutex
	wall0    time.Time
	start    time.Time
	advanced time.Duration
	advance  func(time.Duration)
}

// NewVirtualClock returns a clock reading start now; advance (may be nil)
// is called with every skipped wait, to keep another clock in step.
func NewVirtualClock(start time.Time, advance func(time.Duration)) *VirtualClock {
	return &VirtualClock{wall0: time.Now(), start: start, advance: advance}
}

// Now returns the virtual time.
func (c *VirtualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

func (c *VirtualClock) nowLocked() time.Time {
	return c.start.Add(time.Since(c.wall0) + c.advanced)
}

// Sleep skips d: the clock reads at least now+d when it returns.
func (c *VirtualClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil || d <= 0 {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanced += d
	if c.advance != nil {
		c.advance(d)
	}
	return nil
}

// Skipped is the total time skipped by Sleep.
func (c *VirtualClock) Skipped() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.advanced
}
