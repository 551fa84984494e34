package webhook

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func next(t *testing.T, q *Queue) Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	j, err := q.Next(ctx)
	require.NoError(t, err)
	return j
}

func noNext(t *testing.T, q *Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	j, err := q.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "no job should be runnable, got %+v", j)
}

func TestQueueCoalescesPerKeyOnTheNewestCommit(t *testing.T) {
	t.Parallel()
	q := NewQueue(10)
	for i := range 10 {
		c, err := q.Push(Job{Kind: KindApply, Repo: "acme/control", SHA: fmt.Sprintf("sha%d", i), Delivery: fmt.Sprint(i), Queued: t0.Add(time.Duration(i) * time.Second)})
		require.NoError(t, err)
		assert.Equal(t, i > 0, c, "push %d", i)
	}
	for i := range 3 {
		_, err := q.Push(Job{Kind: KindCheck, Repo: "acme/control", PR: 7, SHA: fmt.Sprintf("head%d", i)})
		require.NoError(t, err)
	}
	assert.Equal(t, 2, q.Len(), "one apply, one check of PR 7")

	j := next(t, q)
	assert.Equal(t, KindApply, j.Kind)
	assert.Equal(t, "sha9", j.SHA, "newest commit")
	assert.Equal(t, "9", j.Delivery, "newest delivery")
	assert.Equal(t, t0, j.Queued, "first delivery's time, for latency")
	assert.Equal(t, 9, j.Merged)
	j2 := next(t, q)
	assert.Equal(t, "head2", j2.SHA)
	q.Done(j.Key())
	q.Done(j2.Key())
	assert.Zero(t, q.Len())
}

func TestQueueIsBoundedAndNeverBlocks(t *testing.T) {
	t.Parallel()
	q := NewQueue(2)
	_, err := q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	require.NoError(t, err)
	_, err = q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
	require.NoError(t, err)
	// Push on a full queue returns at once (a blocking Push is caught by go test's -timeout,
	// not by a wall-clock bound that a loaded machine could miss).
	_, err = q.Push(Job{Kind: KindDrift, Repo: "acme/c"})
	require.ErrorIs(t, err, ErrQueueFull)
	c, err := q.Push(Job{Kind: KindDrift, Repo: "ACME/a"})
	require.NoError(t, err, "a full queue still coalesces")
	assert.True(t, c)
}

func TestQueueNeverRunsAKeyTwiceAtOnce(t *testing.T) {
	t.Parallel()
	q := NewQueue(10)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a", Reason: "first"})
	j := next(t, q)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a", Reason: "while running"})
	assert.Equal(t, 1, q.Len())
	noNext(t, q)
	q.Done(j.Key())
	assert.Equal(t, "while running", next(t, q).Reason)
}

func TestQueueApplyAndDriftsExclude(t *testing.T) {
	t.Parallel()
	q := NewQueue(10)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a", Queued: t0.Add(time.Second)})
	d := next(t, q)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b", Queued: t0})
	_, _ = q.Push(Job{Kind: KindApply, Repo: "acme/control", Queued: t0.Add(2 * time.Second)})
	assert.Equal(t, 1, q.Len(), "the waiting apply absorbed the waiting drift")
	c, _ := q.Push(Job{Kind: KindDrift, Repo: "acme/c"})
	assert.True(t, c, "a drift behind a waiting apply is covered by it")
	_, _ = q.Push(Job{Kind: KindCheck, Repo: "acme/control", PR: 1})

	j := next(t, q)
	assert.Equal(t, KindCheck, j.Kind, "checks run beside drifts; the apply waits for them")
	noNext(t, q)
	q.Done(d.Key())
	a := next(t, q)
	assert.Equal(t, KindApply, a.Kind)
	assert.Equal(t, 2, a.Merged)
	assert.Equal(t, t0, a.Queued, "the earliest absorbed delivery")

	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	noNext(t, q)
	q.Done(a.Key())
	assert.Equal(t, KindDrift, next(t, q).Kind)
}

func TestQueueDrain(t *testing.T) {
	t.Parallel()
	q := NewQueue(10)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	_, _ = q.Push(Job{Kind: KindCheck, Repo: "acme/control", SHA: "abc"})
	left := q.Drain()
	require.Len(t, left, 2)
	assert.Equal(t, "drift:acme/a", left[0].Key())
	assert.Equal(t, "check:acme/control@abc", left[1].Key())
	assert.Zero(t, q.Len())
}

// BenchmarkQueueBurst is a burst as serve sees one: 200 deliveries (drifts on 50 repos and
// pushes to the control repo) coalesced into the queue, then drained by a worker. The figure
// per op is one whole burst.
func BenchmarkQueueBurst(b *testing.B) {
	ctx := context.Background()
	repos := make([]string, 50)
	for i := range repos {
		repos[i] = "acme/repo-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		q := NewQueue(DefaultQueueSize)
		for d := range 200 {
			j := Job{Kind: KindDrift, Repo: repos[d%len(repos)]}
			if d%4 == 0 {
				j = Job{Kind: KindApply, Repo: "acme/control"}
			}
			if _, err := q.Push(j); err != nil {
				b.Fatal(err)
			}
		}
		for q.Len() > 0 {
			j, err := q.Next(ctx)
			if err != nil {
				b.Fatal(err)
			}
			q.Done(j.Key())
		}
	}
}
