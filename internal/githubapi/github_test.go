package githubapi

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// ghEnv is the webhook service wired to a fake GitHub as serve wires it to GitHub: the control
// repo read through the REST API, check runs on it, the GitHub forge for the target repos.
type ghEnv struct {
	srv    *githubtest.Server
	ctl    *GitHubControl
	svc    *webhook.Service
	forges map[app.ForgeMode]int
}

func newGHEnv(t *testing.T, verdict webhook.Verdict) *ghEnv {
	t.Helper()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	repo, err := control.Load(readControl(t))
	require.NoError(t, err)
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
	require.NoError(t, err)
	teams := map[string]bool{}
	for _, tg := range targets {
		for slug := range tg.Access.Teams {
			if !teams[slug] {
				teams[slug] = true
				srv.CreateTeam("acme", slug)
			}
		}
	}
	files := map[string]string{}
	for p, f := range readControl(t) {
		files[p] = string(f.Data)
	}
	srv.CreateRepo("acme", "control", files)
	ctl, err := NewGitHubControl(srv.Client(), "acme/control")
	require.NoError(t, err)
	checks, err := NewGitHubChecks(srv.ClientWithToken(srv.InstallationToken("acme")), "acme/control", "")
	require.NoError(t, err)
	e := &ghEnv{srv: srv, ctl: ctl, forges: map[app.ForgeMode]int{}}
	forges := func(ctx context.Context, owner string, mode app.ForgeMode) (reconcile.Forge, error) {
		e.forges[mode]++
		c, err := ghforge.New(ctx, ghforge.Config{
			APIURL: srv.APIURL(), AppID: srv.AppID(), PrivateKey: srv.AppPrivateKeyPEM(), Owner: owner,
			ReadOnly: mode == app.ForgePlan, Budget: ghforge.BudgetConfig{PerMinute: 10000, PerHour: 100000, MinInterval: -1},
		})
		if err != nil {
			return nil, err
		}
		return ghforge.NewForge(c, ghforge.ForgeOptions{}), nil
	}
	e.svc, err = webhook.NewService(webhook.ServiceConfig{Control: ctl, Runner: app.Config{}.ServiceRunner("acme/control", forges),
		Checks: checks, Verdict: verdict})
	require.NoError(t, err)
	return e
}

// commitLinks commits symlinks (path -> target) on top of the control repo's main, through
// the Git Data API as a git push would, and returns the commit.
func (e *ghEnv) commitLinks(t *testing.T, links map[string]string) string {
	t.Helper()
	ctx := context.Background()
	api := e.srv.Client()
	ref, _, err := api.Git.GetRef(ctx, "acme", "control", "heads/main")
	require.NoError(t, err)
	parent, _, err := api.Git.GetCommit(ctx, "acme", "control", ref.GetObject().GetSHA())
	require.NoError(t, err)
	var entries []*gh.TreeEntry
	for p, target := range links {
		entries = append(entries, &gh.TreeEntry{Path: gh.String(p), Mode: gh.String("120000"), Type: gh.String("blob"), Content: gh.String(target)})
	}
	tree, _, err := api.Git.CreateTree(ctx, "acme", "control", parent.GetTree().GetSHA(), entries)
	require.NoError(t, err)
	c, _, err := api.Git.CreateCommit(ctx, "acme", "control", &gh.Commit{Message: gh.String("links"), Tree: tree,
		Parents: []*gh.Commit{{SHA: parent.SHA}}}, nil)
	require.NoError(t, err)
	_, _, err = api.Git.UpdateRef(ctx, "acme", "control", &gh.Reference{Ref: gh.String("refs/heads/main"), Object: &gh.GitObject{SHA: c.SHA}}, false)
	require.NoError(t, err)
	return c.GetSHA()
}

// targetWrites counts the writes the fake saw on repos other than the control repo, token
// minting aside.
func (e *ghEnv) targetWrites() int {
	n := 0
	for _, r := range e.srv.Requests() {
		if r.Class == githubtest.Read || strings.HasPrefix(r.Route, "POST /app") || strings.Contains(r.Path, "/repos/acme/control/") {
			continue
		}
		n++
	}
	return n
}

func (e *ghEnv) checkRun(t *testing.T, sha string) *gh.CheckRun {
	t.Helper()
	runs, _, err := e.srv.Client().Checks.ListCheckRunsForRef(context.Background(), "acme", "control", sha, nil)
	require.NoError(t, err)
	require.Len(t, runs.CheckRuns, 1, "one check run on %s", sha)
	return runs.CheckRuns[0]
}

