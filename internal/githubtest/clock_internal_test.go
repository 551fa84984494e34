package githubtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A scaled clock runs fake time faster than the wall and converts the instants and durations a
// real client schedules on (x-ratelimit-reset, Retry-After) back to wall time: at 3600x an hour
// of fake time is a wall second. The wall clock is injected, so nothing sleeps.
func TestScaledClockConvertsToWallTime(t *testing.T) {
	t.Parallel()
	wall := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := newClock(time.Time{}, 3600, false)
	c.wall0, c.fake0 = wall, wall
	c.wallNow = func() time.Time { return wall }

	assert.Equal(t, wall, c.Now())
	assert.Equal(t, wall.Add(time.Second), c.toWall(wall.Add(time.Hour)), "an hour of fake time is a wall second")
	assert.Equal(t, time.Second, c.wallDuration(time.Hour))

	wall = wall.Add(time.Second)
	assert.Equal(t, c.fake0.Add(time.Hour), c.Now(), "a wall second moves the fake clock an hour")
	c.Advance(time.Hour)
	assert.Equal(t, c.fake0.Add(2*time.Hour), c.Now())
	assert.Equal(t, wall, c.toWall(c.fake0.Add(2*time.Hour)), "an instant already reached is now")
}

// A manual clock moves only by Advance; its durations and instants are fake time as they are.
func TestManualClockMovesOnlyByAdvance(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := newClock(start, 3600, true)
	assert.Equal(t, start, c.Now())
	assert.Equal(t, time.Minute, c.wallDuration(time.Minute), "no scale")
	c.Advance(time.Hour)
	assert.Equal(t, start.Add(time.Hour), c.Now())
	assert.Equal(t, start.Add(2*time.Hour), c.toWall(start.Add(2*time.Hour)))
}
