package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

func nextBatch(t *testing.T, q *Queue) []Job {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	jobs, err := q.NextBatch(ctx)
	require.NoError(t, err)
	return jobs
}

func repos(jobs []Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Repo
	}
	return out
}

// TestQueueBatchesWaitingDriftsOfOneOwner: a worker taking a drift takes every other runnable
// drift of the same owner, oldest first, at most jobqueue.MaxBatch; other owners, other kinds and
// drifts whose repo is running stay; the depth gauge (Len) drops by the whole batch.
func TestQueueBatchesWaitingDriftsOfOneOwner(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: jobqueue.DefaultQueueSize})
	push := func(j Job) {
		t.Helper()
		_, err := q.Push(j)
		require.NoError(t, err)
	}
	push(Job{Kind: KindDrift, Repo: "acme/running"})
	first := nextBatch(t, q)
	require.Equal(t, []string{"acme/running"}, repos(first), "a lone drift comes alone")

	push(Job{Kind: KindCheck, Repo: "acme/control", PR: 3})
	for i := range jobqueue.MaxBatch + 5 {
		push(Job{Kind: KindDrift, Repo: fmt.Sprintf("acme/r%03d", i), Delivery: fmt.Sprint(i)})
		if i == 2 {
			push(Job{Kind: KindDrift, Repo: "other/x"})
			push(Job{Kind: KindDrift, Repo: "acme/running"}) // waits for the running one
		}
	}
	push(Job{Kind: KindDrift, Repo: "ACME/r000", Delivery: "again"}) // coalesces by key
	assert.Equal(t, 1+jobqueue.MaxBatch+5+2, q.Len())

	check := nextBatch(t, q)
	require.Len(t, check, 1, "a check comes alone")
	assert.Equal(t, KindCheck, check[0].Kind)

	batch := nextBatch(t, q)
	require.Len(t, batch, jobqueue.MaxBatch, "bounded")
	for i, j := range batch {
		assert.Equal(t, fmt.Sprintf("acme/r%03d", i), strings.ToLower(j.Repo), "oldest first")
	}
	assert.Equal(t, 1, batch[0].Merged, "the coalesced delivery is counted")
	assert.Equal(t, 5+2, q.Len(), "the depth drops by the whole batch")
	assert.Equal(t, 2+jobqueue.MaxBatch, q.Running(), "the running drift, the check and the batch")

	rest := nextBatch(t, q)
	assert.Equal(t, []string{"other/x"}, repos(rest), "another owner is its own batch")
	rest = nextBatch(t, q)
	assert.Equal(t, []string{"acme/r100", "acme/r101", "acme/r102", "acme/r103", "acme/r104"}, repos(rest),
		"the remainder, without the repo that still runs")
	assert.Equal(t, 1, q.Len())

	q.Done(first[0].Key())
	again := nextBatch(t, q)
	assert.Equal(t, []string{"acme/running"}, repos(again), "runs once its earlier run is done")
	assert.Zero(t, q.Len())
}

// TestQueueApplyStillWinsOverDriftBatches: a waiting apply absorbs drifts (none is left to
// batch), and an apply pushed behind a running batch enters its exclusive phase only once every
// drift of it is done.
func TestQueueApplyStillWinsOverDriftBatches(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	_, _ = q.Push(Job{Kind: KindApply, Repo: "acme/control"})
	for i := range 3 {
		c, err := q.Push(Job{Kind: KindDrift, Repo: fmt.Sprintf("acme/r%d", i)})
		require.NoError(t, err)
		assert.True(t, c, "absorbed by the waiting apply")
	}
	apply := nextBatch(t, q)
	require.Len(t, apply, 1)
	assert.Equal(t, 3, apply[0].Merged)
	q.Done(apply[0].Key())

	for i := range 3 {
		_, _ = q.Push(Job{Kind: KindDrift, Repo: fmt.Sprintf("acme/r%d", i)})
	}
	batch := nextBatch(t, q)
	require.Len(t, batch, 3)
	_, _ = q.Push(Job{Kind: KindApply, Repo: "acme/control"})
	assert.Equal(t, KindApply, next(t, q).Kind, "it starts (reading the control repo) beside the batch")
	entered := make(chan error, 1)
	go func() { entered <- q.Exclusive(context.Background()) }()
	for _, j := range batch[:2] {
		q.Done(j.Key())
	}
	select {
	case err := <-entered:
		t.Fatalf("the exclusive phase began while a drift of the batch ran (%v)", err)
	default:
	}
	q.Done(batch[2].Key())
	require.NoError(t, <-entered)
}

