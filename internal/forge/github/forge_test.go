package github_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// env is a fake GitHub with the example control repo's org and teams, and a way to open the
// GitHub forge on it as the App installed on acme.
type env struct {
	srv      *githubtest.Server
	repo     *control.Repo
	targets  []*fanout.Target
	cacheDir string
	budget   ghforge.BudgetConfig
}

func newEnv(t *testing.T, opts ...githubtest.Option) *env {
	t.Helper()
	repo, err := control.LoadDir(exampleControl)
	require.NoError(t, err)
	rendered, err := exampleTargets()
	require.NoError(t, err)
	targets := cloneTargets(rendered)
	srv := githubtest.NewServer(t, opts...)
	teams := map[string]bool{}
	for _, tg := range targets {
		for slug := range tg.Access.Teams {
			teams[slug] = true
		}
	}
	srv.CreateOrg("acme")
	for slug := range teams {
		srv.CreateTeam("acme", slug)
	}
	return &env{srv: srv, repo: repo, targets: targets, cacheDir: t.TempDir(),
		budget: ghforge.BudgetConfig{PerMinute: 10000, PerHour: 100000, MinInterval: -1}}
}

// exampleControl is the example control repo of the repository's testdata.
var exampleControl = filepath.Join("..", "..", "..", "testdata", "control")

// exampleTargets are the example control repo's targets, rendered once per test binary and
// read-only: each env works on its own copy (cloneTargets).
var exampleTargets = sync.OnceValues(func() ([]*fanout.Target, error) {
	repo, err := control.LoadDir(exampleControl)
	if err != nil {
		return nil, err
	}
	return fanout.NewRenderer(fanout.Options{}).Render(repo)
})

// cloneTargets copies targets so a test may change them (their file contents are never changed
// in place, only replaced, as Render's contract says).
func cloneTargets(in []*fanout.Target) []*fanout.Target {
	out := make([]*fanout.Target, len(in))
	for i, tg := range in {
		out[i] = tg.Clone()
	}
	return out
}

// forge opens a new client and forge, as a new process would (sharing the disk cache).
func (e *env) forge(t *testing.T, readOnly bool) *ghforge.Forge {
	t.Helper()
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: e.srv.APIURL(), AppID: e.srv.AppID(), PrivateKey: e.srv.AppPrivateKeyPEM(), Owner: "acme",
		ReadOnly: readOnly, Budget: e.budget,
	})
	require.NoError(t, err)
	return ghforge.NewForge(c, ghforge.ForgeOptions{CacheDir: e.cacheDir})
}

// newClient is forge for a test that expects opening the client itself may fail.
func (e *env) newClient() (*ghforge.Forge, error) {
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: e.srv.APIURL(), AppID: e.srv.AppID(), PrivateKey: e.srv.AppPrivateKeyPEM(), Owner: "acme",
		Budget: e.budget,
	})
	if err != nil {
		return nil, err
	}
	return ghforge.NewForge(c, ghforge.ForgeOptions{CacheDir: e.cacheDir}), nil
}

func (e *env) apply(t *testing.T, f reconcile.Forge) *reconcile.Report {
	t.Helper()
	rep, err := reconcile.Apply(context.Background(), f, e.repo, e.targets, reconcile.Options{Source: "c0ffee"})
	require.NoError(t, err)
	return rep
}

// cost is the requests one repo (or the run, for repo "") cost, App authentication excluded.
type cost struct{ reads, writes, content int }

func (e *env) costs() map[string]cost {
	out := map[string]cost{}
	for _, r := range e.srv.Requests() {
		if strings.HasPrefix(r.Route, "GET /app") || strings.HasPrefix(r.Route, "POST /app") ||
			strings.HasSuffix(r.Route, "/installation") {
			continue // token minting and installation lookup: once per process, not per repo
		}
		repo, _ := strings.CutPrefix(r.Repo, "acme/") // a REST path's, or updateRefs' repository
		c := out[repo]
		switch r.Class {
		case githubtest.Read:
			c.reads++
		case githubtest.Write:
			c.writes++
		case githubtest.ContentCreating:
			c.writes++
			c.content++
		}
		out[repo] = c
	}
	return out
}

