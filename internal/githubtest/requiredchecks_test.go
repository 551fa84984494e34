package githubtest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest/restspec"
)

// TestRequiredCheckBoundToAnApp: a required status check bound to an App is satisfied only by
// that App's check run on the pull request's head, as GitHub documents: a commit status of the
// same context or another App's check run of the same name do not let a writer merge; a
// repository admin may still bypass a protection that is not enforced on admins.
func TestRequiredCheckBoundToAnApp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewServer(t)
	s.CreateRepo("acme", "r", map[string]string{"README.md": "hi\n"})
	s.CreateTeam("acme", "devs", "bob")
	s.SetTeamRepoPermission("acme", "devs", "acme", "r", "push")
	admin, bob, app := s.Client(), s.ClientWithToken(s.CreateUser("bob")), s.ClientWithToken(s.InstallationToken("acme"))
	s.AddTeamMember("acme", "devs", "bob", "member")

	const name = "fleetbot tenant"
	p, _, err := admin.Repositories.UpdateBranchProtection(ctx, "acme", "r", "main", &github.ProtectionRequest{
		RequiredStatusChecks: &github.RequiredStatusChecks{Checks: &[]*github.RequiredStatusCheck{{Context: name, AppID: github.Int64(s.AppID())}}},
		AllowForcePushes:     github.Bool(false),
	})
	require.NoError(t, err)
	require.NotNil(t, p.GetRequiredStatusChecks().Checks)
	assert.Equal(t, []*github.RequiredStatusCheck{{Context: name, AppID: github.Int64(s.AppID())}}, *p.GetRequiredStatusChecks().Checks)
	assert.Equal(t, map[string]int64{name: s.AppID()}, s.RequiredChecks("acme", "r", "main"))
	b, _, err := admin.Repositories.GetBranch(ctx, "acme", "r", "main", 0)
	require.NoError(t, err)
	assert.Equal(t, s.AppID(), (*b.GetProtection().GetRequiredStatusChecks().Checks)[0].GetAppID())

	head := s.Commit("acme", "r", "topic", "change", map[string]string{"x": "1\n"})
	pull, _, err := bob.PullRequests.Create(ctx, "acme", "r", &github.NewPullRequest{Title: github.String("t"), Head: github.String("topic"), Base: github.String("main")})
	require.NoError(t, err)
	merge := func() (*github.Response, error) {
		_, resp, err := bob.PullRequests.Merge(ctx, "acme", "r", pull.GetNumber(), "", nil)
		return resp, err
	}
	refused := func(msg, why string) {
		t.Helper()
		resp, err := merge()
		require.Error(t, err, why)
		assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, why)
		assert.Contains(t, err.Error(), msg, why)
		got, _, err := bob.PullRequests.Get(ctx, "acme", "r", pull.GetNumber())
		require.NoError(t, err)
		assert.Equal(t, "blocked", got.GetMergeableState(), why)
	}
	refused(`Required status check "fleetbot tenant" is expected.`, "no check at all")

	_, _, err = bob.Repositories.CreateStatus(ctx, "acme", "r", head, &github.RepoStatus{State: github.String("success"), Context: github.String(name)})
	require.NoError(t, err)
	refused(`Required status check "fleetbot tenant" was not set by the expected GitHub app.`, "a writer's commit status of the same context")

	_, err = s.AddCheckRun(15368, "acme", "r", head, name, "success")
	require.NoError(t, err)
	refused(`was not set by the expected GitHub app`, "GitHub Actions' check run of the same name")
	runs, _, err := admin.Checks.ListCheckRunsForRef(ctx, "acme", "r", head, nil)
	require.NoError(t, err)
	require.Len(t, runs.CheckRuns, 1)
	assert.Equal(t, int64(15368), runs.CheckRuns[0].GetApp().GetID(), "listed with its own App")

	cr, _, err := app.Checks.CreateCheckRun(ctx, "acme", "r", github.CreateCheckRunOptions{Name: name, HeadSHA: head, Conclusion: github.String("failure")})
	require.NoError(t, err)
	refused(`Required status check "fleetbot tenant" is failing.`, "the App's check run failed")

	_, _, err = app.Checks.UpdateCheckRun(ctx, "acme", "r", cr.GetID(), github.UpdateCheckRunOptions{Name: name, Conclusion: github.String("success")})
	require.NoError(t, err)
	got, _, err := bob.PullRequests.Get(ctx, "acme", "r", pull.GetNumber())
	require.NoError(t, err)
	assert.Equal(t, "clean", got.GetMergeableState())
	_, err = merge()
	require.NoError(t, err, "the App's own check run passed")

	// A repository admin bypasses a protection that is not enforced on admins.
	s.Commit("acme", "r", "other", "change", map[string]string{"y": "1\n"})
	pull2, _, err := admin.PullRequests.Create(ctx, "acme", "r", &github.NewPullRequest{Title: github.String("t2"), Head: github.String("other"), Base: github.String("main")})
	require.NoError(t, err)
	_, _, err = admin.PullRequests.Merge(ctx, "acme", "r", pull2.GetNumber(), "", nil)
	require.NoError(t, err)
}