// batchExec records the batches it is given and fails the repos named in fail.
type batchExec struct {
	mu      sync.Mutex
	batches [][]string
	single  []string
	fail    map[string]bool
	called  chan struct{}
}

func (e *batchExec) Execute(_ context.Context, j Job, _ jobqueue.Lease) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.single = append(e.single, j.Repo)
	return nil
}

func (e *batchExec) ExecuteBatch(_ context.Context, jobs []Job) []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.batches = append(e.batches, repos(jobs))
	defer func() { e.called <- struct{}{} }()
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		if e.fail[j.Repo] {
			errs[i] = errors.New(j.Repo + ": boom")
		}
	}
	return errs
}

// jobCounts is the count of the job duration histogram by kind/outcome, and of the wait one by kind.
func jobCounts(t *testing.T, m *metrics.Metrics) map[string]uint64 {
	t.Helper()
	families, err := m.Registry().Gather()
	require.NoError(t, err)
	out := map[string]uint64{}
	for _, fam := range families {
		if !strings.HasPrefix(fam.GetName(), "fleetbot_job_") {
			continue
		}
		for _, mt := range fam.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			out[strings.TrimPrefix(fam.GetName(), "fleetbot_job_")+" "+strings.Join(labels, "/")] = mt.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// TestPoolRunsWaitingDriftsAsOneBatch: drifts waiting when the worker looks are one call of
// the executor; every delivery is still counted (wait and duration), a failure only on its repo.
func TestPoolRunsWaitingDriftsAsOneBatch(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	for i := range 5 {
		_, _ = q.Push(Job{Kind: KindDrift, Repo: fmt.Sprintf("acme/r%d", i), Queued: t0})
	}
	exec := &batchExec{fail: map[string]bool{"acme/r3": true}, called: make(chan struct{}, 10)}
	m := metrics.New()
	p := &Pool{Queue: q, Workers: 1, Exec: exec, Metrics: m, Now: func() time.Time { return t0.Add(time.Second) }}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- p.Run(ctx) }()
	<-exec.called
	cancel() // Run returns once the worker reported the batch it is in
	require.NoError(t, <-stopped)
	assert.Zero(t, q.Len())
	assert.Zero(t, q.Running())
	exec.mu.Lock()
	defer exec.mu.Unlock()
	assert.Equal(t, [][]string{{"acme/r0", "acme/r1", "acme/r2", "acme/r3", "acme/r4"}}, exec.batches)
	assert.Empty(t, exec.single)
	assert.Equal(t, map[string]uint64{"wait_seconds drift": 5, "duration_seconds drift/ok": 4, "duration_seconds drift/error": 1}, jobCounts(t, m))
}

// TestPoolBatchWithoutABatcherRunsEachJob: an executor that cannot batch gets each job alone.
func TestPoolBatchWithoutABatcherRunsEachJob(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	for i := range 3 {
		_, _ = q.Push(Job{Kind: KindDrift, Repo: fmt.Sprintf("acme/r%d", i)})
	}
	var mu sync.Mutex
	var ran []string
	all := make(chan struct{})
	p := &Pool{Queue: q, Workers: 1, Exec: execFunc(func(_ context.Context, j Job) error {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, j.Repo)
		if len(ran) == 3 {
			close(all)
		}
		return nil
	})}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- p.Run(ctx) }()
	<-all
	cancel()
	require.NoError(t, <-stopped)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"acme/r0", "acme/r1", "acme/r2"}, ran)
}

// orgCounter is the local forge counting org-level reads and the repos each run reads.
type orgCounter struct {
	*snapshotCounter
	mu        sync.Mutex
	org, list int
	fail      string // a repo whose snapshot fails
}

func (f *orgCounter) Snapshot(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*pr.Snapshot, error) {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if repo == fail {
		f.snapshotCounter.mu.Lock()
		f.snaps[repo]++
		f.snapshotCounter.mu.Unlock()
		return nil, errors.New("injected snapshot failure")
	}
	return f.snapshotCounter.Snapshot(ctx, owner, repo, defaultBranch, botBranch)
}

func (f *orgCounter) Org(ctx context.Context, owner string) (policy.Org, error) {
	f.mu.Lock()
	f.org++
	f.mu.Unlock()
	return f.snapshotCounter.Org(ctx, owner)
}

