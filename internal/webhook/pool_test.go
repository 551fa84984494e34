package webhook

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
)

type execFunc func(ctx context.Context, j Job) error

func (f execFunc) Execute(ctx context.Context, j Job, _ jobqueue.Lease) error { return f(ctx, j) }

func TestPoolRecoversPanicsAndGivesFreshContexts(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	var ran atomic.Int32
	done := make(chan struct{}, 10)
	p := &Pool{Queue: q, Workers: 1, Exec: execFunc(func(ctx context.Context, j Job) error {
		defer func() { done <- struct{}{} }()
		ran.Add(1)
		if _, ok := ctx.Deadline(); !ok {
			return errors.New("no job timeout")
		}
		if j.Repo == "acme/boom" {
			panic("boom")
		}
		return nil
	}), Metrics: metrics.New()}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- p.Run(ctx) }()
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/boom"})
	<-done
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/boom"})
	<-done
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/fine"})
	<-done
	assert.Equal(t, int32(3), ran.Load(), "the worker survived two panics and the key was released")
	cancel()
	require.NoError(t, <-stopped)
}

func TestPoolShutdownFinishesInFlightAndHandsBackTheRest(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	started, release := make(chan struct{}), make(chan struct{})
	var runs, finished, cancelled atomic.Int32
	// The job finishes when the test releases it, after shutdown began: no timer races the
	// grace period, which is long enough never to end first on any machine.
	p := &Pool{Queue: q, Workers: 1, Grace: time.Hour, Exec: execFunc(func(ctx context.Context, j Job) error {
		if runs.Add(1) > 1 {
			return nil // a job started after shutdown: counted, asserted below
		}
		close(started)
		select {
		case <-release:
			finished.Add(1)
			return nil
		case <-ctx.Done():
			cancelled.Add(1)
			return ctx.Err()
		}
	})}
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- p.Run(ctx) }()
	<-started
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b"}) // waits behind the one worker
	cancel()
	close(release)
	require.NoError(t, <-stopped)
	assert.Equal(t, int32(1), runs.Load(), "no waiting job starts once shutdown began")
	assert.Equal(t, int32(1), finished.Load(), "the in-flight job finished within the grace period")
	assert.Zero(t, cancelled.Load())
	assert.Zero(t, q.Len(), "the waiting job was handed back")
}

func TestPoolShutdownCancelsAfterGrace(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	started := make(chan struct{})
	p := &Pool{Queue: q, Workers: 1, Grace: 30 * time.Millisecond, Exec: execFunc(func(ctx context.Context, j Job) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})}
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- p.Run(ctx) }()
	<-started
	cancel()
	require.NoError(t, <-stopped, "Run returns after the grace period (a hang is go test -timeout's)")
}
