package github_test

import (
	"context"
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
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// instantClock's Sleep returns at once and counts the waits.
type instantClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps int
}

func (c *instantClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *instantClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.sleeps++
	return ctx.Err()
}

// routeCount counts the fake's requests on one route.
func routeCount(srv *githubtest.Server, route string) int {
	n := 0
	for _, r := range srv.Requests() {
		if r.Route == route {
			n++
		}
	}
	return n
}

// TestBotLoginFromApp: as a GitHub App, fleetbot learns its login ("<slug>[bot]") from GET /app
// with the App's JWT, never from GET /user, which GitHub answers an installation token with 403.
func TestBotLoginFromApp(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.forge(t, false)
	o, err := f.Org(context.Background(), "acme")
	require.NoError(t, err)
	assert.Equal(t, []string{"fleetbot[bot]"}, o.Self)
	assert.Zero(t, routeCount(e.srv, "GET /user"), "no GET /user with an installation token")
	assert.Equal(t, 1, routeCount(e.srv, "GET /app"))
}

// TestNotAccessibleByIntegrationNotRetried: a 403 "Resource not accessible by integration" on a
// fresh installation token is an answer, not a token still replicating: one request, no wait.
func TestNotAccessibleByIntegrationNotRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	clock := &instantClock{now: time.Now()}
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: e.srv.APIURL(), AppID: e.srv.AppID(), PrivateKey: e.srv.AppPrivateKeyPEM(), Owner: "acme",
		Budget: ghforge.BudgetConfig{Clock: clock},
	})
	require.NoError(t, err)
	_, _, err = c.API().Users.Get(context.Background(), "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Resource not accessible by integration")
	assert.Equal(t, 1, routeCount(e.srv, "GET /user"), "sent once")
	assert.Zero(t, clock.sleeps, "no wait")
}

// TestActionsTokenUserLookupOnce: with a token fleetbot cannot tell from a personal one (an
// Actions GITHUB_TOKEN is an installation token), GET /user is asked once; its 403 leaves the
// login unknown without retries.
func TestActionsTokenUserLookupOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c, err := ghforge.New(context.Background(), ghforge.Config{APIURL: e.srv.APIURL(), Token: e.srv.InstallationToken("acme"), Owner: "acme"})
	require.NoError(t, err)
	f := ghforge.NewForge(c, ghforge.ForgeOptions{})
	for range 2 {
		o, err := f.Org(context.Background(), "acme")
		require.NoError(t, err)
		assert.Empty(t, o.Self)
	}
	assert.Equal(t, 1, routeCount(e.srv, "GET /user"))
}

// changeTarget edits one managed file of the first cluster target, so the next apply updates its
// pull request; it returns the target's repo.
func changeTarget(t *testing.T, e *env) string {
	t.Helper()
	for _, tg := range e.targets {
		if tg.Kind != fanout.KindCluster {
			continue
		}
		for p, c := range tg.Files {
			if strings.HasPrefix(p, "platform/") && strings.HasSuffix(p, ".yaml") {
				tg.Files[p] = append(append([]byte(nil), c...), []byte("# changed\n")...)
				return tg.Repo
			}
		}
	}
	t.Fatal("no cluster target with a platform file")
	return ""
}

// result returns the report's entry for repo.
func result(t *testing.T, rep *reconcile.Report, repo string) reconcile.Result {
	t.Helper()
	for _, r := range rep.Results {
		if strings.HasSuffix(r.Repo, "/"+repo) || r.Repo == repo {
			return r
		}
	}
	t.Fatalf("no result for %s", repo)
	return reconcile.Result{}
}

