package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// TestResyncQueuesAFullApplyAtOnce: the resync loop queues a full apply of the fleet as soon
// as it starts (the first resync after a restart finds whatever is left to do) and reports
// readiness once; a full queue does not report readiness and does not block.
func TestResyncQueuesAFullApplyAtOnce(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	q := NewQueue(jobqueue.Config{Capacity: 1})
	ctx, cancel := context.WithCancel(context.Background())
	ready := 0
	r := &Resync{Queue: q, Control: "acme/control", Interval: time.Hour, Now: func() time.Time { return at }}
	r.Run(ctx, func() {
		ready++
		cancel() // stop after the first round
	})
	assert.Equal(t, 1, ready, "readiness is reported once, when the first resync is queued")
	require.Equal(t, 1, q.Len())
	jobs := q.Drain()
	require.Len(t, jobs, 1)
	assert.Equal(t, KindApply, jobs[0].Kind)
	assert.Equal(t, "acme/control", jobs[0].Repo)
	assert.Equal(t, "resync", jobs[0].Reason)
	assert.False(t, jobs[0].Incremental, "a resync plans every repo")
	assert.Equal(t, at, jobs[0].Queued, "queued at the injected clock")

	full := NewQueue(jobqueue.Config{Capacity: 1})
	_, err := full.Push(Job{Kind: KindCheck, Repo: "acme/control", PR: 1})
	require.NoError(t, err)
	stopped, stop := context.WithCancel(context.Background())
	stop()
	called := false
	(&Resync{Queue: full, Control: "acme/control"}).Run(stopped, func() { called = true })
	assert.False(t, called, "a resync that could not be queued does not make the service ready")
	assert.Equal(t, 1, full.Len(), "the waiting job stays")
}

// TestServiceRefusesBadJobsAndConfigs: a service needs its control source, renderer and
// forges; an unknown job kind is an error; a job BeforeJob refuses does not run.
func TestServiceRefusesBadJobsAndConfigs(t *testing.T) {
	t.Parallel()
	_, err := NewService(ServiceConfig{Runner: app.Config{}.ServiceRunner("acme/control", nil)})
	assert.ErrorContains(t, err, "control source and runner are required")

	ctl := newCountingControl()
	ctl.push(readControl(t))
	opened := 0
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		BeforeJob: func(_ context.Context, j Job) error {
			if j.Reason == "refused" {
				return errors.New("injected fault")
			}
			return nil
		},
		Runner: app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) {
			opened++
			return nil, errors.New("no forge in this test")
		}),
	})
	require.NoError(t, err)
	ctx := context.Background()
	assert.ErrorContains(t, svc.Execute(ctx, Job{Kind: "rebase", Repo: "acme/control"}, nil), `unknown job kind "rebase"`)
	assert.ErrorContains(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", Reason: "refused"}, nil), "injected fault")
	assert.Zero(t, opened, "a refused job opens no forge")
	assert.Empty(t, ctl.loads, "and reads no control repo")
	assert.ErrorContains(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control"}, nil), "no forge in this test", "a forge error fails the job")
}

// TestDriftOutsideThePlatformOwnerIsIgnored: an event on a repo of another owner (an App
// installed on several orgs) is not fleetbot's to reconcile: no forge is opened.
func TestDriftOutsideThePlatformOwnerIsIgnored(t *testing.T) {
	t.Parallel()
	ctl := newCountingControl()
	ctl.push(readControl(t))
	opened := 0
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		Runner: app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) {
			opened++
			return nil, errors.New("unused")
		}),
	})
	require.NoError(t, err)
	require.NoError(t, svc.Execute(context.Background(), Job{Kind: KindDrift, Repo: "globex/cluster-edge-1", Reason: "push"}, nil))
	assert.Zero(t, opened)
}

// TestApplyOnAnInvalidControlRepoNamesTheCommit: a push of an invalid control repo fails the
// job with the commit and every problem, and writes nothing.
func TestApplyOnAnInvalidControlRepoNamesTheCommit(t *testing.T) {
	t.Parallel()
	e := newCheckEnv(t, nil, nil)
	sha := e.ctl.push(edit(t, readControl(t), "clusters/edge-2.yaml", "", newCluster+"spec:\n  bogus: 1\n"))
	err := e.svc.Execute(context.Background(), Job{Kind: KindApply, Repo: "acme/control", Reason: "push", Incremental: true}, nil)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "control repo at "+sha[:7]+": "), err.Error())
	assert.Contains(t, err.Error(), "clusters/edge-2.yaml")
	assert.Empty(t, e.forgeModes(), "no forge opened")
	assert.Empty(t, forgeState(t, e.dir))
	err = e.svc.Execute(context.Background(), Job{Kind: KindDrift, Repo: "acme/cluster-edge-1", Reason: "push"}, nil)
	assert.ErrorContains(t, err, "control repo at "+sha[:7], "a drift job on an invalid head fails the same way")
}
