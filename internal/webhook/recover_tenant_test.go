package webhook

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// fakeTenantPulls is GitHub's view of the workspace and cluster repos' open pull requests and
// of the tenant check runs on their heads (those memTenants recorded: a run not finished is
// in_progress since it started), counting the batched reads as requests.
type fakeTenantPulls struct {
	mu      sync.Mutex
	pulls   []TenantPull
	tenants *memTenants
	started map[int64]time.Time
	// lists and reads count the calls; listed is the repos of the last list.
	lists, reads int
	listed       []string
	readHeads    int
}

func (f *fakeTenantPulls) OpenPullRequests(_ context.Context, owner string, repos []string) ([]TenantPull, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lists++
	f.listed = repos
	var out []TenantPull
	for _, p := range f.pulls {
		for _, r := range repos {
			if p.Repo == owner+"/"+r {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

func (f *fakeTenantPulls) LatestChecks(_ context.Context, _ string, pulls []TenantPull) (map[TenantPull]CheckState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	f.readHeads += len(pulls)
	f.tenants.mu.Lock()
	defer f.tenants.mu.Unlock()
	out := map[TenantPull]CheckState{}
	for _, p := range pulls {
		for i, r := range f.tenants.runs {
			if r.repo != p.Repo || r.sha != p.Head {
				continue
			}
			id := int64(i + 1)
			st := CheckState{ID: id, Status: "in_progress", StartedAt: f.started[id]}
			if r.finished {
				st.Status = "completed"
			}
			out[p] = st // the newest (highest id) last
		}
	}
	return out, nil
}

// tenantRecoverEnv is a fresh service (a new process) with tenant checks on, over the example
// control repo, whose cluster repo cluster-prod-eu-1 has one open pull request.
type tenantRecoverEnv struct {
	svc     *Service
	tenants *memTenants
	pulls   *fakeTenantPulls
	clock   *fakeClock
	pull    TenantPull
}

func newTenantRecoverEnv(t *testing.T) *tenantRecoverEnv {
	t.Helper()
	ctl := &memControl{commits: map[string]fs.FS{}}
	ctl.push(readControl(t))
	e := &tenantRecoverEnv{tenants: &memTenants{}, clock: &fakeClock{now: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)},
		pull: TenantPull{Repo: "acme/cluster-prod-eu-1", Number: 3, Head: strings.Repeat("a", 40)}}
	e.tenants.commit(e.pull.Repo, e.pull.Head, map[string]string{"apps/kustomization.yaml": kustomization("crb.yaml"), "apps/crb.yaml": clusterRB})
	e.pulls = &fakeTenantPulls{pulls: []TenantPull{e.pull}, tenants: e.tenants, started: map[int64]time.Time{}}
	var err error
	e.svc, err = NewService(ServiceConfig{
		Control: ctl, Tenants: e.tenants, TenantPulls: e.pulls,
		TenantCheck: app.RequiredCheck{Context: checkrun.DefaultTenantCheckName, AppID: 12},
		Runner: app.Config{Now: e.clock.Now}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) {
			return nil, errors.New("recovering tenant checks opens no forge")
		}),
	})
	require.NoError(t, err)
	return e
}

// resync runs one resync of a fresh queue with the service's recovery and returns the tenant
// jobs it queued, the apply aside.
func (e *tenantRecoverEnv) resync(t *testing.T) []Job {
	t.Helper()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	ctx, cancel := context.WithCancel(context.Background())
	// The recovery reads the control head with the resync's context: it ends the run after.
	(&Resync{Queue: q, Control: "acme/control", Interval: time.Hour,
		Recover: func(ctx context.Context) ([]Job, error) {
			defer cancel()
			return e.svc.Recover(ctx, "acme/control")
		}}).Run(ctx, nil)
	var out []Job
	for _, j := range q.Drain() {
		if j.Kind == KindTenant {
			out = append(out, j)
		}
	}
	return out
}

// TestResyncRecoversATenantCheckLostWithItsProcess: serve acknowledged a cluster repo's
// pull_request delivery and was killed before its tenant job ran: GitHub shows the head with no
// tenant check run, and the repo's protection requires one. The next process's first resync
// queues the tenant check of that head, which completes on it. A resync costs one batched list
// of every workspace and cluster repo's open pull requests and one batched read of the heads'
// check runs; a head seen completed costs no read after.
func TestResyncRecoversATenantCheckLostWithItsProcess(t *testing.T) {
	t.Parallel()
	e := newTenantRecoverEnv(t)
	jobs := e.resync(t)
	require.Len(t, jobs, 1, "the open pull request without a tenant check")
	assert.Equal(t, Job{Kind: KindTenant, Repo: e.pull.Repo, SHA: e.pull.Head, PR: 3, Reason: ReasonRecoverMissing, Queued: e.clock.Now()}, jobs[0])
	assert.Equal(t, 1, e.pulls.lists, "one list for every repo of the owner")
	assert.Equal(t, 1, e.pulls.reads, "one read for every head")
	assert.Contains(t, e.pulls.listed, "cluster-prod-eu-1")
	assert.Contains(t, e.pulls.listed, "workspace-payments")
	assert.NotContains(t, e.pulls.listed, "control")

	require.NoError(t, e.svc.Execute(context.Background(), jobs[0], nil))
	runs := e.tenants.taken()
	require.Len(t, runs, 1)
	assert.Equal(t, e.pull.Head, runs[0].sha, "the tenant check run is on the pull request's head")
	assert.True(t, runs[0].finished)
	assert.Equal(t, checkrun.ConclusionSuccess, runs[0].res.Conclusion)
	e.tenants.runs = runs // GitHub keeps the run

	assert.Empty(t, e.resync(t), "a completed tenant check is not queued again")
	assert.Equal(t, 2, e.pulls.reads, "the next resync read the head once more and saw it completed")
	assert.Empty(t, e.resync(t))
	assert.Equal(t, 3, e.pulls.lists, "one list a resync")
	assert.Equal(t, 2, e.pulls.reads, "a head seen completed costs no read")
	assert.Equal(t, 2, e.pulls.readHeads)
}

// TestResyncResumesATenantCheckStuckInProgress: a process killed during a tenant job left its
// check run in_progress. A resync within --stuck-check leaves it; past it, it queues the check
// with that run, and the job completes that run instead of starting another.
func TestResyncResumesATenantCheckStuckInProgress(t *testing.T) {
	t.Parallel()
	e := newTenantRecoverEnv(t)
	started := e.clock.Now()
	id, err := e.tenants.Start(context.Background(), e.pull.Repo, e.pull.Head)
	require.NoError(t, err)
	e.pulls.started[id] = started
	e.svc.cfg.StuckCheck = 20 * time.Minute

	e.clock.now = started.Add(20*time.Minute - time.Second)
	assert.Empty(t, e.resync(t), "within the bound: possibly still running")

	e.clock.now = started.Add(20*time.Minute + time.Second)
	jobs := e.resync(t)
	require.Len(t, jobs, 1)
	assert.Equal(t, ReasonRecoverStuck, jobs[0].Reason)
	assert.Equal(t, id, jobs[0].CheckRun, "the stuck run is the one to complete")
	require.NoError(t, e.svc.Execute(context.Background(), jobs[0], nil))
	runs := e.tenants.taken()
	require.Len(t, runs, 1, "no second tenant check run was started")
	assert.True(t, runs[0].finished, "the stuck run is completed")
	assert.Equal(t, checkrun.ConclusionSuccess, runs[0].res.Conclusion)
}

// TestResyncRecoversNoTenantCheckWithoutTheCheckOrWhereItCannotBeWritten: without a tenant
// check, or on an owner whose installation may not write check runs, nothing is read or queued.
func TestResyncRecoversNoTenantCheckWithoutTheCheckOrWhereItCannotBeWritten(t *testing.T) {
	t.Parallel()
	e := newTenantRecoverEnv(t)
	e.svc.cfg.TenantCheck.Context = ""
	assert.Empty(t, e.resync(t))
	assert.Zero(t, e.pulls.lists)

	e = newTenantRecoverEnv(t)
	e.svc.granted["acme"] = false
	assert.Empty(t, e.resync(t))
	assert.Zero(t, e.pulls.lists, "no check run can be written on acme: nothing to recover")
}