// TestInterruptedUpdateColdCache: an update interrupted after the bot branch moved (the PR body,
// which records fleetbot's head, not yet rewritten) is finished by the next run with a cold
// snapshot cache (a new Action run, a restarted serve). GitHub says the commit was committed by
// "GitHub" (web-flow), not by fleetbot's bot: fleetbot knows it by its tree trailer, not by who
// committed it, and neither blocks the PR nor comments on it.
func TestInterruptedUpdateColdCache(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []githubtest.Option
	}{{name: "github.com"}, {name: "GHES", opts: []githubtest.Option{githubtest.WithEnterpriseServer()}}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tc.opts...)
			e.apply(t, e.forge(t, false))
			repo := changeTarget(t, e)
			e.srv.Fault("PATCH /repos/{owner}/{repo}/pulls/{number}", githubtest.FaultSpec{Status: 500, Message: "interrupted here"})
			_, _ = reconcile.Apply(context.Background(), e.forge(t, false), e.repo, e.targets, reconcile.Options{Source: "c0ffee"})
			e.srv.ClearFaults()
			bot := e.srv.Branch("acme", repo, "fleetbot/sync")
			c, _, err := e.srv.Client().Git.GetCommit(context.Background(), "acme", repo, bot)
			require.NoError(t, err)
			require.NotEqual(t, "fleetbot[bot]", c.GetCommitter().GetName(), "GitHub's committer is not the bot")

			e.cacheDir = t.TempDir() // cold cache
			rep := e.apply(t, e.forge(t, false))
			r := result(t, rep, repo)
			assert.Equal(t, pr.ActionUpdate, r.Action, "%s: %s", repo, r.Line())
			ps := e.srv.Pulls("acme", repo)
			require.Len(t, ps, 1)
			assert.Contains(t, ps[0].GetBody(), bot, "the PR body now records the bot head")
			for _, cm := range e.srv.Comments("acme", repo, ps[0].GetNumber()) {
				assert.NotContains(t, cm, "did not make")
			}
			rep = e.apply(t, e.forge(t, false))
			assert.Equal(t, pr.ActionNoop, result(t, rep, repo).Action, "then nothing to do")
		})
	}
}

// TestLostPullRequestResponse: GitHub opened the pull request but its answer was lost (a
// timeout). The run fails that repo; the next runs (same process, or a new one with the same
// cache) converge on the one pull request GitHub has: no second one, no write loop.
func TestLostPullRequestResponse(t *testing.T) {
	t.Parallel()
	for _, sameForge := range []bool{true, false} {
		t.Run(map[bool]string{true: "same process", false: "new process"}[sameForge], func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			f := e.forge(t, false)
			e.srv.Fault("POST /repos/{owner}/{repo}/pulls", githubtest.FaultSpec{LoseResponse: true, Times: 1})
			_, _ = reconcile.Apply(context.Background(), f, e.repo, e.targets, reconcile.Options{Source: "c0ffee"})
			lost := ""
			for _, r := range e.srv.Requests() {
				if r.Route == "POST /repos/{owner}/{repo}/pulls" && r.Status == 0 {
					lost = strings.Split(r.Path, "/")[5]
				}
			}
			require.NotEmpty(t, lost, "one PR create lost its answer")
			require.Len(t, e.srv.Pulls("acme", lost), 1, "GitHub opened it")

			if !sameForge {
				f = e.forge(t, false)
			}
			rep := e.apply(t, f)
			for _, r := range rep.Results {
				assert.NoError(t, r.Err, r.Line())
			}
			e.srv.ResetLog()
			rep = e.apply(t, e.forge(t, false))
			for _, r := range rep.Results {
				assert.Equal(t, pr.ActionNoop, r.Action, r.Line())
			}
			assert.Zero(t, totalWrites(e), "converged: no writes")
			for _, tg := range e.targets {
				assert.Len(t, e.srv.Pulls("acme", tg.Repo), 1, "%s has one pull request", tg.Repo)
			}
		})
	}
}

// TestLostRepoCreateResponse: GitHub created the repo but its answer was lost. The next run
// finishes it as fleetbot's own: topics (so ListManaged finds it), bootstrap, protection,
// teams and the first pull request; then nothing more to do.
func TestLostRepoCreateResponse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.srv.Fault("POST /orgs/{org}/repos", githubtest.FaultSpec{LoseResponse: true, Times: 1})
	_, _ = reconcile.Apply(context.Background(), e.forge(t, false), e.repo, e.targets, reconcile.Options{Source: "c0ffee"})
	rep := e.apply(t, e.forge(t, false))
	for _, r := range rep.Results {
		assert.NoError(t, r.Err, r.Line())
	}
	managed, err := e.forge(t, true).ListManaged(context.Background(), "acme")
	require.NoError(t, err)
	assert.Len(t, managed, len(e.targets), "every repo carries fleetbot's topics")
	for _, tg := range e.targets {
		assert.True(t, e.srv.Protected("acme", tg.Repo, "main"), "%s protected", tg.Repo)
		assert.Len(t, e.srv.Pulls("acme", tg.Repo), 1, "%s has its pull request", tg.Repo)
	}
	e.srv.ResetLog()
	rep = e.apply(t, e.forge(t, false))
	for _, r := range rep.Results {
		assert.Equal(t, pr.ActionNoop, r.Action, r.Line())
	}
	assert.Zero(t, totalWrites(e), "converged: no writes")
}