func (e *env) mergeAll(t *testing.T, rep *reconcile.Report) {
	t.Helper()
	for _, r := range rep.Results {
		if r.PR == 0 {
			continue
		}
		name := strings.TrimPrefix(r.Repo, "acme/")
		_, _, err := e.srv.Client().PullRequests.Merge(context.Background(), "acme", name, r.PR, "", &gh.PullRequestOptions{MergeMethod: "squash"})
		require.NoError(t, err, name)
	}
}

func editTarget(t *testing.T, targets []*fanout.Target, repo string) {
	t.Helper()
	for _, tg := range targets {
		if tg.Repo == repo {
			tg.Files["flux/fleetbot.yaml"] = append(append([]byte{}, tg.Files["flux/fleetbot.yaml"]...), []byte("# "+time.Now().String()+"\n")...)
			return
		}
	}
	t.Fatalf("no target %s", repo)
}

// TestRequestCosts measures the requests of each reconcile type on the fake GitHub and holds
// them to DESIGN §5: a no-op is no read per repo (one batched scan) and no write, also in a new
// process with a new installation token;
// a new PR is 4 writes (+1 to label it), an update 4 (see the package doc for why not 3); plan
// writes nothing, and its client cannot.
func TestRequestCosts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	repos := len(e.targets)
	labels := 0
	if len(e.repo.Platform.Spec.PullRequests.Labels) > 0 {
		labels = 1
	}

	// New repos.
	f := e.forge(t, false)
	e.srv.ResetLog()
	rep := e.apply(t, f)
	created := e.costs()
	for _, r := range rep.Results {
		require.Equal(t, pr.ActionCreate, r.Action, r.Repo)
		c := created[strings.TrimPrefix(r.Repo, "acme/")]
		t.Logf("create %s: %d reads, %d writes (%d content-creating)", r.Repo, c.reads, c.writes, c.content)
		assert.LessOrEqual(t, c.content, 8, "create: repo, contents, tree, commit, tree, commit, ref, pull")
	}
	noop := func(run string) {
		t.Helper()
		e.srv.ResetLog()
		rep = e.apply(t, f)
		assert.False(t, rep.Changed(), run)
		total := cost{}
		for repo, c := range e.costs() {
			total.reads, total.writes = total.reads+c.reads, total.writes+c.writes
			if repo != "" {
				assert.Zero(t, c.reads, "%s: no-op reads of %s: the scan read its heads", run, repo)
			}
		}
		assert.Zero(t, total.writes, run)
		// Per run, not per repo: a page of the org's teams, one GraphQL scan of its repos'
		// heads and bot PRs (100 repos a page) and, once per process, the identity.
		if !assert.LessOrEqual(t, total.reads, 3, "%s: the per-run reads only", run) {
			for _, r := range e.srv.Requests() {
				t.Logf("  %s %s -> %d", r.Method, r.Path, r.Status)
			}
		}
		t.Logf("no-op (%s): %d repos, %d reads, %d writes", run, repos, total.reads, total.writes)
	}
	// The open PRs already carry the desired trees: a no-op, also in a new process.
	noop("open PRs, same process")
	f = e.forge(t, false)
	noop("open PRs, new process")
	e.mergeAll(t, rep)
	e.apply(t, f) // notices the merges, deletes the merged branches
	noop("merged, same process")
	f = e.forge(t, false)
	noop("merged, new process")

	// A change to one repo: a new PR.
	editTarget(t, e.targets, "cluster-edge-1")
	e.srv.ResetLog()
	rep = e.apply(t, f)
	c := e.costs()["cluster-edge-1"]
	t.Logf("new PR: %d reads, %d writes (%d content-creating)", c.reads, c.writes, c.content)
	assert.Equal(t, 4+labels, c.writes, "tree, commit, ref, pull request (+ labels)")

	// Another change: the PR is updated in place.
	editTarget(t, e.targets, "cluster-edge-1")
	e.srv.ResetLog()
	rep = e.apply(t, f)
	for _, r := range rep.Results {
		if r.Repo == "acme/cluster-edge-1" {
			assert.Equal(t, pr.ActionUpdate, r.Action)
		}
	}
	c = e.costs()["cluster-edge-1"]
	t.Logf("update: %d reads, %d writes (%d content-creating)", c.reads, c.writes, c.content)
	assert.Equal(t, 4, c.writes, "tree, commit, ref move (updateRefs), pull request body")

	// Plan, from a new process with a read-only client: no write, ever.
	editTarget(t, e.targets, "cluster-prod-eu-1")
	ro := e.forge(t, true)
	e.srv.ResetLog()
	prep, err := reconcile.Plan(context.Background(), ro, e.repo, e.targets, reconcile.Options{})
	require.NoError(t, err)
	assert.True(t, prep.Changed())
	total := cost{}
	for _, c := range e.costs() {
		total.reads, total.writes = total.reads+c.reads, total.writes+c.writes
	}
	t.Logf("plan: %d repos, %d reads, %d writes", repos, total.reads, total.writes)
	assert.Zero(t, total.writes, "plan writes nothing")
	_, err = ro.Commit(context.Background(), "acme", "cluster-prod-eu-1", pr.NewCommit{Message: "x", BaseTree: "4b825dc642cb6eb9a060e54bf8d69288fbee4904"})
	require.ErrorIs(t, err, ghforge.ErrReadOnly, "the read-only transport refuses a write")
	assert.Zero(t, e.costs()[""].writes+e.costs()["cluster-prod-eu-1"].writes, "and nothing reached GitHub")
}

