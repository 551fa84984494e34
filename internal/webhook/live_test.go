package webhook

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

const (
	liveHead  = "0123456789abcdef0123456789abcdef01234567"
	liveNewer = "89abcdef0123456789abcdef0123456789abcdef"
)

// liveService is a Service over the local forge whose reports hold a first apply of the example
// fleet: every repo with its pull request open.
func liveService(t *testing.T) (*Service, *memControl) {
	t.Helper()
	f, err := local.Open(t.TempDir(), local.Options{Now: func() time.Time { return time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	ctl := &memControl{commits: map[string]fs.FS{}}
	svc, err := NewService(ServiceConfig{Control: ctl,
		Runner: app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return f, nil })})
	require.NoError(t, err)
	ctl.push(readControl(t))
	return svc, ctl
}

func repoReport(t *testing.T, svc *Service, repo string) app.RepoReport {
	t.Helper()
	for _, r := range svc.Reports().Repos {
		if r.Result.Repo == repo {
			return r
		}
	}
	t.Fatalf("no report of %s", repo)
	return app.RepoReport{}
}

// withHead makes the stored result of repo one that observed its default branch at head (the
// local forge's repos are new: fleetbot created them in the apply, before any head).
func withHead(svc *Service, repo, head string) {
	svc.mu.Lock()
	defer svc.mu.Unlock()
	key := strings.ToLower(repo)
	rr := svc.reports.repos[key]
	obs := pr.Observed{Base: head, BaseStatus: pr.StatusSuccess}
	if rr.Result.Observed != nil {
		obs.PR = rr.Result.Observed.PR
	}
	rr.Result.Observed = &obs
	svc.reports.repos[key] = rr
}

// TestServiceTakesLiveEventsOverOlderReads: a Flux failure on a repo's head shows in its
// stored report at once; an apply that read the repo before the status arrived does not undo
// it when it records its result, one that began after it does (it read the status itself);
// a status on a commit the repo's result did not see waits for a result that did; a human's
// push to the bot branch blocks the open pull request; repos the service never reconciled are
// not kept.
func TestServiceTakesLiveEventsOverOlderReads(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, _ := liveService(t)
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"}, nil))
	const repo = "acme/cluster-prod-eu-1"
	withHead(svc, repo, liveHead)

	fail, err := app.NewLiveStatus(liveHead, "kustomization/platform-metallb/0c1d", "failure", "dry-run failed", "https://grafana.example/d/flux")
	require.NoError(t, err)
	older := svc.since() // a run that begins reading now
	assert.Equal(t, Observed, svc.ObserveStatus(repo, fail))
	rr := repoReport(t, svc, repo)
	assert.Equal(t, pr.StatusFailure, rr.Result.Observed.BaseStatus)
	require.Len(t, rr.Result.Observed.BaseFailing, 1)
	assert.Equal(t, "dry-run failed", rr.Result.Observed.BaseFailing[0].Description)

	// The run that began before the status records what it read: healthy. The status stays.
	read := rr.Result
	read.Observed = &pr.Observed{Base: liveHead, BaseStatus: pr.StatusSuccess}
	svc.keepOne(rr.Source, read, older)
	assert.Equal(t, pr.StatusFailure, repoReport(t, svc, repo).Result.Observed.BaseStatus, "an older read does not undo the event")
	// A run that began after it read the status itself: its word counts.
	svc.keepOne(rr.Source, read, svc.since())
	assert.Equal(t, pr.StatusSuccess, repoReport(t, svc, repo).Result.Observed.BaseStatus)

	// A status on a newer commit (the default branch moved) waits for a result that saw it.
	newer, err := app.NewLiveStatus(liveNewer, "kustomization/apps/1", "failure", "apps failed", "")
	require.NoError(t, err)
	before := svc.since()
	assert.Equal(t, ObservedLater, svc.ObserveStatus(repo, newer))
	assert.Equal(t, pr.StatusSuccess, repoReport(t, svc, repo).Result.Observed.BaseStatus)
	read.Observed = &pr.Observed{Base: liveNewer}
	svc.keepOne(rr.Source, read, before)
	got := repoReport(t, svc, repo).Result.Observed
	assert.Equal(t, pr.StatusFailure, got.BaseStatus, "the drift of the merge observed the newer head")
	require.Len(t, got.BaseFailing, 1)
	assert.Equal(t, "kustomization/apps/1", got.BaseFailing[0].Context)

	// A human's push to the bot branch blocks the open pull request; elsewhere it does not.
	p, err := app.NewLivePush("fleetbot/sync", liveNewer, "bob")
	require.NoError(t, err)
	assert.Equal(t, Observed, svc.ObserveBotPush("acme/cluster-edge-1", p))
	edge := repoReport(t, svc, "acme/cluster-edge-1").Result
	assert.Equal(t, pr.ActionBlocked, edge.Action)
	assert.Contains(t, edge.Reason, "was not made by fleetbot (pushed by bob)")
	other, err := app.NewLivePush("feature", liveNewer, "bob")
	require.NoError(t, err)
	assert.Equal(t, NotObservedBranch, svc.ObserveBotPush("acme/cluster-prod-us-1", other))

	// Repos the service never reconciled are not kept.
	assert.Equal(t, NotObservedRepo, svc.ObserveStatus("evil/cluster-x", fail))
	assert.Equal(t, NotObservedRepo, svc.ObserveBotPush("acme/cluster-nowhere", p))
	svc.mu.Lock()
	_, kept := svc.reports.live["evil/cluster-x"]
	svc.mu.Unlock()
	assert.False(t, kept)

	// The next full apply (it began after every event) reads the repos afresh: nothing is left.
	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"}, nil))
	svc.mu.Lock()
	assert.Empty(t, svc.reports.live)
	svc.mu.Unlock()
}

// gatedForge holds one repo's Snapshot (the plan phase) and CreateRepo (the apply phase) until
// the test lets them go, telling it when each is reached.
type gatedForge struct {
	reconcile.Forge
	repo                string
	planned, created    chan struct{}
	releasePlan, create chan struct{}
}

func (g *gatedForge) Snapshot(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*pr.Snapshot, error) {
	if repo == g.repo {
		g.planned <- struct{}{}
		<-g.releasePlan
	}
	return g.Forge.Snapshot(ctx, owner, repo, defaultBranch, botBranch)
}

func (g *gatedForge) CreateRepo(ctx context.Context, spec pr.RepoSpec) error {
	if spec.Repo == g.repo {
		g.created <- struct{}{}
		<-g.create
	}
	return g.Forge.CreateRepo(ctx, spec)
}

// TestServiceShowsTheApplyInProgress: while the first apply of a fleet runs, the reports name
// the run (its revision and every target repo it plans) and its phase, reading and planning
// then applying, with each repo's result as soon as it is done; once it ends, no run.
func TestServiceShowsTheApplyInProgress(t *testing.T) {
	t.Parallel()
	f, err := local.Open(t.TempDir(), local.Options{Now: func() time.Time { return time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	g := &gatedForge{Forge: f, repo: "workspace-search", planned: make(chan struct{}), created: make(chan struct{}),
		releasePlan: make(chan struct{}), create: make(chan struct{})}
	ctl := &memControl{commits: map[string]fs.FS{}}
	svc, err := NewService(ServiceConfig{Control: ctl,
		Runner: app.Config{Concurrency: 1}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return g, nil })})
	require.NoError(t, err)
	sha := ctl.push(readControl(t))
	assert.Nil(t, svc.Reports().Run, "no apply runs")

	done := make(chan error, 1)
	go func() {
		done <- svc.Execute(context.Background(), Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"}, nil)
	}()
	<-g.planned
	reps := svc.Reports()
	require.NotNil(t, reps.Run, "the run is shown while it plans")
	assert.Equal(t, sha, reps.Run.Source)
	assert.Len(t, reps.Run.Repos, 6, "every target repo of the example fleet")
	assert.Equal(t, app.PhasePlan, reps.Run.Phase)
	assert.Less(t, reps.Run.Planned, 6)
	require.NotNil(t, reps.Control, "the first apply names the control repo: labels and waves of the rows")
	assert.Empty(t, reps.Repos, "nothing applied yet")
	close(g.releasePlan)

	<-g.created
	reps = svc.Reports()
	require.NotNil(t, reps.Run)
	assert.Equal(t, "apply", reps.Run.Phase)
	applied := len(reps.Repos)
	assert.Less(t, applied, 6, "workspace-search is not applied yet")
	for _, r := range reps.Repos {
		assert.Equal(t, sha, r.Source, "%s: this run's result, kept as it finished", r.Result.Repo)
	}
	close(g.create)
	require.NoError(t, <-done)
	reps = svc.Reports()
	assert.Nil(t, reps.Run, "the run is over")
	assert.Len(t, reps.Repos, 6)
}