// totalWrites sums the writes of every repo and of the run (App authentication excluded).
func totalWrites(e *env) int {
	n := 0
	for _, c := range e.costs() {
		n += c.writes
	}
	return n
}

// TestOpenPRTwice: opening the bot pull request again (its first answer lost) finds the one
// GitHub has by its head branch, gives it the new title and body, and returns it: no error, no
// second pull request.
func TestOpenPRTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply(t, e.forge(t, false))
	repo := e.targets[0].Repo
	before := e.srv.Pulls("acme", repo)
	require.Len(t, before, 1)
	f := e.forge(t, false)
	p, err := f.OpenPR(context.Background(), "acme", repo, pr.NewPR{Head: "fleetbot/sync", Base: "main", Title: "again", Body: "new body"})
	require.NoError(t, err)
	assert.Equal(t, before[0].GetNumber(), p.Number)
	after := e.srv.Pulls("acme", repo)
	require.Len(t, after, 1)
	assert.Equal(t, "new body", after[0].GetBody())
	assert.Equal(t, "again", after[0].GetTitle())
}

// TestCreateRepoInternalVisibility: visibility internal in an org without an enterprise is
// refused with an error saying why and what to set instead; nothing is created. An enterprise
// org gets its internal repo.
func TestCreateRepoInternalVisibility(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.forge(t, false)
	spec := pr.RepoSpec{Owner: "acme", Repo: "cluster-x", Kind: fanout.KindCluster, Name: "x", DefaultBranch: "main", Visibility: "internal"}
	err := f.CreateRepo(context.Background(), spec)
	require.ErrorIs(t, err, ghforge.ErrVisibilityInternal)
	assert.Contains(t, err.Error(), "acme/cluster-x")
	assert.Contains(t, err.Error(), "spec.repos.visibility")
	assert.Nil(t, e.srv.Repo("acme", "cluster-x"), "nothing created")

	e.srv.SetOrgEnterprise("acme", true)
	require.NoError(t, f.CreateRepo(context.Background(), spec))
	assert.Equal(t, "internal", e.srv.Repo("acme", "cluster-x").GetVisibility())
}

// TestAutoMergeOnNewRepos: with pullRequests.merge: auto, the repos fleetbot creates allow
// auto-merge (GitHub's default is off), and each first pull request, waiting for the code-owner
// review that protection requires, gets auto-merge.
func TestAutoMergeOnNewRepos(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	setMergeAuto(t, e)
	rep := e.apply(t, e.forge(t, false))
	for _, r := range rep.Results {
		require.NoError(t, r.Err, r.Line())
	}
	for _, tg := range e.targets {
		assert.True(t, e.srv.Repo("acme", tg.Repo).GetAllowAutoMerge(), "%s allows auto-merge", tg.Repo)
		ps := e.srv.Pulls("acme", tg.Repo)
		require.Len(t, ps, 1)
		assert.Equal(t, "merge", ps[0].GetAutoMerge().GetMergeMethod(), "%s: auto-merge on", tg.Repo)
	}
}

// autoMergeRepo is an adopted repo without protection whose bot branch is one commit ahead,
// and the NewPR fleetbot would open for it with merge: auto.
func autoMergeRepo(t *testing.T, e *env) pr.NewPR {
	t.Helper()
	e.srv.CreateRepo("acme", "adopted", map[string]string{"README.md": "hi\n"})
	main := e.srv.Branch("acme", "adopted", "main")
	ref := &gh.Reference{Ref: gh.String("refs/heads/fleetbot/sync"), Object: &gh.GitObject{SHA: gh.String(main)}}
	_, _, err := e.srv.Client().Git.CreateRef(context.Background(), "acme", "adopted", ref)
	require.NoError(t, err)
	head := e.srv.Commit("acme", "adopted", "fleetbot/sync", "change", map[string]string{"x.yaml": "x: 1\n"})
	return pr.NewPR{Head: "fleetbot/sync", Base: "main", Title: "t", Body: "b", AutoMerge: true,
		HeadSHA: head, Protection: policy.DefaultProtection("main")}
}

