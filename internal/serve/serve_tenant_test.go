package serve_test

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// tenantEnv is serve with its tenant check on, against a fake GitHub delivering its webhooks,
// once the first apply converged the fleet.
type tenantEnv struct {
	*serveEnv
	bob   *gh.Client // a workspace admin of payments (push on workspace-payments)
	carol *gh.Client // a platform admin (a code owner of fleetbot's files in every target repo)
}

func startTenantServe(t *testing.T) *tenantEnv {
	t.Helper()
	e := &tenantEnv{serveEnv: startServe(t, serveOptions{webhooks: true, tenantCheck: checkrun.DefaultTenantCheckName})}
	e.waitMetric(appliedOK, 1)
	e.bob = e.gh.ClientWithToken(e.gh.CreateUser("bob"))
	e.gh.AddTeamMember("acme", "payments-devs", "bob", "member")
	e.carol = e.gh.ClientWithToken(e.gh.CreateUser("carol"))
	e.gh.AddTeamMember("acme", "platform", "carol", "member")
	return e
}

// approve approves pull request pr of acme/repo at its current head as carol and bob, so that
// the protection's required reviews (one approval, a code owner's of each changed file; stale
// approvals dismissed) hold and only its required status check can keep it from merging.
func (e *tenantEnv) approve(repo string, pr *gh.PullRequest) {
	e.t.Helper()
	for _, c := range []*gh.Client{e.carol, e.bob} {
		_, _, err := c.PullRequests.CreateReview(context.Background(), "acme", repo, pr.GetNumber(), &gh.PullRequestReviewRequest{Event: gh.String("APPROVE")})
		require.NoError(e.t, err)
	}
}

// tenantRuns are the completed tenant check runs on commit sha of acme/repo, newest first.
func (e *tenantEnv) tenantRuns(repo, sha string) []*gh.CheckRun {
	e.t.Helper()
	name := checkrun.DefaultTenantCheckName
	res, _, err := e.gh.Client().Checks.ListCheckRunsForRef(context.Background(), "acme", repo, sha, &gh.ListCheckRunsOptions{CheckName: &name})
	require.NoError(e.t, err)
	var done []*gh.CheckRun
	for _, cr := range res.CheckRuns {
		if cr.GetStatus() == "completed" && cr.GetApp().GetID() == e.gh.AppID() {
			done = append(done, cr)
		}
	}
	return done
}

// waitTenantRun waits for the n-th completed tenant check run on sha and returns the newest.
func (e *tenantEnv) waitTenantRun(repo, sha string, n int) *gh.CheckRun {
	e.t.Helper()
	e.eventually("tenant check run on "+repo+"@"+sha[:7], func() bool { return len(e.tenantRuns(repo, sha)) >= n })
	return e.tenantRuns(repo, sha)[0]
}

// propose commits files on a new branch of acme/repo from main and opens a pull request of it as
// bob; it returns the pull request.
func (e *tenantEnv) propose(repo, branch string, files map[string]string) *gh.PullRequest {
	e.t.Helper()
	ctx := context.Background()
	main := e.gh.Branch("acme", repo, "main")
	_, _, err := e.gh.Client().Git.CreateRef(ctx, "acme", repo, &gh.Reference{Ref: gh.String("refs/heads/" + branch), Object: &gh.GitObject{SHA: gh.String(main)}})
	require.NoError(e.t, err)
	e.gh.Commit("acme", repo, branch, "change", files)
	p, _, err := e.gh.Client().PullRequests.Create(ctx, "acme", repo, &gh.NewPullRequest{Title: gh.String(branch), Head: gh.String(branch), Base: gh.String("main")})
	require.NoError(e.t, err)
	return p
}

// annotations are the annotations of check run cr as "path:line: message".
func (e *tenantEnv) annotations(cr *gh.CheckRun) []string {
	e.t.Helper()
	anns, err := e.gh.CheckRunAnnotations(cr.GetID())
	require.NoError(e.t, err)
	var out []string
	for _, a := range anns {
		assert.Equal(e.t, "failure", a.GetAnnotationLevel())
		out = append(out, a.GetPath()+":"+strconv.Itoa(a.GetStartLine())+": "+a.GetMessage())
	}
	sort.Strings(out)
	return out
}

