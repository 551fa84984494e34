package webhook

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/forge/local"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// recordedCheck is one check run as the fake CheckRuns saw it.
type recordedCheck struct {
	sha string
	res checkrun.Result
	// finishCtxErr is the error of the context Finish was called with: a check must be
	// finished even when its job was cancelled.
	finishCtxErr error
}

// fakeChecks records check runs; startErr, when set, fails Start.
type fakeChecks struct {
	mu       sync.Mutex
	startErr error
	runs     map[int64]*recordedCheck
	next     int64
}

func (c *fakeChecks) Start(_ context.Context, sha string) (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.startErr != nil {
		return 0, c.startErr
	}
	c.next++
	if c.runs == nil {
		c.runs = map[int64]*recordedCheck{}
	}
	c.runs[c.next] = &recordedCheck{sha: sha}
	return c.next, nil
}

func (c *fakeChecks) Finish(ctx context.Context, id int64, r checkrun.Result) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	run, ok := c.runs[id]
	if !ok {
		return fmt.Errorf("check run %d was never started", id)
	}
	run.res, run.finishCtxErr = r, ctx.Err()
	return nil
}

// last is the newest finished check run.
func (c *fakeChecks) last(t *testing.T) recordedCheck {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	require.NotZero(t, c.next, "no check run was started")
	return *c.runs[c.next]
}

// countingControl is memControl counting loads per commit, with one pull request.
type countingControl struct {
	*memControl
	mu            sync.Mutex
	loads         map[string]int
	prBase        string
	prAuthor      string
	prErr         error
	pullRequested int
}

func newCountingControl() *countingControl {
	return &countingControl{memControl: &memControl{commits: map[string]fs.FS{}}, loads: map[string]int{}}
}

func (c *countingControl) Load(ctx context.Context, sha string) (*control.Repo, error) {
	c.mu.Lock()
	c.loads[sha]++
	c.mu.Unlock()
	return c.memControl.Load(ctx, sha)
}

func (c *countingControl) PullRequest(context.Context, int) (string, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pullRequested++
	return c.prBase, c.prAuthor, c.prErr
}

// checkEnv is a service with a local forge and fake check runs, recording the forge modes
// jobs asked for.
type checkEnv struct {
	svc    *Service
	ctl    *countingControl
	checks *fakeChecks
	forge  *local.Forge
	dir    string

	mu    sync.Mutex
	modes []app.ForgeMode
}

func newCheckEnv(t *testing.T, verdict Verdict, forgeErr error) *checkEnv {
	t.Helper()
	e := &checkEnv{ctl: newCountingControl(), checks: &fakeChecks{}, dir: t.TempDir()}
	f, err := local.Open(e.dir, local.Options{Now: func() time.Time { return time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	e.forge = f
	runner := app.Config{}.ServiceRunner("acme/control", func(_ context.Context, owner string, mode app.ForgeMode) (reconcile.Forge, error) {
		e.mu.Lock()
		e.modes = append(e.modes, mode)
		e.mu.Unlock()
		if forgeErr != nil {
			return nil, forgeErr
		}
		return f, nil
	})
	if v, ok := verdict.(*ReviewVerdict); ok {
		v.Renderer = runner.Renderer()
	}
	e.svc, err = NewService(ServiceConfig{Control: e.ctl, Checks: e.checks, Verdict: verdict, Runner: runner})
	require.NoError(t, err)
	return e
}

func (e *checkEnv) forgeModes() []app.ForgeMode {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]app.ForgeMode(nil), e.modes...)
}

const newCluster = "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge-2\n  labels: {env: prod}\n"

// TestCheckJobPlansOnAReadOnlyForgeAndReportsTheChange: a control pull request's check run
// says how many target repos change, carries the plan as its text, succeeds, and writes
// nothing to any target repo: the plan runs on the read-only forge.
func TestCheckJobPlansOnAReadOnlyForgeAndReportsTheChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newCheckEnv(t, nil, nil)
	head := e.ctl.push(edit(t, readControl(t), "clusters/edge-2.yaml", "", newCluster))

	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: head, PR: 7}, nil))
	run := e.checks.last(t)
	assert.Equal(t, head, run.sha, "the check run is on the pull request's head")
	assert.Equal(t, checkrun.ConclusionSuccess, run.res.Conclusion, "changes are what a control pull request is for")
	assert.Equal(t, "7 of 7 target repos change", run.res.Title)
	assert.Contains(t, run.res.Summary, "Plan of source `"+head[:7]+"`", "the summary names the commit planned")
	assert.Contains(t, run.res.Summary, "nothing is written before")
	assert.Contains(t, run.res.Text, "acme/cluster-edge-2", "the text is the plan, repo by repo")
	assert.Empty(t, run.res.Annotations)
	assert.Equal(t, []app.ForgeMode{app.ForgePlan}, e.forgeModes(), "a check asks for the read-only forge only")
	assert.Empty(t, forgeState(t, e.dir), "a check never creates or writes a target repo")
}