// TestServiceAppliesTheControlRepoFromGitHub: a push to the control repo's default branch
// makes the service read it through the API and open one PR per target repo; the same job
// again writes nothing.
func TestServiceAppliesTheControlRepoFromGitHub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newGHEnv(t, nil)
	require.NoError(t, e.svc.Execute(ctx, webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: "push"}, nil))
	pulls := e.srv.Pulls("acme", "cluster-prod-eu-1")
	require.Len(t, pulls, 1)
	assert.Equal(t, "fleetbot/sync", pulls[0].GetHead().GetRef())
	reps := e.svc.Reports()
	head, err := e.ctl.Head(ctx)
	require.NoError(t, err)
	assert.Equal(t, head, reps.Source, "the report names the control commit applied")

	e.srv.ResetLog()
	require.NoError(t, e.svc.Execute(ctx, webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: "resync"}, nil))
	assert.Zero(t, e.targetWrites(), "a second apply of the same commit writes nothing")
}

// TestHostileControlLinksOverTheAPI: symlinks that leave the control repo, loop or dangle,
// read through the GitHub API, are refused by the same policy as a checkout: an apply fails
// with issues naming each link and its target, and nothing is written to any target repo; the
// check run of that commit fails with an annotation per link.
func TestHostileControlLinksOverTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newGHEnv(t, nil)
	links := map[string]string{
		"clusters/abs.yaml":         "/etc/passwd",
		"clusters/up.yaml":          "../../secret.yaml",
		"workspaces/loop.yaml":      "loop2.yaml",
		"workspaces/loop2.yaml":     "loop.yaml",
		"catalog/podinfo/gone.yaml": "nowhere.yaml",
	}
	sha := e.commitLinks(t, links)
	e.srv.ResetLog()

	err := e.svc.Execute(ctx, webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: "push"}, nil)
	var is control.Issues
	require.True(t, errors.As(err, &is), "want issues, got %v", err)
	msg := err.Error()
	for _, want := range []string{
		`clusters/abs.yaml: symlink leaves the control repo: its target "/etc/passwd" is absolute`,
		`clusters/up.yaml: symlink leaves the control repo: its target "../../secret.yaml" resolves outside it`,
		`workspaces/loop.yaml: symlink loop`,
		`catalog/podinfo/gone.yaml: symlink target "nowhere.yaml" does not exist in the control repo`,
	} {
		assert.Contains(t, msg, want)
	}
	assert.Zero(t, e.targetWrites(), "an invalid control repo writes nothing")
	assert.Zero(t, e.forges[app.ForgeApply], "no forge is even opened")

	require.NoError(t, e.svc.Execute(ctx, webhook.Job{Kind: webhook.KindCheck, Repo: "acme/control", SHA: sha, PR: 1}, nil))
	cr := e.checkRun(t, sha)
	assert.Equal(t, checkrun.ConclusionFailure, cr.GetConclusion())
	assert.Contains(t, cr.GetOutput().GetTitle(), "invalid control repo")
	assert.Contains(t, cr.GetOutput().GetSummary(), `its target "/etc/passwd" is absolute`)
	var paths []string
	anns, err := e.srv.CheckRunAnnotations(cr.GetID())
	require.NoError(t, err)
	for _, a := range anns {
		paths = append(paths, a.GetPath())
	}
	for p := range links {
		if p != "workspaces/loop2.yaml" {
			assert.Contains(t, paths, p, "an annotation on each refused link")
		}
	}
	assert.Zero(t, e.targetWrites(), "a check writes nothing to the target repos")
}

// TestInRepoControlLinkOverTheAPI: a symlink to a file elsewhere in the control repo is read
// through the API as that file, as from a checkout.
func TestInRepoControlLinkOverTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newGHEnv(t, nil)
	files := readControl(t)
	e.srv.Commit("acme", "control", "main", "shared cluster", map[string]string{
		"shared/edge-9.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge-9\n  labels: {env: prod}\n",
	})
	sha := e.commitLinks(t, map[string]string{"clusters/edge-9.yaml": "../shared/edge-9.yaml"})
	repo, err := e.ctl.Load(ctx, sha)
	require.NoError(t, err)
	var names []string
	for _, c := range repo.Clusters {
		names = append(names, c.Metadata.Name)
	}
	assert.Contains(t, names, "edge-9", "the linked cluster is loaded")
	assert.Len(t, repo.Clusters, len(names))
	_, isFile := files["clusters/edge-9.yaml"]
	assert.False(t, isFile)
}

// TestPausedControlOverTheAPI: serve reads rollout/paused from the control repo's commit as a
// checkout has it, so `fleetbot rollout pause` pushed to GitHub pauses the service's rollouts.
func TestPausedControlOverTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newGHEnv(t, nil)
	e.srv.Commit("acme", "control", "main", "rollout: pause", map[string]string{"rollout/paused": "staging alerts\n"})
	sha, err := e.ctl.Head(ctx)
	require.NoError(t, err)
	repo, err := e.ctl.Load(ctx, sha)
	require.NoError(t, err)
	require.NotNil(t, repo.Paused, "rollout/paused is read")
	assert.Equal(t, "staging alerts", repo.Paused.Reason)
}