// TestServeChecksTenantPullRequests: serve's tenant check is required, from serve's own App, by
// the protection of every workspace and cluster repo; fleetbot's own pull requests pass it; a
// workspace admin's hostile pull request fails it with an annotation on each problem's file and
// line and cannot merge (approved as the protection requires), neither with a commit status nor with another App's check run of the
// same name; fixed, it passes and merges; a cluster repo is checked with the cluster rules; a
// repo fleetbot does not manage gets no check run.
func TestServeChecksTenantPullRequests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := startTenantServe(t)

	// The protection requires the check from fleetbot's App on every workspace and cluster repo.
	for _, repo := range e.targets {
		assert.Equal(t, map[string]int64{checkrun.DefaultTenantCheckName: e.gh.AppID()}, e.gh.RequiredChecks("acme", repo, "main"), repo)
	}
	// fleetbot's own pull requests get the check too, and pass it.
	for _, repo := range e.targets {
		pulls := e.gh.Pulls("acme", repo)
		require.Len(t, pulls, 1, repo)
		cr := e.waitTenantRun(repo, pulls[0].GetHead().GetSHA(), 1)
		assert.Equal(t, "success", cr.GetConclusion(), "%s: %s", repo, cr.GetOutput().GetSummary())
	}
	// fleetbot rendered every file of its own pull requests: their checks read no file.
	for _, r := range e.gh.Requests() {
		if r.Route == "GET /repos/{owner}/{repo}/git/blobs/{sha}" {
			assert.Contains(t, r.Path, "/repos/acme/control/", "a blob read for a tenant check of fleetbot's own pull request")
		}
	}
	// bob, a workspace admin with push only, merges fleetbot's pull request: its check passed.
	fleetbotPR := e.gh.Pulls("acme", "workspace-payments")[0]
	e.approve("workspace-payments", fleetbotPR)
	_, _, err := e.bob.PullRequests.Merge(ctx, "acme", "workspace-payments", fleetbotPR.GetNumber(), "", nil)
	require.NoError(t, err, "fleetbot's pull request passed its check")

	// A hostile change: a cluster-scoped object and a Flux Kustomization with a kubeConfig.
	hostile := e.propose("workspace-payments", "hostile", map[string]string{
		"apps/kustomization.yaml": "resources: [crb.yaml, flux.yaml]\n",
		"apps/crb.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: mine\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: payments, namespace: payments}]\n",
		"apps/flux.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: elsewhere\nspec:\n  interval: 10m\n  path: ./\n  prune: true\n" +
			"  serviceAccountName: payments\n  sourceRef: {kind: GitRepository, name: workspace-payments}\n  kubeConfig:\n    secretRef: {name: other-cluster}\n",
	})
	cr := e.waitTenantRun("workspace-payments", hostile.GetHead().GetSHA(), 1)
	assert.Equal(t, "failure", cr.GetConclusion())
	anns := e.annotations(cr)
	require.Len(t, anns, 4, "each problem once per cluster of the workspace: %v", anns)
	for _, a := range anns[:2] {
		assert.True(t, strings.HasPrefix(a, "apps/crb.yaml:2: ClusterRoleBinding/mine: is cluster-scoped"), a)
	}
	for _, a := range anns[2:] {
		assert.True(t, strings.HasPrefix(a, "apps/flux.yaml:11: Kustomization/elsewhere: has spec.kubeConfig"), a)
	}
	assert.Contains(t, cr.GetOutput().GetSummary(), "fleetbot check workspace --dir . --workspace payments --namespace payments")

	merge := func(pr *gh.PullRequest) error {
		_, _, err := e.bob.PullRequests.Merge(ctx, "acme", "workspace-payments", pr.GetNumber(), "", nil)
		return err
	}
	e.approve("workspace-payments", hostile)
	require.ErrorContains(t, merge(hostile), `Required status check "fleetbot tenant" is failing.`)

	// A reference leaving the repo fails too, on the line that names it.
	escape := e.propose("workspace-payments", "escape", map[string]string{"clusters/prod-eu-1/kustomization.yaml": "resources:\n- fleetbot\n- ../../../../etc\n"})
	cr = e.waitTenantRun("workspace-payments", escape.GetHead().GetSHA(), 1)
	assert.Equal(t, "failure", cr.GetConclusion())
	anns = e.annotations(cr)
	require.NotEmpty(t, anns)
	assert.True(t, strings.HasPrefix(anns[0], "clusters/prod-eu-1/kustomization.yaml:3: "), anns[0])
	assert.Contains(t, anns[0], "../../../../etc")

	// Nobody can satisfy the check another way: not a commit status of its name, not another
	// App's (GitHub Actions') check run of its name.
	sha := escape.GetHead().GetSHA()
	_, _, err = e.bob.Repositories.CreateStatus(ctx, "acme", "workspace-payments", sha, &gh.RepoStatus{State: gh.String("success"), Context: gh.String(checkrun.DefaultTenantCheckName)})
	require.NoError(t, err)
	_, err = e.gh.AddCheckRun(15368, "acme", "workspace-payments", sha, checkrun.DefaultTenantCheckName, "success")
	require.NoError(t, err)
	e.approve("workspace-payments", escape)
	require.ErrorContains(t, merge(escape), `Required status check "fleetbot tenant" is failing.`)

	// Fixed, the hostile pull request passes and merges.
	fixed := e.gh.Commit("acme", "workspace-payments", "hostile", "fix", map[string]string{"apps/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n"}, "apps/crb.yaml", "apps/flux.yaml")
	cr = e.waitTenantRun("workspace-payments", fixed, 1)
	assert.Equal(t, "success", cr.GetConclusion(), cr.GetOutput().GetSummary())
	assert.Equal(t, "2 kustomization(s) render cleanly", cr.GetOutput().GetTitle())
	e.approve("workspace-payments", hostile) // the push dismissed the stale approvals
	require.NoError(t, merge(hostile))

	// A cluster repo is checked with the cluster rules: its admins may bind cluster roles.
	clusterPR := e.propose("cluster-prod-eu-1", "crb", map[string]string{
		"apps/kustomization.yaml": "resources: [crb.yaml]\n",
		"apps/crb.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: sre\n" +
			"roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}\nsubjects: [{kind: Group, name: sre, apiGroup: rbac.authorization.k8s.io}]\n",
	})
	cr = e.waitTenantRun("cluster-prod-eu-1", clusterPR.GetHead().GetSHA(), 1)
	assert.Equal(t, "success", cr.GetConclusion(), cr.GetOutput().GetSummary())
	assert.Contains(t, cr.GetOutput().GetSummary(), "fleetbot check cluster --dir .")

	// A repo fleetbot does not manage: no check run.
	e.gh.CreateRepo("acme", "website", map[string]string{"apps/kustomization.yaml": "resources: [nope.yaml]\n"})
	other := e.propose("website", "change", map[string]string{"index.html": "hi\n"})
	// The fake delivers in order: once a later pull request's check ran, the website's
	// delivery was handled, and once idle, its job too.
	sentinel := e.propose("cluster-edge-1", "sentinel", map[string]string{"README.md": "hi\n"})
	e.waitTenantRun("cluster-edge-1", sentinel.GetHead().GetSHA(), 1)
	e.idle()
	res, _, err := e.gh.Client().Checks.ListCheckRunsForRef(ctx, "acme", "website", other.GetHead().GetSHA(), nil)
	require.NoError(t, err)
	assert.Empty(t, res.CheckRuns, "a repo fleetbot does not manage gets no check run")
}

