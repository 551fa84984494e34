package githubtest

import (
	"sync"
	"time"
)

// clock is the fake server's notion of time: wall time since start, multiplied by a time scale,
// plus any manual advance. Every limit window, token expiry and timestamp uses it.
type clock struct {
	mu       sync.Mutex
	wall0    time.Time
	fake0    time.Time
	scale    float64
	advanced time.Duration
	wallNow  func() time.Time
	manual   bool // time moves only by Advance; durations are fake time
}

func newClock(start time.Time, scale float64, manual bool) *clock {
	if scale <= 0 {
		scale = 1
	}
	now := time.Now()
	if start.IsZero() {
		start = now
	}
	if manual {
		return &clock{wall0: now, fake0: start, scale: 1, wallNow: func() time.Time { return now }, manual: true}
	}
	return &clock{wall0: now, fake0: start, scale: scale, wallNow: time.Now}
}

// Now returns the fake time.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

func (c *clock) nowLocked() time.Time {
	elapsed := c.wallNow().Sub(c.wall0)
	return c.fake0.Add(time.Duration(float64(elapsed)*c.scale) + c.advanced).UTC().Truncate(time.Second)
}

// Advance moves the fake clock forward by d without waiting.
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.advanced += d
}

// toWall converts a fake instant into the wall-clock instant at which the fake clock will reach it,
// so headers a real client schedules on (x-ratelimit-reset, expires_at) make sense to it.
func (c *clock) toWall(t time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.manual {
		return t
	}
	elapsed := c.wallNow().Sub(c.wall0)
	fakeNow := c.fake0.Add(time.Duration(float64(elapsed)*c.scale) + c.advanced)
	return c.wallNow().Add(time.Duration(float64(t.Sub(fakeNow)) / c.scale))
}

// wallDuration converts a fake duration into wall time.
func (c *clock) wallDuration(d time.Duration) time.Duration {
	return time.Duration(float64(d) / c.scale)
}