// TestRequiredCheckAnySource: a check required with app_id -1 is satisfied by a commit status of
// its context; a request with both contexts and checks, or neither, is refused as on GitHub.
func TestRequiredCheckAnySource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewServer(t)
	s.CreateRepo("acme", "r", map[string]string{"README.md": "hi\n"})
	admin := s.Client()
	p, _, err := admin.Repositories.UpdateBranchProtection(ctx, "acme", "r", "main", &github.ProtectionRequest{
		RequiredStatusChecks: &github.RequiredStatusChecks{Checks: &[]*github.RequiredStatusCheck{{Context: "ci", AppID: github.Int64(-1)}}},
	})
	require.NoError(t, err)
	assert.Nil(t, (*p.GetRequiredStatusChecks().Checks)[0].AppID, "any source is null")
	head := s.Commit("acme", "r", "topic", "change", map[string]string{"x": "1\n"})
	s.CreateTeam("acme", "devs", "bob")
	s.SetTeamRepoPermission("acme", "devs", "acme", "r", "push")
	bob := s.ClientWithToken(s.CreateUser("bob"))
	s.AddTeamMember("acme", "devs", "bob", "member")
	pull, _, err := bob.PullRequests.Create(ctx, "acme", "r", &github.NewPullRequest{Title: github.String("t"), Head: github.String("topic"), Base: github.String("main")})
	require.NoError(t, err)
	_, _, err = bob.PullRequests.Merge(ctx, "acme", "r", pull.GetNumber(), "", nil)
	require.ErrorContains(t, err, `Required status check "ci" is expected.`)
	_, _, err = bob.Repositories.CreateStatus(ctx, "acme", "r", head, &github.RepoStatus{State: github.String("success"), Context: github.String("ci")})
	require.NoError(t, err)
	_, _, err = bob.PullRequests.Merge(ctx, "acme", "r", pull.GetNumber(), "", nil)
	require.NoError(t, err)

	for _, rs := range []*github.RequiredStatusChecks{
		{Contexts: &[]string{"a"}, Checks: &[]*github.RequiredStatusCheck{{Context: "b"}}},
		{Strict: true},
	} {
		_, resp, err := admin.Repositories.UpdateBranchProtection(ctx, "acme", "r", "main", &github.ProtectionRequest{RequiredStatusChecks: rs})
		require.Error(t, err)
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	}
}

// TestCheckRunAnnotationsAppend: GitHub takes at most 50 annotations per check run request and
// appends each request's to the check run's; answers count them and never list them.
func TestCheckRunAnnotationsAppend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The request of 51 annotations is refused by GitHub's description too: collect what it
	// says instead of failing the test.
	var mu sync.Mutex
	var refused []string
	opt := WithoutRESTSpec()
	if d, err := RESTSpec(); err == nil {
		opt = WithRESTSpec(d, func(v restspec.Violation) {
			mu.Lock()
			defer mu.Unlock()
			refused = append(refused, v.Detail)
		})
	}
	s := NewServer(t, opt)
	s.CreateRepo("acme", "r", map[string]string{"README.md": "hi\n"})
	app := s.ClientWithToken(s.InstallationToken("acme"))
	anns := func(n int) []*github.CheckRunAnnotation {
		var out []*github.CheckRunAnnotation
		for i := range n {
			out = append(out, &github.CheckRunAnnotation{Path: github.String("README.md"), StartLine: github.Int(1), EndLine: github.Int(1),
				AnnotationLevel: github.String("failure"), Message: github.String(fmt.Sprint(i))})
		}
		return out
	}
	head := s.Branch("acme", "r", "main")
	_, resp, err := app.Checks.CreateCheckRun(ctx, "acme", "r", github.CreateCheckRunOptions{Name: "c", HeadSHA: head,
		Output: &github.CheckRunOutput{Title: github.String("t"), Summary: github.String("s"), Annotations: anns(51)}})
	require.Error(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)

	cr, _, err := app.Checks.CreateCheckRun(ctx, "acme", "r", github.CreateCheckRunOptions{Name: "c", HeadSHA: head,
		Output: &github.CheckRunOutput{Title: github.String("t"), Summary: github.String("s"), Annotations: anns(50)}})
	require.NoError(t, err)
	got, _, err := app.Checks.UpdateCheckRun(ctx, "acme", "r", cr.GetID(), github.UpdateCheckRunOptions{Name: "c",
		Output: &github.CheckRunOutput{Title: github.String("t2"), Summary: github.String("s2"), Annotations: anns(3)}})
	require.NoError(t, err)
	assert.Equal(t, 53, got.GetOutput().GetAnnotationsCount())
	assert.Empty(t, got.GetOutput().Annotations)
	assert.Equal(t, "t2", got.GetOutput().GetTitle())
	all, err := s.CheckRunAnnotations(cr.GetID())
	require.NoError(t, err)
	assert.Len(t, all, 53)
	assert.Equal(t, "2", all[52].GetMessage())
	mu.Lock()
	defer mu.Unlock()
	for _, r := range refused {
		assert.Contains(t, r, "field output.annotations: maximum number of items is 50", "only the request of 51 is refused")
	}
}