// TestServeTenantCheckSurvivesRestartAndDrift: after a restart, a re-run of the tenant check run
// checks again; a protection whose required check was removed or unbound by hand is restored
// by the drift its branch_protection_rule event starts.
func TestServeTenantCheckSurvivesRestartAndDrift(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	first := startTenantServe(t)
	pr := first.gh.Pulls("acme", "cluster-edge-1")[0]
	cr := first.waitTenantRun("cluster-edge-1", pr.GetHead().GetSHA(), 1)
	first.stop()

	second := &tenantEnv{serveEnv: startServe(t, serveOptions{reuse: first.serveEnv, webhooks: true, tenantCheck: checkrun.DefaultTenantCheckName})}
	second.waitMetric(appliedOK, 1)
	ev, err := second.gh.CheckRunEvent(cr.GetID(), "rerequested")
	require.NoError(t, err)
	ev.Set("sender.login", githubtest.DefaultUser)
	require.Equal(t, http.StatusAccepted, second.deliver("check_run", "rerun-1", encodeJSON(t, ev), serveSecret))
	again := second.waitTenantRun("cluster-edge-1", pr.GetHead().GetSHA(), 2)
	assert.NotEqual(t, cr.GetID(), again.GetID(), "a new check run")
	assert.Equal(t, "success", again.GetConclusion())

	// A repo admin unbinds the check (any source may set it) and the event reaches serve.
	_, _, err = second.gh.Client().Repositories.UpdateBranchProtection(ctx, "acme", "cluster-edge-1", "main", &gh.ProtectionRequest{
		RequiredStatusChecks: &gh.RequiredStatusChecks{Checks: &[]*gh.RequiredStatusCheck{{Context: checkrun.DefaultTenantCheckName, AppID: gh.Int64(-1)}}},
		RequiredPullRequestReviews: &gh.PullRequestReviewsEnforcementRequest{RequireCodeOwnerReviews: true, DismissStaleReviews: true,
			RequiredApprovingReviewCount: 1},
	})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{checkrun.DefaultTenantCheckName: 0}, second.gh.RequiredChecks("acme", "cluster-edge-1", "main"))
	payload := []byte(`{"action":"edited","repository":{"full_name":"acme/cluster-edge-1","name":"cluster-edge-1","owner":{"login":"acme"}},"sender":{"login":"octocat"}}`)
	require.Equal(t, http.StatusAccepted, second.deliver("branch_protection_rule", "drift-1", payload, serveSecret))
	second.waitMetric(`fleetbot_job_duration_seconds_count{kind="drift",outcome="ok"}`, 1)
	assert.Equal(t, map[string]int64{checkrun.DefaultTenantCheckName: second.gh.AppID()}, second.gh.RequiredChecks("acme", "cluster-edge-1", "main"),
		"bound to fleetbot's App again")
}