// TestCheckJobFailsAnInvalidControlRepoWithAnnotations: a pull request that breaks the
// control repo fails its check with one annotation per problem on its file and line; no
// forge is opened, and the invalid commit is not read again for the next check of it.
func TestCheckJobFailsAnInvalidControlRepoWithAnnotations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newCheckEnv(t, nil, nil)
	bad := e.ctl.push(edit(t, readControl(t), "clusters/edge-2.yaml", "", newCluster+"spec:\n  bogus: 1\n"))

	for range 2 {
		require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: bad}, nil))
	}
	run := e.checks.last(t)
	assert.Equal(t, checkrun.ConclusionFailure, run.res.Conclusion)
	assert.True(t, strings.HasPrefix(run.res.Title, "invalid control repo: "), run.res.Title)
	assert.Contains(t, run.res.Summary, "nothing would be written anywhere")
	assert.Contains(t, run.res.Summary, "bogus")
	require.NotEmpty(t, run.res.Annotations, "problems point at their files")
	a := run.res.Annotations[0]
	assert.Equal(t, "clusters/edge-2.yaml", a.Path)
	assert.Positive(t, a.Line)
	assert.Equal(t, "failure", a.Level)
	assert.Contains(t, a.Message, "bogus")
	assert.Empty(t, e.forgeModes(), "an invalid control repo reaches no forge")
	assert.Equal(t, 1, e.ctl.loads[bad], "an invalid commit stays invalid: it is read once")
}

// TestCheckJobOnAnUnreadableCommitIsNeutralAndRetried: a commit that cannot be read (not yet
// visible, a network error) gives a neutral check asking for a re-run, and is not cached: the
// re-run reads it again and plans it.
func TestCheckJobOnAnUnreadableCommitIsNeutralAndRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newCheckEnv(t, nil, nil)
	files := edit(t, readControl(t), "clusters/edge-2.yaml", "", newCluster)
	sha := e.ctl.push(files)
	e.ctl.mu.Lock()
	delete(e.ctl.commits, sha) // not readable yet
	e.ctl.mu.Unlock()

	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: sha}, nil))
	run := e.checks.last(t)
	assert.Equal(t, checkrun.ConclusionNeutral, run.res.Conclusion)
	assert.Equal(t, "fleetbot could not read the control repo", run.res.Title)
	assert.Contains(t, run.res.Summary, "no such commit", "the summary says why")
	assert.Contains(t, run.res.Summary, "re-run the check")

	e.ctl.push(files)
	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: sha}, nil))
	run = e.checks.last(t)
	assert.Equal(t, checkrun.ConclusionSuccess, run.res.Conclusion, "the re-run reads the commit afresh")
	assert.Equal(t, 2, e.ctl.loads[sha])
}

// TestCheckJobWhenTheTargetReposCannotBeReached: a failing forge gives a neutral check that
// says so, never a success.
func TestCheckJobWhenTheTargetReposCannotBeReached(t *testing.T) {
	t.Parallel()
	e := newCheckEnv(t, nil, errors.New("installation on acme: 401 Bad credentials"))
	head := e.ctl.push(readControl(t))
	require.NoError(t, e.svc.Execute(context.Background(), Job{Kind: KindCheck, Repo: "acme/control", SHA: head}, nil))
	run := e.checks.last(t)
	assert.Equal(t, checkrun.ConclusionNeutral, run.res.Conclusion)
	assert.Equal(t, "fleetbot could not reach the target repos", run.res.Title)
	assert.Contains(t, run.res.Summary, "401 Bad credentials")
}

