package github_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

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

// authRecorder records the Authorization headers of git smart-HTTP requests.
// afterRefs, when set, runs once after the refs of a push were read (the body read in full
// first), to move a branch between fleetbot's lease check and its push.
type authRecorder struct {
	next      http.RoundTripper
	mu        sync.Mutex
	git       []string
	afterRefs func()
}

func (a *authRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if !strings.Contains(r.URL.Path, ".git/") {
		return a.next.RoundTrip(r)
	}
	a.mu.Lock()
	a.git = append(a.git, r.Header.Get("Authorization"))
	hook := a.afterRefs
	if strings.HasSuffix(r.URL.Path, "/info/refs") {
		a.afterRefs = nil
	} else {
		hook = nil
	}
	a.mu.Unlock()
	resp, err := a.next.RoundTrip(r)
	if err != nil || hook == nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	hook()
	return resp, nil
}

// transportForge opens a forge writing content with tr, logging into logs.
func (e *env) transportForge(t *testing.T, tr ghforge.ContentTransport, logs *bytes.Buffer) (*ghforge.Forge, *authRecorder) {
	t.Helper()
	rec := &authRecorder{next: http.DefaultTransport.(*http.Transport).Clone()}
	c, err := ghforge.New(context.Background(), ghforge.Config{
		APIURL: e.srv.APIURL(), AppID: e.srv.AppID(), PrivateKey: e.srv.AppPrivateKeyPEM(), Owner: "acme",
		Budget: e.budget, Transport: rec,
	})
	require.NoError(t, err)
	opts := ghforge.ForgeOptions{CacheDir: t.TempDir(), ContentTransport: tr, Now: e.srv.Now}
	if logs != nil {
		opts.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return ghforge.NewForge(c, opts), rec
}

func clusterTarget(t *testing.T, e *env) *fanout.Target {
	t.Helper()
	for _, x := range e.targets {
		if x.Kind == fanout.KindCluster {
			x.Files = maps.Clone(x.Files)
			x.Scaffolds = maps.Clone(x.Scaffolds)
			return x
		}
	}
	t.Fatal("no cluster target")
	return nil
}

// applyStep plans and applies tg, checking that what the forge priced is what the fake counted,
// and returns the decision and the writes (all, content-creating) it cost.
func applyStep(t *testing.T, e *env, f *ghforge.Forge, tg *fanout.Target, want pr.Action) (*pr.Decision, cost) {
	t.Helper()
	ctx := context.Background()
	opts := pr.Options{Branch: "fleetbot/sync", Labels: []string{"fleetbot"}, Source: "c0ffee"}
	e.srv.ResetLog()
	d, err := pr.Plan(ctx, f, tg, opts)
	require.NoError(t, err)
	require.Equal(t, want, d.Action, d.Reason)
	require.NoError(t, f.BeforeWrite(ctx, tg.Owner, tg.Repo, d.Cost()))
	_, err = pr.Apply(ctx, f, tg, d, opts)
	require.NoError(t, err)
	got := fakeWrites(e)
	writes, content := f.Requests(d.Cost())
	assert.Equal(t, writes, got.writes, "writes priced vs the fake's (cost %+v)", d.Cost())
	// fleetbot counts a ref move as content creation, the fake (like GitHub's documentation)
	// does not: fleetbot may only over-count.
	assert.LessOrEqual(t, got.content, content, "content-creating writes priced vs the fake's (cost %+v)", d.Cost())
	return d, got
}

// headOf returns the tree, message and parents of a branch's head in the fake.
func headOf(t *testing.T, e *env, repo, branch string) (sha, tree, msg string, parents []string) {
	t.Helper()
	sha = e.srv.Branch("acme", repo, branch)
	require.NotEmpty(t, sha, "branch %s of %s", branch, repo)
	c, _, err := e.srv.Client().Git.GetCommit(context.Background(), "acme", repo, sha)
	require.NoError(t, err)
	for _, p := range c.Parents {
		parents = append(parents, p.GetSHA())
	}
	return sha, c.GetTree().GetSHA(), c.GetMessage(), parents
}

// TestGitPushWritesWhatTheAPIWrites: the same target written with the Git Data API and with
// git push gives the same trees, messages (Fleetbot-Tree trailer included) and parents on the
// default branch and the bot branch, for a new repo and an update; the pushes go out as basic
// auth x-access-token, and a changed repo costs fewer content-creating writes.
func TestGitPushWritesWhatTheAPIWrites(t *testing.T) {
	t.Parallel()
	type result struct {
		costs              []cost
		defTree, defMsg    string
		botTree, botMsg    string
		botParentIsDefault bool
	}
	run := func(tr ghforge.ContentTransport) (result, *authRecorder) {
		e := newEnv(t)
		f, rec := e.transportForge(t, tr, nil)
		tg := clusterTarget(t, e)
		tg.Files["platform/logo.bin"] = []byte{0x89, 'P', 'N', 'G', 0, 1, 2}
		var r result
		_, c := applyStep(t, e, f, tg, pr.ActionCreate)
		r.costs = append(r.costs, c)
		tg.Files["flux/fleetbot.yaml"] = append(append([]byte{}, tg.Files["flux/fleetbot.yaml"]...), "# changed\n"...)
		tg.Files["platform/logo.bin"] = []byte{0x89, 'P', 'N', 'G', 0, 9, 9}
		_, c = applyStep(t, e, f, tg, pr.ActionUpdate)
		r.costs = append(r.costs, c)
		defSHA, defTree, defMsg, _ := headOf(t, e, tg.Repo, "main")
		_, botTree, botMsg, botParents := headOf(t, e, tg.Repo, "fleetbot/sync")
		r.defTree, r.defMsg, r.botTree, r.botMsg = defTree, defMsg, botTree, botMsg
		r.botParentIsDefault = len(botParents) == 1 && botParents[0] == defSHA
		assert.True(t, e.srv.Protected("acme", tg.Repo, "main"), "%s: the new repo's default branch is protected once it exists", tr)
		ps := e.srv.Pulls("acme", tg.Repo)
		require.Len(t, ps, 1)
		assert.Equal(t, e.srv.Branch("acme", tg.Repo, "fleetbot/sync"), ps[0].GetHead().GetSHA(), "the pull request shows the pushed head")
		return r, rec
	}
	api, _ := run(ghforge.ContentTransportAPI)
	git, rec := run(ghforge.ContentTransportGit)
	assert.Equal(t, api.defTree, git.defTree, "default branch tree")
	assert.Equal(t, api.defMsg, git.defMsg)
	assert.Equal(t, api.botTree, git.botTree, "bot branch tree")
	assert.Equal(t, api.botMsg, git.botMsg)
	assert.Contains(t, git.botMsg, "Fleetbot-Tree: "+git.botTree)
	assert.True(t, api.botParentIsDefault)
	assert.True(t, git.botParentIsDefault)
	require.NotEmpty(t, rec.git)
	for _, h := range rec.git {
		assert.True(t, strings.HasPrefix(h, "Basic "), "git over HTTPS takes basic auth, got %q", strings.Fields(h + " x")[0])
	}
	for i, step := range []string{"new repo", "update"} {
		t.Logf("%s: writes %d (content-creating %d) with the Git Data API, %d (%d) with git push",
			step, api.costs[i].writes, api.costs[i].content, git.costs[i].writes, git.costs[i].content)
		assert.Less(t, git.costs[i].content, api.costs[i].content, step)
	}
	// New repo: 14 writes against 7: repo, topics, team grant, protection, one push of the
	// bootstrap and the bot branch together, pull request, labels; 3 of them content-creating
	// (issue 34: at most 3). Update of a text and a binary file: blob, tree, commit, ref move
	// and the PR edit against one push and the PR edit (1 content-creating: at most 1).
	assert.Equal(t, []int{14, 5}, []int{api.costs[0].writes, api.costs[1].writes})
	assert.Equal(t, []int{7, 2}, []int{git.costs[0].writes, git.costs[1].writes})
	assert.Equal(t, []int{3, 1}, []int{git.costs[0].content, git.costs[1].content})
}

// TestGitPushLeaseKeepsAHumanPush: a human pushes to the bot branch after fleetbot read it;
// fleetbot's push, leased on the value it read, does not overwrite that commit: Apply fails
// with pr.ErrRefMoved, and the next plan blocks the pull request as with the Git Data API.
func TestGitPushLeaseKeepsAHumanPush(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	f, _ := e.transportForge(t, ghforge.ContentTransportGit, nil)
	tg := clusterTarget(t, e)
	applyStep(t, e, f, tg, pr.ActionCreate)

	tg.Files["flux/fleetbot.yaml"] = append(append([]byte{}, tg.Files["flux/fleetbot.yaml"]...), "# changed\n"...)
	opts := pr.Options{Branch: "fleetbot/sync", Labels: []string{"fleetbot"}, Source: "c0ffee"}
	d, err := pr.Plan(ctx, f, tg, opts)
	require.NoError(t, err)
	require.Equal(t, pr.ActionUpdate, d.Action)
	e.srv.CreateUser("alice")
	human := e.srv.CommitAs("alice", "acme", tg.Repo, "fleetbot/sync", "hand fix", map[string]string{"notes.txt": "mine\n"})
	_, err = pr.Apply(ctx, f, tg, d, opts)
	require.ErrorIs(t, err, pr.ErrRefMoved)
	assert.Contains(t, err.Error(), "fleetbot/sync")
	assert.Equal(t, human, e.srv.Branch("acme", tg.Repo, "fleetbot/sync"), "the human commit stays")

	d, err = pr.Plan(ctx, f, tg, opts)
	require.NoError(t, err)
	assert.Equal(t, pr.ActionBlocked, d.Action, d.Reason)
}

// TestGitPushLeaseCheckedByTheServer: a human push lands after fleetbot read the refs (its
// own lease check passed) and before its push: the server refuses the push on the old value
// it names, and the human commit stays.
func TestGitPushLeaseCheckedByTheServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var logs bytes.Buffer
	f, rec := e.transportForge(t, ghforge.ContentTransportGit, &logs)
	t.Cleanup(func() { t.Log(logs.String()) })
	tg := clusterTarget(t, e)
	applyStep(t, e, f, tg, pr.ActionCreate)
	e.srv.CreateUser("alice")

	tg.Files["flux/fleetbot.yaml"] = append(append([]byte{}, tg.Files["flux/fleetbot.yaml"]...), "# changed\n"...)
	opts := pr.Options{Branch: "fleetbot/sync", Labels: []string{"fleetbot"}, Source: "c0ffee"}
	d, err := pr.Plan(ctx, f, tg, opts)
	require.NoError(t, err)
	require.Equal(t, pr.ActionUpdate, d.Action)
	var human string
	rec.mu.Lock()
	rec.afterRefs = func() {
		human = e.srv.CommitAs("alice", "acme", tg.Repo, "fleetbot/sync", "hand fix", map[string]string{"notes.txt": "mine\n"})
	}
	rec.mu.Unlock()
	_, err = pr.Apply(ctx, f, tg, d, opts)
	require.ErrorIs(t, err, pr.ErrRefMoved)
	require.NotEmpty(t, human, "the human push happened between the refs and the push")
	assert.Equal(t, human, e.srv.Branch("acme", tg.Repo, "fleetbot/sync"), "the human commit stays")
	d, err = pr.Plan(ctx, f, tg, opts)
	require.NoError(t, err)
	assert.Equal(t, pr.ActionBlocked, d.Action, d.Reason)
}

