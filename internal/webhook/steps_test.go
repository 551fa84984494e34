package webhook

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// writeCounter is a forge counting the pull requests opened per repo.
type writeCounter struct {
	reconcile.Forge
	mu     sync.Mutex
	opened map[string]int
}

func (f *writeCounter) OpenPR(ctx context.Context, owner, repo string, p pr.NewPR) (*pr.PullRequest, error) {
	out, err := f.Forge.OpenPR(ctx, owner, repo, p)
	if err == nil {
		f.mu.Lock()
		f.opened[repo]++
		f.mu.Unlock()
	}
	return out, err
}

func (f *writeCounter) counts() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.opened))
	for k, v := range f.opened {
		out[k] = v
	}
	return out
}

// TestFullApplyOfAThousandReposFinishesAcrossSteps: onboarding 1,050 clusters (every target
// repo new) is not one job racing a deadline: each step applies at most StepRepos repos,
// records them as done and queues the next step at once; a new service (a restart) reading
// the progress file resumes with the repos not done; no repo gets a second pull request; once
// none is pending the closing full apply finds every repo converged and the steps end.
func TestFullApplyOfAThousandReposFinishesAcrossSteps(t *testing.T) {
	if testing.Short() {
		t.Skip("1,050 repos on the local forge")
	}
	t.Parallel()
	ctx := context.Background()
	lf, err := local.Open(t.TempDir(), local.Options{Now: func() time.Time { return time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = lf.Close() })
	forge := &writeCounter{Forge: lf, opened: map[string]int{}}
	ctl := &memControl{commits: map[string]fs.FS{}}
	ctl.push(fleetgen.Generate(fleetgen.Options{Clusters: 1050, Apps: 2, Seed: 1}))
	clock := &fakeClock{now: time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)}
	stepsFile := filepath.Join(t.TempDir(), "steps.json")
	const step = 400
	newService := func(q *Queue) *Service {
		svc, err := NewService(ServiceConfig{
			Control: ctl, Renderer: fanout.NewRenderer(fanout.Options{}), Clock: clock, Concurrency: 16,
			StepRepos: step, StepsFile: stepsFile, Requeue: q.RetryAt,
			Forges: func(context.Context, string, ForgeMode) (reconcile.Forge, error) { return forge, nil },
		})
		require.NoError(t, err)
		return svc
	}
	resync := Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"}

	q := NewQueueWith(QueueConfig{Clock: clock})
	svc := newService(q)
	require.NoError(t, svc.Execute(ctx, resync, nil))
	st := svc.Steps()
	require.True(t, st.Active, "more changed repos than one step: the apply runs in steps")
	total := st.Done + st.Pending
	assert.GreaterOrEqual(t, total, 1050, "every cluster repo (and the workspaces') is new")
	assert.Equal(t, step, st.Done, "one step did StepRepos repos")
	assert.Equal(t, step, len(forge.counts()), "and wrote nothing else")
	run := svc.StatusRun()
	require.NotNil(t, run, "the status page shows the apply in steps")
	assert.Len(t, run.Repos, total, "with a row for every repo it covers")
	next := q.Drain()
	require.Len(t, next, 1, "the next step is queued at once")
	assert.Equal(t, ReasonStep, next[0].Reason)

	// The process restarts: a new service and queue; its startup resync resumes the steps.
	q = NewQueueWith(QueueConfig{Clock: clock})
	svc = newService(q)
	require.NoError(t, svc.Execute(ctx, resync, nil))
	st = svc.Steps()
	assert.Equal(t, 2*step, st.Done, "the restart resumed after the repos done")
	assert.Equal(t, total-2*step, st.Pending)
	for j := q.Drain(); len(j) > 0; j = q.Drain() {
		require.NoError(t, svc.Execute(ctx, j[0], nil))
	}
	assert.False(t, svc.Steps().Active, "no repo pending: the closing full apply ended the steps")
	assert.Nil(t, svc.StatusRun())
	counts := forge.counts()
	assert.Len(t, counts, total, "every repo got its pull request")
	for repo, n := range counts {
		require.Equal(t, 1, n, "%s: a repo done is not done again", repo)
	}
	rep := svc.Reports()
	var failed []string
	for _, r := range rep.Repos {
		if r.Result.Err != nil {
			failed = append(failed, r.Result.Repo)
		}
	}
	assert.Empty(t, failed)
	_, err = os.Stat(stepsFile)
	assert.ErrorIs(t, err, fs.ErrNotExist, "the progress file is removed once the steps end")
}
