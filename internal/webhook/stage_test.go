package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// TestQueueTakeDrifts: the drifts a started batch takes are its owner's that may start now,
// held by the delay or not, oldest first and at most n; they leave the depth and count as
// running. Other owners and kinds, a repo that runs, a repo an apply claimed or waits to claim
// stay. A done context takes nothing, and neither does a batch that read its head before an
// apply finished.
func TestQueueTakeDrifts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := &fakeClock{now: t0}
	q := NewQueue(jobqueue.Config{Capacity: jobqueue.DefaultQueueSize, BatchDelay: time.Minute, Clock: clock})
	push := func(j Job) {
		t.Helper()
		_, err := q.Push(j)
		require.NoError(t, err)
	}
	push(Job{Kind: KindDrift, Repo: "acme/running"})
	push(Job{Kind: KindDrift, Repo: "acme/wanted-running"})
	clock.Advance(time.Minute)
	running := nextBatch(t, q)
	require.Len(t, running, 2)
	push(Job{Kind: KindApply, Repo: "acme/control", Incremental: true})
	apply := next(t, q)
	applied := q.Settled()
	claimed := make(chan error, 1)
	go func() { claimed <- q.Claim(ctx, []string{"claimed"}, false) }()
	require.NoError(t, <-claimed)
	// A second claim of the apply waits for the running drift of one of its repos; the other
	// repo it wants is off limits meanwhile.
	wanted := make(chan error, 1)
	go func() { wanted <- q.Claim(ctx, []string{"wanted-running", "wanted"}, false) }()
	waitFor(t, q, func() bool {
		return q.Wants("wanted")
	})

	push(Job{Kind: KindDrift, Repo: "acme/held"}) // held by the delay, as the ones below
	push(Job{Kind: KindCheck, Repo: "acme/control", PR: 1})
	for _, r := range []string{"other/a", "acme/running", "acme/claimed", "acme/wanted", "ACME/b", "acme/c"} {
		push(Job{Kind: KindDrift, Repo: r})
	}
	require.Equal(t, 8, q.Len())

	took, changed := q.TakeBatch(ctx, "acme", 2, applied)
	assert.Equal(t, []string{"acme/held", "ACME/b"}, repos(took), "oldest first, at most n, held by the delay or not")
	assert.Equal(t, 6, q.Len(), "taken drifts leave the depth")
	assert.Equal(t, 2+1+2, q.Running(), "and run: the two first drifts, the apply and the two taken")
	select {
	case <-changed:
		t.Fatal("the change channel is closed before any change")
	default:
	}
	push(Job{Kind: KindDrift, Repo: "acme/held"}) // runs: waits for the batch
	<-changed

	took, _ = q.TakeBatch(ctx, "acme", jobqueue.MaxBatch, applied)
	assert.Equal(t, []string{"acme/c"}, repos(took), "not a repo that runs, nor one the apply claimed or waits to claim")
	took, _ = q.TakeBatch(ctx, "nobody", jobqueue.MaxBatch, applied)
	assert.Empty(t, took)

	done, cancel := context.WithCancel(ctx)
	cancel()
	q.Done(running[0].Key())
	q.Done(running[1].Key())
	require.NoError(t, <-wanted)
	took, _ = q.TakeBatch(done, "acme", jobqueue.MaxBatch, applied)
	assert.Empty(t, took, "a done context takes nothing")

	q.Done(apply.Key())
	require.Equal(t, applied+1, q.Settled())
	took, _ = q.TakeBatch(ctx, "acme", jobqueue.MaxBatch, applied)
	assert.Empty(t, took, "an apply finished since the batch read its head: it may have written a newer head")
	took, _ = q.TakeBatch(ctx, "acme", jobqueue.MaxBatch, q.Settled())
	assert.Equal(t, []string{"acme/running", "acme/claimed", "acme/wanted"}, repos(took), "free once the apply and the runs are done")
	assert.Equal(t, 3, q.Len(), "the check, the other owner and the repo of the batch")
}

// stagingExec is a jobqueue.Stager whose staging waits for release and then fails with stageErr,
// panics with stagePanic, or records the batches its run is given.
type stagingExec struct {
	started    chan struct{} // receives when staging starts
	release    chan struct{}
	stageErr   error
	stagePanic string

	mu      sync.Mutex
	batches [][]string
	alone   []string // the jobs other than drifts, each run on its own
}