// TestGitPushRefusedFallsBackToTheAPI: a refused push (403, as for a token without
// contents:write over git, or a protected branch) is written through the Git Data API as the
// very same commit, and the log of the refusal holds no token.
func TestGitPushRefusedFallsBackToTheAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var logs bytes.Buffer
	f, rec := e.transportForge(t, ghforge.ContentTransportGit, &logs)
	e.srv.Fault("POST /{owner}/{repo}/git-receive-pack", githubtest.FaultSpec{Status: http.StatusForbidden,
		Message: "Permission to acme/x.git denied to fleetbot[bot]."})
	tg := clusterTarget(t, e)
	ctx := context.Background()
	opts := pr.Options{Branch: "fleetbot/sync", Labels: []string{"fleetbot"}, Source: "c0ffee"}
	d, err := pr.Plan(ctx, f, tg, opts)
	require.NoError(t, err)
	_, err = pr.Apply(ctx, f, tg, d, opts)
	require.NoError(t, err)
	_, tree, _, _ := headOf(t, e, tg.Repo, "fleetbot/sync")
	assert.Equal(t, d.Tree, tree)
	ps := e.srv.Pulls("acme", tg.Repo)
	require.Len(t, ps, 1)
	assert.Contains(t, logs.String(), "git push of several branches refused", "the new repo's joint push of main and the bot branch")
	assert.Contains(t, logs.String(), "git push refused")
	assert.NotEmpty(t, e.srv.Branch("acme", tg.Repo, "main"), "the bootstrap landed through the API")
	assert.True(t, e.srv.Protected("acme", tg.Repo, "main"), "and the default branch is protected")
	tok := e.srv.InstallationToken("acme")
	require.NotEmpty(t, tok)
	assert.NotContains(t, logs.String(), tok)
	require.NotEmpty(t, rec.git, "a push was tried")
}