// TestStalePRReplanned: a PR closed by hand moves no ref; the run's scan sees it closed (and,
// on a forge without the scan, the re-read before writing would): a new PR is opened instead
// of updating the closed one.
func TestStalePRReplanned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.forge(t, false)
	e.apply(t, f)
	e.mergeAll(t, e.apply(t, f))
	e.apply(t, f)
	editTarget(t, e.targets, "cluster-edge-1")
	rep := e.apply(t, f)
	var n int
	for _, r := range rep.Results {
		if r.Repo == "acme/cluster-edge-1" {
			n = r.PR
		}
	}
	require.NotZero(t, n)
	_, _, err := e.srv.Client().PullRequests.Edit(context.Background(), "acme", "cluster-edge-1", n, &gh.PullRequest{State: gh.String("closed")})
	require.NoError(t, err)
	editTarget(t, e.targets, "cluster-edge-1")
	rep = e.apply(t, e.forge(t, false))
	for _, r := range rep.Results {
		if r.Repo == "acme/cluster-edge-1" {
			assert.Equal(t, pr.ActionOpen, r.Action, r.Reason)
			assert.Greater(t, r.PR, n)
		}
	}
	var open []int
	for _, p := range e.srv.Pulls("acme", "cluster-edge-1") {
		if p.GetState() == "open" {
			open = append(open, p.GetNumber())
		}
	}
	sort.Ints(open)
	assert.Len(t, open, 1)
}

// TestRetries: a 502 is retried and the run completes; a 422 is not retried, fails only its
// repo, and the next run finishes the job.
func TestRetries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.forge(t, false)
	e.srv.Fault("POST /repos/{owner}/{repo}/git/trees", githubtest.FaultSpec{Status: 502, Times: 1})
	e.apply(t, f)
	n502 := 0
	for _, r := range e.srv.Requests() {
		if r.Status == 502 {
			n502++
		}
	}
	assert.Equal(t, 1, n502, "the 502 happened and was retried")

	e.mergeAll(t, e.apply(t, f))
	e.apply(t, f)
	editTarget(t, e.targets, "cluster-edge-1")
	e.srv.ResetLog()
	e.srv.Fault("POST /repos/{owner}/{repo}/pulls", githubtest.FaultSpec{Status: 422, Message: "Validation Failed", Times: 1})
	rep, err := reconcile.Apply(context.Background(), f, e.repo, e.targets, reconcile.Options{})
	require.ErrorIs(t, err, reconcile.ErrFailed)
	require.Len(t, rep.Failed(), 1)
	assert.Equal(t, "acme/cluster-edge-1", rep.Failed()[0].Repo)
	posts := 0
	for _, r := range e.srv.Requests() {
		if r.Route == "POST /repos/{owner}/{repo}/pulls" {
			posts++
		}
	}
	assert.Equal(t, 1, posts, "422 is not retried")
	rep = e.apply(t, f)
	for _, r := range rep.Results {
		if r.Repo == "acme/cluster-edge-1" {
			assert.Equal(t, pr.ActionOpen, r.Action, "the next run opens the PR")
			assert.NotZero(t, r.PR)
		}
	}
}

func TestMain(m *testing.M) { os.Exit(m.Run()) }
