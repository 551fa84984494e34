package fanout

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signalAfter is a context that a signal "reaches" at its n-th Err call: the
// render's own checks are the clock, so the test does not depend on how fast
// the machine is.
type signalAfter struct {
	n, calls atomic.Int64
	after    atomic.Int64 // Err calls once cancelled
}

func (c *signalAfter) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *signalAfter) Done() <-chan struct{}       { return nil }
func (c *signalAfter) Value(any) any               { return nil }
func (c *signalAfter) Err() error {
	if c.calls.Add(1) < c.n.Load() {
		return nil
	}
	c.after.Add(1)
	return context.Canceled
}

// TestAttackInterruptIgnoredUntilRenderEnds: SIGINT/SIGTERM during a render used to wait for
// the whole fleet. RenderContext checks its context before every app build and every target,
// so the work between the signal and the stop is at most one app build or one target (a few
// milliseconds each, see docs/benchmarks.md), and it returns the context's error and no
// targets whenever the signal lands.
func TestAttackInterruptIgnoredUntilRenderEnds(t *testing.T) {
	t.Parallel()
	repo := loadExample(t)
	never := &signalAfter{}
	never.n.Store(1 << 62)
	_, err := NewRenderer(Options{}).RenderContext(never, repo)
	require.NoError(t, err)
	checks := never.calls.Load()
	assert.GreaterOrEqual(t, checks, int64(len(repo.Apps)+len(repo.Clusters)+len(repo.Workspaces)),
		"one check per app build and per target")

	for n := int64(1); n <= checks; n++ {
		ctx := &signalAfter{}
		ctx.n.Store(n)
		targets, err := NewRenderer(Options{}).RenderContext(ctx, repo)
		require.Error(t, err, "signal at check %d", n)
		assert.True(t, errors.Is(err, context.Canceled), "signal at check %d: %v", n, err)
		assert.Contains(t, err.Error(), "render interrupted")
		assert.Nil(t, targets, "signal at check %d: no targets", n)
		// One check reads Err, then Cause (which reads Err again on a foreign context).
		assert.LessOrEqual(t, ctx.after.Load(), int64(2), "signal at check %d: stopped at the first check after it", n)
	}
}