// TestCheckJobFailsAPlanTheRemovalGuardRefuses: a pull request removing more target repos
// than the guard allows fails its check, naming the refusal, before anyone merges it.
func TestCheckJobFailsAPlanTheRemovalGuardRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newCheckEnv(t, nil, nil)
	files := readControl(t)
	e.ctl.push(files)
	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", Reason: "resync"}, nil))
	before := forgeState(t, e.dir)
	require.Len(t, before, 6, "the fleet exists")

	fewer := edit(t, edit(t, files, "clusters/edge-1.yaml", "", ""), "clusters/prod-us-1.yaml", "", "")
	head := e.ctl.push(fewer)
	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: head, PR: 3}, nil))
	run := e.checks.last(t)
	assert.Equal(t, checkrun.ConclusionFailure, run.res.Conclusion)
	assert.True(t, strings.HasPrefix(run.res.Title, "plan refused: "), run.res.Title)
	assert.NotContains(t, run.res.Title, "\n", "the title is the refusal's first line")
	assert.Equal(t, before, forgeState(t, e.dir), "the check wrote nothing")
}

// TestCheckJobCancelledStillFinishesTheCheckRun: when serve shuts down during a check, the
// check run is completed as cancelled (GitHub would otherwise show it in progress forever),
// on a context that is not the cancelled one.
func TestCheckJobCancelledStillFinishesTheCheckRun(t *testing.T) {
	t.Parallel()
	e := newCheckEnv(t, nil, nil)
	head := e.ctl.push(readControl(t))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: head}, nil))
	run := e.checks.last(t)
	assert.Equal(t, checkrun.ConclusionCancelled, run.res.Conclusion)
	assert.Contains(t, run.res.Summary, "Re-run it")
	assert.NoError(t, run.finishCtxErr, "Finish runs on a live context")
}

// TestCheckJobErrors: a check job without check runs configured, or whose check run cannot be
// created, is an error for the pool (logged, retried by the next delivery), not a silent
// success.
func TestCheckJobErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ctl := newCountingControl()
	head := ctl.push(readControl(t))
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		Runner: app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) {
			return nil, errors.New("unused")
		}),
	})
	require.NoError(t, err)
	err = svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: head}, nil)
	assert.ErrorContains(t, err, "no check runs configured")

	e := newCheckEnv(t, nil, nil)
	e.checks.startErr = errors.New("403 Resource not accessible by integration")
	err = e.svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: e.ctl.push(readControl(t))}, nil)
	assert.ErrorContains(t, err, "403 Resource not accessible")
	assert.Empty(t, e.forgeModes(), "nothing is planned without a check run to report it on")
}

// TestCheckJobAddsCheckControl: with check control configured, the check run adds its
// verdict: a new cluster by an author whose teams are unknown needs a platform admin's review,
// which makes the check neutral (CODEOWNERS asks for that review) and says why. The pull
// request's base and author are looked up when the event did not carry them.
func TestCheckJobAddsCheckControl(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var asked []string
	v := &ReviewVerdict{Member: func(_ context.Context, org, slug, login string) (bool, error) {
		asked = append(asked, org+"/"+slug+" "+login)
		return false, nil
	}}
	e := newCheckEnv(t, v, nil)
	files := readControl(t)
	base := e.ctl.push(files)
	head := e.ctl.push(edit(t, files, "clusters/edge-2.yaml", "", newCluster))
	e.ctl.prBase, e.ctl.prAuthor = base, "mallory"

	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: head, PR: 9}, nil))
	run := e.checks.last(t)
	assert.Equal(t, 1, e.ctl.pullRequested, "base and author come from the pull request")
	assert.Equal(t, checkrun.ConclusionNeutral, run.res.Conclusion, "the verdict's neutral beats the plan's success")
	assert.Equal(t, "7 of 7 target repos change; check control: needs platform admin review", run.res.Title)
	assert.Contains(t, run.res.Summary, "nothing is written before", "the plan's summary stays")
	assert.Contains(t, run.res.Summary, "clusters/edge-2.yaml", "check control's markdown says what needs the review")
	for _, a := range asked {
		assert.True(t, strings.HasPrefix(a, "acme/") && strings.HasSuffix(a, " mallory"), "teams are looked up in the platform owner for the author: %s", a)
	}

	// A base given by the event is used as is; a head that does not load fails the check.
	bad := e.ctl.push(edit(t, files, "clusters/edge-2.yaml", "", newCluster+"spec:\n  bogus: 1\n"))
	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: bad, PR: 9, Base: base, Author: "mallory"}, nil))
	assert.Equal(t, 1, e.ctl.pullRequested, "no lookup when the event carried base and author")
	assert.Equal(t, checkrun.ConclusionFailure, e.checks.last(t).res.Conclusion)
}