func (f *orgCounter) ListManaged(ctx context.Context, owner string) ([]pr.ManagedRepo, error) {
	f.mu.Lock()
	f.list++
	f.mu.Unlock()
	return f.snapshotCounter.ListManaged(ctx, owner)
}

func (f *orgCounter) takeOrg() (org, list int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	org, list, f.org, f.list = f.org, f.list, 0, 0
	return org, list
}

// TestServiceDriftBatchIsOneApply: N drift jobs are one apply limited to their N repos: the
// org is read once, not N times, and only those repos are read. Drifts on a repo of another
// owner or another shard are ignored as when alone; a repo that fails fails its own job only.
func TestServiceDriftBatchIsOneApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	snaps, ctl, sha := localFleet(t)
	fg := &orgCounter{snapshotCounter: snaps}
	var heads int
	var failRepo string
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		BeforeJob: func(_ context.Context, j Job) error {
			heads++
			if j.Repo == failRepo {
				return errors.New("injected")
			}
			return nil
		},
		Runner: app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return fg, nil }),
	})
	require.NoError(t, err)
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: sha, Reason: "resync"}, nil))
	all := fg.take()
	require.Len(t, all, 6)
	fg.takeOrg()

	// One lone drift: one org read, one repo, as before.
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindDrift, Repo: "acme/" + all[0]}, nil))
	org, list := fg.takeOrg()
	assert.Equal(t, []string{all[0]}, fg.take())
	require.Positive(t, org+list, "the fake counts the org-level reads")
	lone := org + list

	var jobs []Job
	for _, r := range all {
		jobs = append(jobs, Job{Kind: KindDrift, Repo: "acme/" + r, Delivery: r})
	}
	jobs = append(jobs, Job{Kind: KindDrift, Repo: "elsewhere/" + all[1]})
	errs := svc.ExecuteBatch(ctx, jobs)
	require.Len(t, errs, len(jobs))
	for i, err := range errs {
		assert.NoError(t, err, jobs[i].Repo)
	}
	org, list = fg.takeOrg()
	assert.Equal(t, lone, org+list, "org-level reads once for %d repos, not %d times", len(all), len(all))
	assert.Equal(t, all, fg.take(), "exactly the drifted repos of the owner are read")

	// A batch of repos of another owner only reads nothing.
	errs = svc.ExecuteBatch(ctx, []Job{{Kind: KindDrift, Repo: "elsewhere/a"}, {Kind: KindDrift, Repo: "elsewhere/b"}})
	assert.Equal(t, []error{nil, nil}, errs)
	org, list = fg.takeOrg()
	assert.Zero(t, org+list)
	assert.Empty(t, fg.take())

	// A job that fails before the run fails alone; the others still run together.
	failRepo = "acme/" + all[2]
	errs = svc.ExecuteBatch(ctx, jobs[:4])
	for i, err := range errs {
		if i == 2 {
			assert.EqualError(t, err, "injected")
		} else {
			assert.NoError(t, err, jobs[i].Repo)
		}
	}
	want := []string{all[0], all[1], all[3]}
	sort.Strings(want)
	assert.Equal(t, want, fg.take())
	org, list = fg.takeOrg()
	assert.Equal(t, lone, org+list, "one run for the three")

	// A repo that fails in the run fails its own job only.
	failRepo = ""
	fg.mu.Lock()
	fg.fail = all[1]
	fg.mu.Unlock()
	errs = svc.ExecuteBatch(ctx, jobs[:4])
	for i, err := range errs {
		if i == 1 {
			require.Error(t, err)
			assert.Contains(t, err.Error(), "injected snapshot failure")
			assert.Contains(t, err.Error(), all[1])
		} else {
			assert.NoError(t, err, jobs[i].Repo)
		}
	}
	org, list = fg.takeOrg()
	assert.Equal(t, lone, org+list, "still one run (org %d, list %d)", org, list)
}