func (e *stagingExec) Execute(_ context.Context, j Job, _ jobqueue.Lease) error {
	if j.Kind == KindDrift {
		return errors.New("a staged drift job must not run alone")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.alone = append(e.alone, j.Repo)
	return nil
}

func (e *stagingExec) ExecuteBatch(context.Context, []Job) []error {
	panic("a staged drift batch must not run unstaged")
}

func (e *stagingExec) StageBatch(ctx context.Context) (func(context.Context, []Job) []error, error) {
	e.started <- struct{}{}
	select {
	case <-e.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if e.stagePanic != "" {
		panic(e.stagePanic)
	}
	if e.stageErr != nil {
		return nil, e.stageErr
	}
	return func(_ context.Context, jobs []Job) []error {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.batches = append(e.batches, repos(jobs))
		return make([]error, len(jobs))
	}, nil
}

// stagedPool runs a one-worker Pool over q with exec; stop ends it and waits.
func stagedPool(t *testing.T, q *Queue, exec jobqueue.Executor[Job], m *metrics.Metrics) (stop func()) {
	t.Helper()
	p := &Pool{Queue: q, Workers: 1, Exec: exec, Metrics: m, Now: func() time.Time { return t0 }}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			require.NoError(t, <-stopped)
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitFor waits until cond holds: it checks on every change of q and every millisecond (a
// batch taking drifts changes what runs, not what may run, and closes no change channel).
// Only how long it looks is timed, never what it finds.
func waitFor(t *testing.T, q *Queue, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		_, changed := q.TakeBatch(context.Background(), "", 0, q.Settled())
		if cond() {
			return
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the queue never reached the state awaited")
		}
	}
}

// TestPoolStagedBatchTakesDriftsArrivingMeanwhile: while a drift batch stages (serve: renders a
// new control head), the drifts of its owner that arrive join it instead of waiting in the
// queue; other owners and other jobs wait. One run reconciles them all, each is reported.
func TestPoolStagedBatchTakesDriftsArrivingMeanwhile(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: jobqueue.DefaultQueueSize})
	exec := &stagingExec{started: make(chan struct{}, 10), release: make(chan struct{})}
	m := metrics.New()
	stop := stagedPool(t, q, exec, m)

	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/first", Queued: t0})
	<-exec.started
	for i := range 3 {
		_, _ = q.Push(Job{Kind: KindDrift, Repo: fmt.Sprintf("acme/r%d", i), Queued: t0})
	}
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "other/x", Queued: t0})
	_, _ = q.Push(Job{Kind: KindCheck, Repo: "acme/control", PR: 2, Queued: t0})
	waitFor(t, q, func() bool { return q.Running() == 4 })
	assert.Equal(t, 2, q.Len(), "the other owner and the check wait; the drifts of acme joined the batch")

	close(exec.release)
	<-exec.started // the other owner's batch stages next (released already)
	waitFor(t, q, func() bool { return q.Len() == 0 && q.Running() == 0 })
	stop()
	exec.mu.Lock()
	defer exec.mu.Unlock()
	assert.Equal(t, [][]string{{"acme/first", "acme/r0", "acme/r1", "acme/r2"}, {"other/x"}}, exec.batches)
	assert.Equal(t, []string{"acme/control"}, exec.alone, "the check runs on its own")
	counts := jobCounts(t, m)
	assert.Equal(t, uint64(5), counts["wait_seconds drift"], "every delivery is counted")
	assert.Equal(t, uint64(5), counts["duration_seconds drift/ok"])
	assert.Equal(t, uint64(1), counts["duration_seconds check/ok"])
}

// TestPoolStagedBatchIsBounded: a batch that fills up while it stages takes no more; the rest
// wait for the next batch.
func TestPoolStagedBatchIsBounded(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: jobqueue.DefaultQueueSize})
	exec := &stagingExec{started: make(chan struct{}, 10), release: make(chan struct{})}
	stop := stagedPool(t, q, exec, nil)
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/first"})
	<-exec.started
	for i := range jobqueue.MaxBatch + 4 {
		_, _ = q.Push(Job{Kind: KindDrift, Repo: fmt.Sprintf("acme/r%03d", i)})
	}
	waitFor(t, q, func() bool { return q.Running() == jobqueue.MaxBatch })
	assert.Equal(t, 5, q.Len())
	close(exec.release)
	waitFor(t, q, func() bool { return q.Len() == 0 && q.Running() == 0 })
	stop()
	exec.mu.Lock()
	defer exec.mu.Unlock()
	require.Len(t, exec.batches, 2)
	assert.Len(t, exec.batches[0], jobqueue.MaxBatch)
	assert.Equal(t, []string{"acme/r099", "acme/r100", "acme/r101", "acme/r102", "acme/r103"}, exec.batches[1])
}

// TestPoolStagingFailureFailsTheBatch: staging that fails (a control repo that cannot be read,
// a panic) fails every job of the batch, those taken meanwhile too, and the worker goes on.
func TestPoolStagingFailureFailsTheBatch(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		exec    *stagingExec
		outcome string
	}{
		{"error", &stagingExec{stageErr: errors.New("control repo unreadable")}, "error"},
		{"panic", &stagingExec{stagePanic: "boom"}, "panic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.exec.started, tc.exec.release = make(chan struct{}, 10), make(chan struct{})
			q := NewQueue(jobqueue.Config{Capacity: 10})
			m := metrics.New()
			stop := stagedPool(t, q, tc.exec, m)
			_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
			<-tc.exec.started
			_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
			waitFor(t, q, func() bool { return q.Running() == 2 })
			close(tc.exec.release)
			waitFor(t, q, func() bool { return q.Running() == 0 })
			stop()
			assert.Equal(t, uint64(2), jobCounts(t, m)["duration_seconds drift/"+tc.outcome])
			assert.Empty(t, tc.exec.batches)
		})
	}
}