// TestCheckControlThatCannotRunIsNeutral: check control that cannot run (the pull request
// cannot be read, its base is unknown or not readable) makes the check neutral and says why;
// the plan is still reported.
func TestCheckControlThatCannotRunIsNeutral(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	files := readControl(t)
	cases := []struct {
		name  string
		job   func(base, head string) Job
		prErr error
		want  string
	}{
		{"the pull request cannot be read", func(_, head string) Job { return Job{SHA: head, PR: 4} },
			errors.New("502 Bad Gateway"), "502 Bad Gateway"},
		{"a re-run check on a commit: no pull request, no base", func(_, head string) Job { return Job{SHA: head} },
			nil, "the pull request's base commit is unknown"},
		{"the base commit is not readable", func(_, head string) Job { return Job{SHA: head, Base: strings.Repeat("f", 40), Author: "alice"} },
			nil, "no such commit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newCheckEnv(t, &ReviewVerdict{}, nil)
			base := e.ctl.push(files)
			head := e.ctl.push(edit(t, files, "clusters/edge-2.yaml", "", newCluster))
			e.ctl.prErr = c.prErr
			j := c.job(base, head)
			j.Kind, j.Repo = KindCheck, "acme/control"
			require.NoError(t, e.svc.Execute(ctx, j, nil))
			run := e.checks.last(t)
			assert.Equal(t, checkrun.ConclusionNeutral, run.res.Conclusion)
			assert.Equal(t, "7 of 7 target repos change", run.res.Title, "no verdict to name")
			assert.Contains(t, run.res.Summary, "`fleetbot check control` could not run: "+c.want)
			assert.Contains(t, run.res.Text, "acme/cluster-edge-2", "the plan is still reported")
		})
	}
}

// TestReviewVerdictConclusions: check control's verdicts as check conclusions: a change the
// author's team may make succeeds, one needing a platform admin is neutral, an invalid head
// fails.
func TestReviewVerdictConclusions(t *testing.T) {
	t.Parallel()
	files := readControl(t)
	member := func(_ context.Context, _, slug, _ string) (bool, error) { return slug == "search-devs", nil }
	v := &ReviewVerdict{Renderer: fanout.NewRenderer(fanout.Options{}), Member: member}
	check := func(head fstest.MapFS, author string) VerdictResult {
		t.Helper()
		res, err := v.CheckControl(context.Background(), VerdictInput{Base: files, Head: head, BaseSHA: "base", HeadSHA: "head", Owner: "acme", Author: author})
		require.NoError(t, err)
		return res
	}
	own := edit(t, files, "workspaces/search.yaml", "    - app: podinfo", "    - app: podinfo\n      values: {podinfo_replicas: \"3\"}")
	res := check(own, "sam")
	assert.Equal(t, checkrun.ConclusionSuccess, res.Conclusion, "a workspace admin changing their own workspace: %s", res.Markdown)
	assert.Equal(t, "allowed", res.Verdict)

	res = check(edit(t, files, "clusters/edge-2.yaml", "", newCluster), "sam")
	assert.Equal(t, checkrun.ConclusionNeutral, res.Conclusion, "a new cluster needs a platform admin")
	assert.NotEmpty(t, res.Markdown)

	res = check(edit(t, files, "clusters/edge-2.yaml", "", newCluster+"spec:\n  bogus: 1\n"), "sam")
	assert.Equal(t, checkrun.ConclusionFailure, res.Conclusion, "an invalid head")
}

// TestFleetCacheKeepsWhatJobsUse: the rendered commits are kept least recently used first, so
// the default branch's head, read by every drift job, is rendered once while more pull request
// heads than the cache holds come and go.
func TestFleetCacheKeepsWhatJobsUse(t *testing.T) {
	t.Parallel()
	e := newCheckEnv(t, nil, nil)
	ctx := context.Background()
	main := e.ctl.push(readControl(t))
	var heads []string
	for i := range 2 * fleetCache {
		heads = append(heads, e.ctl.push(edit(t, readControl(t), fmt.Sprintf("notes/pr-%d.md", i), "", "a pull request's file\n")))
	}
	for _, h := range heads {
		require.NoError(t, e.svc.fleetEntry(ctx, main).err) // a drift job
		require.NoError(t, e.svc.fleetEntry(ctx, h).err)    // a check of a new pull request head
	}
	e.ctl.mu.Lock()
	defer e.ctl.mu.Unlock()
	assert.Equal(t, 1, e.ctl.loads[main], "the default branch's head stays cached")
	for _, h := range heads {
		assert.Equal(t, 1, e.ctl.loads[h])
	}
}