// TestShardedServiceDriftBatch: a batch mixing repos of both shards reads only the replica's own.
func TestShardedServiceDriftBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fg, ctl, sha := localFleet(t)
	full, err := NewService(ServiceConfig{
		Control: ctl,
		Runner:  app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return fg, nil }),
	})
	require.NoError(t, err)
	require.NoError(t, full.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: sha, Reason: "resync"}, nil))
	all := fg.take()
	shard := reconcile.Shard{Index: 0, Count: 2}
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		Runner:  app.Config{Shard: shard}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return fg, nil }),
	})
	require.NoError(t, err)
	var jobs []Job
	var own []string
	for _, r := range all {
		jobs = append(jobs, Job{Kind: KindDrift, Repo: "acme/" + r})
		if shard.Owns(r) {
			own = append(own, r)
		}
	}
	require.NotEmpty(t, own)
	require.Less(t, len(own), len(all))
	for i, err := range svc.ExecuteBatch(ctx, jobs) {
		assert.NoError(t, err, jobs[i].Repo)
	}
	assert.Equal(t, own, fg.take())
}

// TestDriftReadsAccessAfreshOnlyForAccessEvents: a drift for a content event (a push, a merged
// pull request) runs on the apply forge, which trusts the access it observed recently (those
// events cannot change teams, collaborators or protection); a drift for an access event
// (repository, member, team, branch_protection_rule) runs on the drift forge, which reads them
// afresh, and so does a batch or a coalesced job holding one.
func TestDriftReadsAccessAfreshOnlyForAccessEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	snaps, ctl, sha := localFleet(t)
	fg := &orgCounter{snapshotCounter: snaps}
	var modes []app.ForgeMode
	var heads int
	svc, err := NewService(ServiceConfig{
		Control: &headCounter{memControl: ctl, n: &heads},
		Runner: app.Config{}.ServiceRunner("acme/control", func(_ context.Context, _ string, m app.ForgeMode) (reconcile.Forge, error) {
			modes = append(modes, m)
			return fg, nil
		}),
	})
	require.NoError(t, err)
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: sha, Reason: "resync"}, nil))
	all := fg.take()
	require.GreaterOrEqual(t, len(all), 2)
	modes, heads = nil, 0

	push := Job{Kind: KindDrift, Repo: "acme/" + all[0], Reason: "push"}
	merged := Job{Kind: KindDrift, Repo: "acme/" + all[1], Reason: "pull_request.closed"}
	member := Job{Kind: KindDrift, Repo: "acme/" + all[1], Reason: "member.added", Access: true}

	require.NoError(t, svc.Execute(ctx, push, nil))
	assert.Equal(t, []app.ForgeMode{app.ForgeApply}, modes, "a push cannot change access: the apply forge's observation stands")
	assert.Equal(t, 1, heads, "one read of the control head per drift")
	modes, heads = nil, 0
	require.Equal(t, []error{nil, nil}, svc.ExecuteBatch(ctx, []Job{push, merged}))
	assert.Equal(t, []app.ForgeMode{app.ForgeApply}, modes)
	assert.Equal(t, 1, heads, "one read of the control head per batch")
	modes = nil
	require.NoError(t, svc.Execute(ctx, member, nil))
	assert.Equal(t, []app.ForgeMode{app.ForgeDrift}, modes, "a collaborator added: read access afresh")
	modes = nil
	require.Equal(t, []error{nil, nil}, svc.ExecuteBatch(ctx, []Job{push, member}))
	assert.Equal(t, []app.ForgeMode{app.ForgeDrift}, modes, "a batch with one access event reads access afresh")

	// Coalescing keeps the need: an access event followed by a push on the same repo.
	assert.True(t, member.merge(Job{Kind: KindDrift, Repo: member.Repo, Reason: "push"}).Access)
	assert.True(t, (Job{Kind: KindDrift, Repo: member.Repo, Reason: "push"}).merge(member).Access)
	assert.False(t, push.merge(push).Access)
}

// headCounter counts the control head reads.
type headCounter struct {
	*memControl
	n *int
}

func (h *headCounter) Head(ctx context.Context) (string, error) {
	*h.n++
	return h.memControl.Head(ctx)
}

// localFleet is a local forge on a fixed clock, counting snapshots, and the example control
// repo pushed to an in-memory control source at sha.
func localFleet(t *testing.T) (*snapshotCounter, *memControl, string) {
	t.Helper()
	clock := func() time.Time { return time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC) }
	f, err := local.Open(t.TempDir(), local.Options{Now: clock})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	ctl := &memControl{commits: map[string]fs.FS{}}
	return &snapshotCounter{Forge: f, snaps: map[string]int{}}, ctl, ctl.push(readControl(t))
}