// TestAutoMergeCleanPullRequest: on an adopted repo that does not allow auto-merge and whose
// pull request is already mergeable (nothing to wait for), fleetbot allows auto-merge (a
// managed setting), GitHub refuses it as "clean", and fleetbot merges the pull request at once
// when main's protection is what fleetbot wants (here: a platform that wants none beyond
// protection itself), pinned to the head fleetbot pushed.
func TestAutoMergeCleanPullRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	np := autoMergeRepo(t, e)
	protectWithoutReview(t, e)
	np.Protection = &policy.Protection{Branch: "main"}
	p, err := e.forge(t, false).OpenPR(context.Background(), "acme", "adopted", np)
	require.NoError(t, err)
	assert.Equal(t, pr.StateMerged, p.State)
	assert.True(t, e.srv.Repo("acme", "adopted").GetAllowAutoMerge(), "the setting converged")
	ps := e.srv.Pulls("acme", "adopted")
	require.Len(t, ps, 1)
	assert.True(t, ps[0].GetMerged())
	assert.Equal(t, np.HeadSHA, ps[0].GetHead().GetSHA())
	_, ok := e.srv.File("acme", "adopted", "main", "x.yaml")
	assert.True(t, ok, "the change is on main")
}

// TestAutoMergeRefusedPrecisely: when GitHub refuses the direct merge of a clean pull request,
// or refuses to allow auto-merge on the repo, the error says which pull request, what GitHub
// answered and what to do.
func TestAutoMergeRefusedPrecisely(t *testing.T) {
	t.Parallel()
	t.Run("merge refused", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		np := autoMergeRepo(t, e)
		protectWithoutReview(t, e)
		np.Protection = &policy.Protection{Branch: "main"}
		e.srv.Fault("PUT /repos/{owner}/{repo}/pulls/{number}/merge", githubtest.FaultSpec{Status: 405, Message: "Merge commits are not allowed on this repository."})
		_, err := e.forge(t, false).OpenPR(context.Background(), "acme", "adopted", np)
		require.ErrorIs(t, err, ghforge.ErrAutoMerge)
		for _, want := range []string{"acme/adopted", "#1", "already mergeable", "Pull request is in clean status", "Merge commits are not allowed", "merge it by hand"} {
			assert.Contains(t, err.Error(), want)
		}
		assert.False(t, e.srv.Pulls("acme", "adopted")[0].GetMerged())
	})
	t.Run("setting refused", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		np := autoMergeRepo(t, e)
		e.srv.Fault("PATCH /repos/{owner}/{repo}", githubtest.FaultSpec{Status: 403, Message: "Resource not accessible by integration"})
		_, err := e.forge(t, false).OpenPR(context.Background(), "acme", "adopted", np)
		require.ErrorIs(t, err, ghforge.ErrAutoMerge)
		for _, want := range []string{"acme/adopted", "does not allow auto-merge", "administration", "Resource not accessible by integration"} {
			assert.Contains(t, err.Error(), want)
		}
	})
}

// TestCreateRepoTwice: creating a repo again (the first answer lost, or a stale view) continues
// with the repo fleetbot made; a repo of that name that fleetbot did not make is an error that
// says so, and is left as it is.
func TestCreateRepoTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := pr.RepoSpec{Owner: "acme", Repo: "cluster-x", Kind: fanout.KindCluster, Name: "x", DefaultBranch: "main"}
	require.NoError(t, e.forge(t, false).CreateRepo(context.Background(), spec))
	require.NoError(t, e.forge(t, false).CreateRepo(context.Background(), spec), "again: continues")
	assert.Contains(t, e.srv.Repo("acme", "cluster-x").Topics, ghforge.ManagedTopic)

	e.srv.CreateRepo("acme", "cluster-y", nil)
	spec.Repo, spec.Name = "cluster-y", "y"
	err := e.forge(t, false).CreateRepo(context.Background(), spec)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "fleetbot did not create it")
	assert.Empty(t, e.srv.Repo("acme", "cluster-y").Topics, "left as it is")
}