// TestGitPushErrorHoldsNoToken: when both the push and the Git Data API are refused, the
// error says what failed where, and holds no token.
func TestGitPushErrorHoldsNoToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var logs bytes.Buffer
	f, _ := e.transportForge(t, ghforge.ContentTransportGit, &logs)
	e.srv.Fault("POST /{owner}/{repo}/git-receive-pack", githubtest.FaultSpec{Status: http.StatusForbidden})
	e.srv.Fault("PUT /repos/{owner}/{repo}/contents/{path...}", githubtest.FaultSpec{Status: http.StatusUnprocessableEntity})
	tg := clusterTarget(t, e)
	ctx := context.Background()
	opts := pr.Options{Branch: "fleetbot/sync", Source: "c0ffee"}
	d, err := pr.Plan(ctx, f, tg, opts)
	require.NoError(t, err)
	_, err = pr.Apply(ctx, f, tg, d, opts)
	require.Error(t, err)
	t.Log(err)
	tok := e.srv.InstallationToken("acme")
	require.NotEmpty(t, tok)
	assert.NotContains(t, err.Error(), tok)
	assert.NotContains(t, logs.String(), tok)
	assert.Contains(t, err.Error(), tg.FullName())
}

// TestGitPushNetworkErrorFallsBack: a push whose connection drops is written through the Git
// Data API as the same commit.
func TestGitPushNetworkErrorFallsBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var logs bytes.Buffer
	f, _ := e.transportForge(t, ghforge.ContentTransportGit, &logs)
	tg := clusterTarget(t, e)
	applyStep(t, e, f, tg, pr.ActionCreate)
	e.srv.Fault("POST /{owner}/{repo}/git-receive-pack", githubtest.FaultSpec{Drop: true})
	tg.Files["flux/fleetbot.yaml"] = append(append([]byte{}, tg.Files["flux/fleetbot.yaml"]...), "# changed\n"...)
	ctx := context.Background()
	opts := pr.Options{Branch: "fleetbot/sync", Labels: []string{"fleetbot"}, Source: "c0ffee"}
	d, err := pr.Plan(ctx, f, tg, opts)
	require.NoError(t, err)
	require.Equal(t, pr.ActionUpdate, d.Action)
	_, err = pr.Apply(ctx, f, tg, d, opts)
	require.NoError(t, err)
	_, tree, _, _ := headOf(t, e, tg.Repo, "fleetbot/sync")
	assert.Equal(t, d.Tree, tree)
	assert.Contains(t, logs.String(), "git push refused")
	// The pull request's marker names the head the fallback wrote: nothing left to do.
	d, err = pr.Plan(ctx, f, tg, opts)
	require.NoError(t, err)
	assert.Equal(t, pr.ActionNoop, d.Action, d.Reason)
}