// TestServeUpgradeRequiresTheTenantCheck: on a fleet converged without the tenant check (before
// the upgrade), a control pull request's plan shows the check missing from every workspace and
// cluster repo's protection as access drift, and the first apply after the upgrade adds it.
func TestServeUpgradeRequiresTheTenantCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	before := startServe(t, serveOptions{})
	before.waitMetric(appliedOK, 1)
	for _, repo := range before.targets {
		require.Empty(t, before.gh.RequiredChecks("acme", repo, "main"), repo)
	}
	before.stop()

	// The upgraded serve: its startup apply waits until the plan was seen.
	hold := make(chan struct{})
	t.Cleanup(func() {
		select {
		case <-hold:
		default:
			close(hold)
		}
	})
	e := startServe(t, serveOptions{reuse: before, tenantCheck: checkrun.DefaultTenantCheckName, beforeJob: func(j webhook.Job) {
		if j.Kind == webhook.KindApply {
			<-hold
		}
	}})
	api := e.gh.Client()
	main := e.gh.Branch("acme", "control", "main")
	_, _, err := api.Git.CreateRef(ctx, "acme", "control", &gh.Reference{Ref: gh.String("refs/heads/change"), Object: &gh.GitObject{SHA: gh.String(main)}})
	require.NoError(t, err)
	head := e.gh.Commit("acme", "control", "change", "edge-1: new range", edge1("10.7.0.0/28"))
	pull, _, err := api.PullRequests.Create(ctx, "acme", "control", &gh.NewPullRequest{Title: gh.String("edge-1"), Head: gh.String("change"), Base: gh.String("main")})
	require.NoError(t, err)
	ev, err := e.gh.PullRequestEvent("acme", "control", pull.GetNumber(), "opened")
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, e.deliver("pull_request", "plan-1", encodeJSON(t, ev), serveSecret))
	var plan *gh.CheckRun
	e.eventually("the plan check run", func() bool {
		res, _, err := api.Checks.ListCheckRunsForRef(ctx, "acme", "control", head, nil)
		require.NoError(t, err)
		for _, cr := range res.CheckRuns {
			if cr.GetStatus() == "completed" {
				plan = cr
			}
		}
		return plan != nil
	})
	text := plan.GetOutput().GetText()
	want := `status check "fleetbot tenant" from GitHub App 1 is not required`
	assert.Equal(t, len(e.targets), strings.Count(text, want), "every workspace and cluster repo:\n%s", text)

	close(hold)
	e.waitMetric(appliedOK, 1)
	for _, repo := range e.targets {
		assert.Equal(t, map[string]int64{checkrun.DefaultTenantCheckName: e.gh.AppID()}, e.gh.RequiredChecks("acme", repo, "main"), repo)
	}
}