// TestLostWriteResponses: whichever write of a first apply (of one cluster and one workspace repo
// of the example) loses its answer after GitHub acted, the next run converges (a new process,
// same cache) and the one after has nothing to do: one pull request per repo, every repo managed
// (topics) and protected, no write.
func TestLostWriteResponses(t *testing.T) {
	t.Parallel()
	for _, route := range []string{
		"POST /orgs/{org}/repos",
		"PUT /repos/{owner}/{repo}/topics",
		"PUT /repos/{owner}/{repo}/contents/{path...}",
		"POST /repos/{owner}/{repo}/git/trees",
		"POST /repos/{owner}/{repo}/git/commits",
		"POST /repos/{owner}/{repo}/git/refs",
		"POST /api/graphql updateRefs", // the bootstrap commit replacing an empty repo's placeholder
		"PUT /repos/{owner}/{repo}/branches/{branch}/protection",
		"PUT /orgs/{org}/teams/{team_slug}/repos/{owner}/{repo}",
		"POST /repos/{owner}/{repo}/pulls",
		"POST /repos/{owner}/{repo}/issues/{number}/labels",
	} {
		t.Run(route, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.targets = oneOfEachKind(t, e.targets) // the fault hits one repo; one bystander of the other kind
			mutation := ""
			if r, ok := strings.CutSuffix(route, " updateRefs"); ok {
				route, mutation = r, "updateRefs" // one GraphQL mutation, not the scans
			}
			e.srv.Fault(route, githubtest.FaultSpec{LoseResponse: true, Times: 1, Mutation: mutation})
			_, _ = reconcile.Apply(context.Background(), e.forge(t, false), e.repo, e.targets, reconcile.Options{Source: "c0ffee"})
			e.srv.ClearFaults()
			lost := false
			for _, r := range e.srv.Requests() {
				lost = lost || (r.Route == route && r.Status == 0)
			}
			require.True(t, lost, "the fault fired")
			rep := e.apply(t, e.forge(t, false))
			for _, r := range rep.Results {
				assert.NoError(t, r.Err, r.Line())
			}
			e.srv.ResetLog()
			rep = e.apply(t, e.forge(t, false))
			for _, r := range rep.Results {
				assert.Equal(t, pr.ActionNoop, r.Action, r.Line())
			}
			assert.Zero(t, totalWrites(e), "converged: no writes")
			managed, err := e.forge(t, true).ListManaged(context.Background(), "acme")
			require.NoError(t, err)
			assert.Len(t, managed, len(e.targets), "every repo carries fleetbot's topics")
			for _, tg := range e.targets {
				assert.Len(t, e.srv.Pulls("acme", tg.Repo), 1, "%s: one pull request", tg.Repo)
				assert.True(t, e.srv.Protected("acme", tg.Repo, "main"), "%s protected", tg.Repo)
			}
		})
	}
}

// oneOfEachKind returns the first cluster target and the first workspace target.
func oneOfEachKind(t *testing.T, targets []*fanout.Target) []*fanout.Target {
	t.Helper()
	var out []*fanout.Target
	seen := map[fanout.Kind]bool{}
	for _, tg := range targets {
		if !seen[tg.Kind] {
			seen[tg.Kind] = true
			out = append(out, tg)
		}
	}
	require.True(t, seen[fanout.KindCluster] && seen[fanout.KindWorkspace], "the example has clusters and workspaces")
	return out
}

// setMergeAuto switches the platform to pullRequests.merge: auto and renders the targets again.
func setMergeAuto(t *testing.T, e *env) {
	t.Helper()
	e.repo.Platform.Spec.PullRequests.Merge = control.MergeAuto
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(e.repo)
	require.NoError(t, err)
	e.targets = targets
}

// TestAllowAutoMergeIsManaged: "Allow auto-merge" is a managed setting. Repos fleetbot created
// while merge was manual (or adopted) do not allow it; once the platform says merge: auto, plan
// shows the drift on every repo, apply turns the setting on (no pull request needed), and the
// next plan is clean. The scan reads the setting with the branch heads: no request of its own.
func TestAllowAutoMergeIsManaged(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.apply(t, e.forge(t, false))
	for _, tg := range e.targets {
		require.False(t, e.srv.Repo("acme", tg.Repo).GetAllowAutoMerge())
	}
	setMergeAuto(t, e)
	plan, err := reconcile.Plan(context.Background(), e.forge(t, true), e.repo, e.targets, reconcile.Options{Source: "c0ffee"})
	require.NoError(t, err)
	for _, r := range plan.Results {
		require.NotNil(t, r.Access, r.Line())
		assert.Contains(t, strings.Join(r.Access.Drift, "\n"), "allow auto-merge", r.Line())
	}
	e.apply(t, e.forge(t, false))
	for _, tg := range e.targets {
		assert.True(t, e.srv.Repo("acme", tg.Repo).GetAllowAutoMerge(), "%s allows auto-merge", tg.Repo)
	}
	plan, err = reconcile.Plan(context.Background(), e.forge(t, true), e.repo, e.targets, reconcile.Options{Source: "c0ffee"})
	require.NoError(t, err)
	for _, r := range plan.Results {
		assert.Nil(t, r.Access, r.Line())
	}
}