// fixedVerdict is a Verdict with a fixed finding, recording what it was asked.
type fixedVerdict struct {
	res webhook.VerdictResult
	got []webhook.VerdictInput
}

func (v *fixedVerdict) CheckControl(_ context.Context, in webhook.VerdictInput) (webhook.VerdictResult, error) {
	v.got = append(v.got, in)
	return v.res, nil
}

// TestCheckRunPlansAPullRequest: a control-repo pull request gets one check run that plans
// the fleet at its head on a read-only forge (nothing written to target repos), names how
// many repos change, and carries "check control"'s verdict, whose worse conclusion wins; the
// verdict sees the base and head trees and the author GitHub reports.
func TestCheckRunPlansAPullRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := &fixedVerdict{res: webhook.VerdictResult{Conclusion: checkrun.ConclusionNeutral, Verdict: "needs platform review", Markdown: "**who may**"}}
	e := newGHEnv(t, v)
	base, err := e.ctl.Head(ctx)
	require.NoError(t, err)
	api := e.srv.Client()
	_, _, err = api.Git.CreateRef(ctx, "acme", "control", &gh.Reference{Ref: gh.String("refs/heads/edge"), Object: &gh.GitObject{SHA: gh.String(base)}})
	require.NoError(t, err)
	head := e.srv.Commit("acme", "control", "edge", "edge-2", map[string]string{
		"clusters/edge-2.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: edge-2\n  labels: {env: prod}\n",
	})
	p, _, err := api.PullRequests.Create(ctx, "acme", "control", &gh.NewPullRequest{Title: gh.String("edge-2"), Head: gh.String("edge"), Base: gh.String("main")})
	require.NoError(t, err)
	e.srv.ResetLog()

	require.NoError(t, e.svc.Execute(ctx, webhook.Job{Kind: webhook.KindCheck, Repo: "acme/control", SHA: head, PR: p.GetNumber()}, nil))
	cr := e.checkRun(t, head)
	assert.Equal(t, checkrun.ConclusionNeutral, cr.GetConclusion(), "the verdict's neutral beats the plan's success")
	assert.Contains(t, cr.GetOutput().GetTitle(), "target repos change")
	assert.Contains(t, cr.GetOutput().GetTitle(), "check control: needs platform review")
	assert.Contains(t, cr.GetOutput().GetSummary(), "**who may**")
	assert.Contains(t, cr.GetOutput().GetSummary(), "nothing is written before")
	assert.Zero(t, e.targetWrites(), "a check never writes to a target repo")
	assert.Equal(t, 1, e.forges[app.ForgePlan])
	require.Len(t, v.got, 1)
	assert.Equal(t, base, v.got[0].BaseSHA, "the base comes from the pull request")
	assert.Equal(t, head, v.got[0].HeadSHA)
	assert.Equal(t, githubtest.DefaultUser, v.got[0].Author)
	assert.Equal(t, "acme", v.got[0].Owner)
}

// TestGitHubControlRefusesWhatIsNotACommit: the reader takes commit SHAs only, and names of
// the form owner/name.
func TestGitHubControlRefusesWhatIsNotACommit(t *testing.T) {
	t.Parallel()
	e := newGHEnv(t, nil)
	_, err := e.ctl.Load(context.Background(), "main")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `"main" is not a commit SHA`)
	_, err = e.ctl.Load(context.Background(), strings.Repeat("a", 40))
	assert.True(t, errors.Is(err, control.ErrUnreadable), "a missing commit is unreadable, not invalid: %v", err)
	for _, bad := range []string{"control", "acme/", "/control", "acme/control/x"} {
		_, err := NewGitHubControl(e.srv.Client(), bad)
		assert.Error(t, err, bad)
	}
	_, err = NewGitHubChecks(e.srv.Client(), "control", "")
	assert.Error(t, err)
}

// readControl is the example control repo (testdata/control) in memory.
func readControl(t *testing.T) fstest.MapFS {
	t.Helper()
	root := filepath.Join("..", "..", "testdata", "control")
	files := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(os.DirFS(root), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(root, p))
		files[p] = &fstest.MapFile{Data: b, Mode: 0o644}
		return err
	}))
	return files
}

// TestControlReadsTheRolloutRecords: serve reads what control.Load reads, the rollout records
// (approvals, skips, the rollback mark, the pause) and the CODEOWNERS saying who may approve
// included: without them an approval committed to the control repo never took effect in serve.
func TestControlReadsTheRolloutRecords(t *testing.T) {
	for _, p := range []string{"platform.yaml", "clusters/a.yaml", "rollout/paused", "rollout/approvals/eu.yaml",
		"rollout/skips/c1.yaml", "rollout/rollback.yaml", ".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"} {
		assert.True(t, relevant(p), p)
	}
	for _, p := range []string{"README.md", "docs/x.md", ".github/workflows/ci.yaml"} {
		assert.False(t, relevant(p), p)
	}
}
