package servetest_test

import (
	"bytes"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/serve/servetest"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestWaiterChecksOnEventsOnly: Eventually checks its condition once, then once per event at
// most (never on a timer), and returns as soon as an event makes it true.
func TestWaiterChecksOnEventsOnly(t *testing.T) {
	t.Parallel()
	var s servetest.Signal
	var n, checks atomic.Int64
	step := make(chan struct{})
	go func() {
		for range step {
			n.Add(1)
			s.Notify()
		}
	}()
	w := servetest.NewWaiter(t, s.C)
	w.Eventually("three steps", func() bool {
		c := checks.Add(1)
		if c <= 3 {
			step <- struct{}{} // the next event, taken after this check
		}
		return n.Load() >= 3
	})
	close(step)
	assert.EqualValues(t, 3, n.Load())
	assert.LessOrEqual(t, checks.Load(), int64(4), "one check, then one per event")
}

// TestSignalFromLogsAndWrites: every record serve logs from Info up, and every write of a
// process's log, wakes the waiters; a Debug record next does not take does not.
func TestSignalFromLogsAndWrites(t *testing.T) {
	t.Parallel()
	var s servetest.Signal
	log := slog.New(s.Handler(nil)).With("kind", "apply")
	ch := s.C()
	log.Debug("not taken")
	require.False(t, closed(ch))
	log.Info("job done")
	require.True(t, closed(ch))

	var buf bytes.Buffer
	out := s.Writer(&buf)
	ch = s.C()
	_, err := out.Write([]byte("line\n"))
	require.NoError(t, err)
	require.True(t, closed(ch))
	assert.Equal(t, "line\n", buf.String())
}
