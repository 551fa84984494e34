package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVirtualClockSkipsWaits(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var other time.Duration
	c := NewVirtualClock(start, func(d time.Duration) { other += d })
	wall := time.Now()
	require.NoError(t, c.Sleep(context.Background(), time.Hour))
	assert.Less(t, time.Since(wall), time.Second, "a virtual hour takes no wall time")
	assert.GreaterOrEqual(t, c.Now().Sub(start), time.Hour)
	assert.Less(t, c.Now().Sub(start), time.Hour+time.Second)
	assert.Equal(t, time.Hour, other, "the other clock moved with it")
	assert.Equal(t, time.Hour, c.Skipped())

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, c.Sleep(ctx, time.Minute), context.Canceled)
	assert.Equal(t, time.Hour, c.Skipped(), "a cancelled sleep skips nothing")
}