// phasedExec holds each drift until release is closed, and records for an apply when Execute
// was called and when it wrote; prepares says whether it enters the exclusive phase itself.
type phasedExec struct {
	prepares         bool
	driftStarted     chan struct{}
	release          chan struct{}
	applyCalled      chan struct{}
	mu               sync.Mutex
	driftsDone       int
	wroteAfterDrifts bool
}

func (e *phasedExec) PreparesClaims() bool { return e.prepares }

func (e *phasedExec) Execute(ctx context.Context, j Job, lease jobqueue.Lease) error {
	if j.Kind == KindDrift {
		e.driftStarted <- struct{}{}
		<-e.release
		e.mu.Lock()
		e.driftsDone++
		e.mu.Unlock()
		return nil
	}
	close(e.applyCalled)
	if err := lease.Claim(ctx, nil, true); err != nil {
		return err
	}
	e.mu.Lock()
	e.wroteAfterDrifts = e.driftsDone == 1
	e.mu.Unlock()
	return nil
}

// TestPoolApplyPhases: an executor that prepares its applies is called while a drift runs and
// writes only after it (its jobqueue.Lease's Claim); for any other executor the Pool itself waits for the drift
// before calling it.
func TestPoolApplyPhases(t *testing.T) {
	t.Parallel()
	for _, prepares := range []bool{true, false} {
		t.Run(fmt.Sprintf("prepares=%v", prepares), func(t *testing.T) {
			t.Parallel()
			q := NewQueue(jobqueue.Config{Capacity: 10})
			exec := &phasedExec{prepares: prepares, driftStarted: make(chan struct{}, 1), release: make(chan struct{}),
				applyCalled: make(chan struct{})}
			p := &Pool{Queue: q, Workers: 2, Exec: exec}
			ctx, cancel := context.WithCancel(context.Background())
			stopped := make(chan error)
			go func() { stopped <- p.Run(ctx) }()
			_, _ = q.Push(Job{Kind: KindDrift, Repo: "acme/a"})
			<-exec.driftStarted
			_, _ = q.Push(Job{Kind: KindApply, Repo: "acme/control", Incremental: true})
			if prepares {
				<-exec.applyCalled // called while the drift still runs
			} else {
				select {
				case <-exec.applyCalled:
					t.Fatal("the apply was executed while a drift ran")
				default:
				}
			}
			close(exec.release)
			<-exec.applyCalled
			require.Eventually(t, func() bool { return q.Running() == 0 && q.Len() == 0 }, 10*time.Second, time.Millisecond)
			cancel()
			require.NoError(t, <-stopped)
			exec.mu.Lock()
			defer exec.mu.Unlock()
			assert.True(t, exec.wroteAfterDrifts, "the apply wrote after the drift was done")
		})
	}
}

// TestDriftOnARepoNotInTheFleetIsIgnoredAtInfo: a drift event about a repo of the owner that
// the control repo does not declare (a ruleset or a protection changed on some other repo)
// reads nothing, fails nothing, and says so at info level with the event and why.
func TestDriftOnARepoNotInTheFleetIsIgnoredAtInfo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	snaps, ctl, sha := localFleet(t)
	fg := &orgCounter{snapshotCounter: snaps}
	var logs bytes.Buffer
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		Logger:  slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Runner:  app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return fg, nil }),
	})
	require.NoError(t, err)
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: sha, Reason: "resync"}, nil))
	all := fg.take()
	fg.takeOrg()
	logs.Reset()

	errs := svc.ExecuteBatch(ctx, []Job{{Kind: KindDrift, Repo: "acme/website", Reason: "repository_ruleset.deleted", Delivery: "d1", Access: true}})
	assert.Equal(t, []error{nil}, errs)
	org, list := fg.takeOrg()
	assert.Zero(t, org+list, "nothing read")
	assert.Empty(t, fg.take())
	assert.Contains(t, logs.String(), `"level":"INFO","msg":"drift on a repo not in the fleet; ignored","repo":"acme/website","reason":"repository_ruleset.deleted","delivery":"d1"`)
	assert.Contains(t, logs.String(), `"why":"the control repo declares no cluster or workspace repo of this name"`)

	// In a batch with a fleet repo, that one is reconciled (any case of its name).
	errs = svc.ExecuteBatch(ctx, []Job{{Kind: KindDrift, Repo: "acme/website"}, {Kind: KindDrift, Repo: "ACME/" + strings.ToUpper(all[0])}})
	assert.Equal(t, []error{nil, nil}, errs)
	assert.Equal(t, []string{all[0]}, fg.take())
}