// TestPoolStoppingBatchTakesNoMore: once the pool stops, a staging batch takes in no more
// drifts; they are handed back, and the batch still finishes.
func TestPoolStoppingBatchTakesNoMore(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	exec := &stagingExec{started: make(chan struct{}, 10), release: make(chan struct{})}
	var logs syncBuffer
	p := &Pool{Queue: q, Workers: 1, Exec: exec, Grace: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- p.Run(ctx) }()
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
	<-exec.started
	cancel()
	_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/b"})
	close(exec.release)
	require.NoError(t, <-stopped)
	assert.Equal(t, [][]string{{"acme/a"}}, exec.batches)
	assert.Contains(t, logs.String(), `msg="job handed back to the next resync" kind=drift repo=acme/b`)
}

// syncBuffer is a bytes.Buffer safe for concurrent writes (a logger's output).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServiceStagedDriftsUseTheStagedHead: the run StageBatch returns reconciles against the
// head it staged (its render is what the batch waited for), runs BeforeJob for each job it is
// given, and reads the org once for the batch.
func TestServiceStagedDriftsUseTheStagedHead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	snaps, ctl, sha := localFleet(t)
	fg := &orgCounter{snapshotCounter: snaps}
	var admitted []string
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		BeforeJob: func(_ context.Context, j Job) error {
			admitted = append(admitted, j.Repo)
			if j.Repo == "acme/refused" {
				return errors.New("refused")
			}
			return nil
		},
		Runner: app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return fg, nil }),
	})
	require.NoError(t, err)
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: sha, Reason: "resync"}, nil))
	all := fg.take()
	fg.takeOrg()
	admitted = nil

	run, err := svc.StageBatch(ctx)
	require.NoError(t, err)
	assert.Empty(t, admitted, "staging admits no job: the Pool may add some before the run")
	newer := ctl.push(edit(t, readControl(t), "README.md", "", "a newer head, not staged\n"))
	require.NotEqual(t, sha, newer)
	jobs := []Job{{Kind: KindDrift, Repo: "acme/" + all[0]}, {Kind: KindDrift, Repo: "acme/refused"}, {Kind: KindDrift, Repo: "acme/" + all[1]}}
	errs := run(ctx, jobs)
	require.Len(t, errs, 3)
	assert.NoError(t, errs[0])
	assert.EqualError(t, errs[1], "refused")
	assert.NoError(t, errs[2])
	assert.Equal(t, []string{"acme/" + all[0], "acme/refused", "acme/" + all[1]}, admitted)
	assert.Equal(t, []string{all[0], all[1]}, fg.take(), "one run over the admitted repos")
	org, list := fg.takeOrg()
	assert.Equal(t, 1, org, "the org is read once for the batch")
	assert.Zero(t, list, "a run limited to some repos lists no managed repos")
	assert.Equal(t, sha, svc.Reports().Source, "reconciled against the head it staged")
}

// gatedControl is memControl whose Load reports each call on loading and waits for release.
type gatedControl struct {
	*memControl
	loading chan string
	release chan struct{}
}

func (c *gatedControl) Load(ctx context.Context, sha string) (*control.Repo, error) {
	c.loading <- sha
	<-c.release
	return c.memControl.Load(ctx, sha)
}

// TestServiceRendersAFewCommitsAtOnce: with more commits to render than maxRenders (checks of
// many pull request heads on many workers), maxRenders load and render at once; the others
// wait for a slot, and every one is rendered in the end.
func TestServiceRendersAFewCommitsAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ctl := &gatedControl{memControl: &memControl{commits: map[string]fs.FS{}}, loading: make(chan string, 2*maxRenders), release: make(chan struct{})}
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		Runner: app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) {
			return nil, errors.New("no forge")
		}),
	})
	require.NoError(t, err)
	var shas []string
	for i := range maxRenders + 2 {
		shas = append(shas, ctl.push(edit(t, readControl(t), fmt.Sprintf("notes/%d.md", i), "", "a note\n")))
	}
	var wg sync.WaitGroup
	errs := make([]error, len(shas))
	for i, sha := range shas {
		wg.Go(func() { errs[i] = svc.fleetEntry(ctx, sha).err })
	}
	for range maxRenders {
		<-ctl.loading
	}
	select {
	case sha := <-ctl.loading:
		t.Fatalf("a commit (%s) started loading while %d others did", sha[:7], maxRenders)
	case <-time.After(50 * time.Millisecond): // a bound on how long to look, not on what is found
	}
	close(ctl.release)
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, shas[i])
	}
	assert.Len(t, ctl.loading, 2, "the two that waited for a slot loaded once one was free")
}