func TestParseContentTransport(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]ghforge.ContentTransport{"": ghforge.ContentTransportAPI, "api": ghforge.ContentTransportAPI, "GIT": ghforge.ContentTransportGit} {
		got, err := ghforge.ParseContentTransport(in)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	_, err := ghforge.ParseContentTransport("ssh")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"ssh"`)
}

// TestGitPushUnderContentLimits: the same fan-out (n new repos, then an update of each) under
// GitHub's limits (80 content-creating requests a minute, 500 an hour, enforced by the fake)
// and fleetbot's default budget (which also leaves 1 s between mutations), on one manual clock
// shared by the client and the fake, so the figures are the limits' time, not the machine's:
// git push needs fewer writes and less time, and neither transport is ever refused.
func TestGitPushUnderContentLimits(t *testing.T) {
	t.Parallel()
	const n = 24
	type figures struct {
		createTime, updateTime       time.Duration
		createWrites, updateWrites   int
		createContent, updateContent int
		rejected                     int
	}
	run := func(tr ghforge.ContentTransport) figures {
		srv := githubtest.NewServer(t, githubtest.WithManualClock(),
			githubtest.WithContentCreationLimit(ghforge.DefaultPerMinute, ghforge.DefaultPerHour, true),
			githubtest.WithPrimaryLimit(0))
		srv.CreateTeam("acme", "platform")
		repo := &control.Repo{Platform: &control.Platform{Spec: control.PlatformSpec{
			Owner: "acme", Admins: []string{"platform"}, DefaultBranch: "main",
			PullRequests: control.PullRequestSpec{Branch: "fleetbot/sync"},
		}}, Revision: "c0ffee"}
		var targets []*fanout.Target
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("c%04d", i)
			repo.Clusters = append(repo.Clusters, &control.Cluster{Metadata: control.Meta{Name: name}})
			targets = append(targets, &fanout.Target{
				Kind: fanout.KindCluster, Name: name, Owner: "acme", Repo: "cluster-" + name, DefaultBranch: "main",
				Visibility: "private",
				Files: map[string][]byte{
					"README.md":                []byte("# cluster-" + name + "\n"),
					".github/CODEOWNERS":       []byte("* @acme/platform\n"),
					"platform/monitoring.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: m\n  namespace: monitoring\n"),
				},
				Scaffolds: map[string][]byte{"apps/kustomization.yaml": []byte("resources: []\n")},
				Access:    policy.Access{Teams: map[string]policy.Role{"platform": policy.RoleAdmin}},
			})
		}
		c, err := ghforge.New(context.Background(), ghforge.Config{
			APIURL: srv.APIURL(), AppID: srv.AppID(), PrivateKey: srv.AppPrivateKeyPEM(), Owner: "acme",
			Budget: ghforge.BudgetConfig{Clock: serverTime{srv}, MaxWait: 48 * time.Hour},
		})
		require.NoError(t, err)
		f := ghforge.NewForge(c, ghforge.ForgeOptions{ContentTransport: tr, Now: srv.Now})
		var fig figures
		step := func(want pr.Action) (time.Duration, githubtest.Counts) {
			srv.ResetLog()
			start := srv.Now()
			rep, err := reconcile.Apply(context.Background(), f, repo, targets, reconcile.Options{Concurrency: 4, Source: "c0ffee"})
			require.NoError(t, err)
			for _, r := range rep.Results {
				require.Equal(t, want, r.Action, "%s %s: %s", tr, r.Repo, r.Reason)
			}
			for _, r := range srv.Requests() {
				if r.Status == http.StatusForbidden || r.Status == http.StatusTooManyRequests {
					fig.rejected++
				}
			}
			return srv.Now().Sub(start), srv.Counts()
		}
		d, cn := step(pr.ActionCreate)
		fig.createTime, fig.createWrites, fig.createContent = d, cn.Writes, cn.ContentCreating
		for _, tg := range targets {
			tg.Files["platform/monitoring.yaml"] = append(append([]byte{}, tg.Files["platform/monitoring.yaml"]...), "# changed\n"...)
		}
		d, cn = step(pr.ActionUpdate)
		fig.updateTime, fig.updateWrites, fig.updateContent = d, cn.Writes, cn.ContentCreating
		return fig
	}
	api, git := run(ghforge.ContentTransportAPI), run(ghforge.ContentTransportGit)
	for _, x := range []struct {
		name string
		fig  figures
	}{{"api", api}, {"git", git}} {
		t.Logf("%s, %d repos: create %s (%d writes, %d content-creating), update %s (%d writes, %d content-creating); %d refused",
			x.name, n, x.fig.createTime, x.fig.createWrites, x.fig.createContent, x.fig.updateTime, x.fig.updateWrites, x.fig.updateContent, x.fig.rejected)
		assert.Zero(t, x.fig.rejected, x.name)
	}
	assert.Less(t, git.createWrites, api.createWrites)
	assert.Less(t, git.updateWrites, api.updateWrites)
	assert.Less(t, git.createTime, api.createTime)
	assert.Less(t, git.updateTime, api.updateTime)
}