// countingForge is a forge counting the repos a run reads.
type countingForge struct {
	reconcile.Forge
	mu    sync.Mutex
	reads map[string]int
}

func (f *countingForge) Snapshot(ctx context.Context, owner, repo, defaultBranch, botBranch string) (*pr.Snapshot, error) {
	f.mu.Lock()
	f.reads[repo]++
	f.mu.Unlock()
	return f.Forge.Snapshot(ctx, owner, repo, defaultBranch, botBranch)
}

func (f *countingForge) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := slices.Sorted(maps.Keys(f.reads))
	f.reads = map[string]int{}
	return out
}

// TestCheckPlansWhatMergingChanges: once an apply converged, a control pull request's check
// reads and plans only the target repos whose desired state at its head differs from what that
// apply left them at (a value of one cluster: that cluster's repo), counts them against the
// whole fleet and says so; a change of the platform configuration plans every repo; before
// any converged apply, every repo is planned.
func TestCheckPlansWhatMergingChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	checks := &fakeChecks{}
	ctl := newCountingControl()
	dir := t.TempDir()
	f, err := local.Open(dir, local.Options{Now: func() time.Time { return time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC) }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	counted := &countingForge{Forge: f, reads: map[string]int{}}
	svc, err := NewService(ServiceConfig{
		Control: ctl,
		Checks:  checks,
		Runner:  app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) { return counted, nil }),
	})
	require.NoError(t, err)
	files := readControl(t)
	base := ctl.push(files)

	check := func(name string, files fstest.MapFS) (recordedCheck, []string) {
		t.Helper()
		head := ctl.push(files)
		ctl.mu.Lock()
		ctl.head = base // a pull request's head is not the default branch's
		ctl.mu.Unlock()
		before := forgeState(t, dir)
		require.NoError(t, svc.Execute(ctx, Job{Kind: KindCheck, Repo: "acme/control", SHA: head, PR: 7, Base: base}, nil), name)
		assert.Equal(t, before, forgeState(t, dir), "%s: a check never writes", name)
		return checks.last(t), counted.take()
	}

	run, read := check("before any apply", edit(t, files, "clusters/edge-1.yaml", "192.168.50.0/28", "192.168.60.0/28"))
	assert.Len(t, read, 6, "no converged apply: every target repo")
	assert.NotContains(t, run.res.Summary, "Only the")

	require.NoError(t, svc.Execute(ctx, Job{Kind: KindApply, Repo: "acme/control", SHA: base, Reason: "resync"}, nil))
	counted.take()

	run, read = check("a cluster's value", edit(t, files, "clusters/edge-1.yaml", "192.168.50.0/28", "192.168.60.0/28"))
	assert.Equal(t, []string{"cluster-edge-1"}, read, "only the cluster whose desired state changed is read")
	assert.Equal(t, checkrun.ConclusionSuccess, run.res.Conclusion)
	assert.Equal(t, "1 of 6 target repos change", run.res.Title, "counted against the whole fleet")
	assert.Contains(t, run.res.Summary, "Only the 1 target repos whose desired state differs")
	assert.Contains(t, run.res.Text, "acme/cluster-edge-1")
	assert.Contains(t, run.res.Text, "Scope: incremental: 1 of 6 target repos changed since "+base[:12])

	run, read = check("nothing a target renders", edit(t, files, "README.md", "", "docs only\n"))
	assert.Empty(t, read)
	assert.Equal(t, "0 of 6 target repos change", run.res.Title)

	_, read = check("the platform configuration", edit(t, files, "platform.yaml", `metallb_speaker_tolerations: "false"`, `metallb_speaker_tolerations: "true"`))
	assert.Len(t, read, 6, "every target repo")

	run, read = check("a removed cluster", edit(t, files, "clusters/edge-1.yaml", "", ""))
	assert.Len(t, read, 6, "a removal plans every repo, the removed one included (the removal guard weighs the fleet)")
	assert.Contains(t, run.res.Text, "Scope: full: a target repo left the control repo")
}
