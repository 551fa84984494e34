package githubtest_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// This file tests the rules of GitHub the fake enforces (docs/github.md, "Rules of the fake"),
// one test per rule, each naming GitHub's page.

// apiError asserts err is GitHub's error answer with status and returns it.
func apiError(t *testing.T, err error, status int) *github.ErrorResponse {
	t.Helper()
	var er *github.ErrorResponse
	require.True(t, errors.As(err, &er), "want a %d from the fake, got %v", status, err)
	require.Equal(t, status, er.Response.StatusCode, "%v", err)
	return er
}

// checkRunRepo is an org with the App installed and a repo, and a client of the App's
// installation (check runs are for Apps only).
func checkRunRepo(t *testing.T, opts ...githubtest.Option) (*githubtest.Server, *github.Client, string) {
	t.Helper()
	srv := githubtest.NewServer(t, opts...)
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "control", map[string]string{"README.md": "v1\n"})
	return srv, srv.ClientWithToken(srv.InstallationToken("acme")), srv.Branch("acme", "control", "main")
}

// TestCheckRunsOnlyForApps: "To create a check run, you must use a GitHub App. OAuth apps and
// authenticated users are not able to create a check suite." A personal access token gets 403
// "You must authenticate via a GitHub App."
// https://docs.github.com/rest/checks/runs#create-a-check-run
func TestCheckRunsOnlyForApps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, app, head := checkRunRepo(t)
	_, _, err := srv.Client().Checks.CreateCheckRun(ctx, "acme", "control", github.CreateCheckRunOptions{Name: "plan", HeadSHA: head})
	er := apiError(t, err, http.StatusForbidden)
	assert.Equal(t, "You must authenticate via a GitHub App.", er.Message)

	cr, _, err := app.Checks.CreateCheckRun(ctx, "acme", "control", github.CreateCheckRunOptions{Name: "plan", HeadSHA: head})
	require.NoError(t, err)
	_, _, err = srv.Client().Checks.UpdateCheckRun(ctx, "acme", "control", cr.GetID(), github.UpdateCheckRunOptions{Name: "plan", Conclusion: github.String("success")})
	apiError(t, err, http.StatusForbidden)
}

// TestCheckRunConclusionRequiredWhenCompleted: conclusion is "Required if you provide
// completed_at or a status of completed"; stale is set by GitHub only.
// https://docs.github.com/rest/checks/runs#create-a-check-run
func TestCheckRunConclusionRequiredWhenCompleted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// GitHub's REST description refuses a completed update without a conclusion too: the
	// requests are refused on purpose.
	_, app, head := checkRunRepo(t, githubtest.WithoutRESTSpec())
	_, _, err := app.Checks.CreateCheckRun(ctx, "acme", "control", github.CreateCheckRunOptions{Name: "plan", HeadSHA: head, Status: github.String("completed")})
	er := apiError(t, err, http.StatusUnprocessableEntity)
	assert.Equal(t, "conclusion", er.Errors[0].Field)

	cr, _, err := app.Checks.CreateCheckRun(ctx, "acme", "control", github.CreateCheckRunOptions{Name: "plan", HeadSHA: head, Status: github.String("in_progress")})
	require.NoError(t, err)
	_, _, err = app.Checks.UpdateCheckRun(ctx, "acme", "control", cr.GetID(), github.UpdateCheckRunOptions{Name: "plan", Status: github.String("completed")})
	apiError(t, err, http.StatusUnprocessableEntity)
	_, _, err = app.Checks.UpdateCheckRun(ctx, "acme", "control", cr.GetID(), github.UpdateCheckRunOptions{Name: "plan", Conclusion: github.String("stale")})
	apiError(t, err, http.StatusUnprocessableEntity)
	done, _, err := app.Checks.UpdateCheckRun(ctx, "acme", "control", cr.GetID(), github.UpdateCheckRunOptions{Name: "plan", Status: github.String("completed"), Conclusion: github.String("success")})
	require.NoError(t, err)
	assert.Equal(t, "completed", done.GetStatus())
}

// TestCheckRunOutputLimitsInBytes: a summary or text over 65,535 BYTES is 422 "summary exceeds a
// maximum bytesize of 65535" (the reference says characters; GitHub counts bytes:
// github/docs#35252); at most 50 annotations per request; an annotation's message at most
// 64 KB and its title 255 characters.
// https://docs.github.com/rest/checks/runs#create-a-check-run
func TestCheckRunOutputLimitsInBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The description refuses 51 annotations too: the requests are refused on purpose.
	_, app, head := checkRunRepo(t, githubtest.WithoutRESTSpec())
	create := func(out *github.CheckRunOutput) error {
		_, _, err := app.Checks.CreateCheckRun(ctx, "acme", "control", github.CreateCheckRunOptions{
			Name: "plan", HeadSHA: head, Status: github.String("completed"), Conclusion: github.String("success"), Output: out})
		return err
	}
	arrows := strings.Repeat("→", 30000) // 30,000 characters, 90,000 bytes
	require.Less(t, utf8.RuneCountInString(arrows), 65535)
	er := apiError(t, create(&github.CheckRunOutput{Title: github.String("t"), Summary: github.String(arrows)}), http.StatusUnprocessableEntity)
	assert.Equal(t, "summary exceeds a maximum bytesize of 65535", er.Errors[0].Message)
	er = apiError(t, create(&github.CheckRunOutput{Title: github.String("t"), Summary: github.String("s"), Text: github.String(arrows)}), http.StatusUnprocessableEntity)
	assert.Equal(t, "text", er.Errors[0].Field)
	require.NoError(t, create(&github.CheckRunOutput{Title: github.String("t"), Summary: github.String(strings.Repeat("a", 65535))}), "65,535 bytes fit")

	annotations := func(n int, message, title string) []*github.CheckRunAnnotation {
		var out []*github.CheckRunAnnotation
		for range n {
			out = append(out, &github.CheckRunAnnotation{Path: github.String("platform.yaml"), StartLine: github.Int(1), EndLine: github.Int(1),
				AnnotationLevel: github.String("failure"), Message: github.String(message), Title: github.String(title)})
		}
		return out
	}
	out := func(a []*github.CheckRunAnnotation) *github.CheckRunOutput {
		return &github.CheckRunOutput{Title: github.String("t"), Summary: github.String("s"), Annotations: a}
	}
	require.NoError(t, create(out(annotations(50, "m", "t"))), "50 annotations")
	apiError(t, create(out(annotations(51, "m", "t"))), http.StatusUnprocessableEntity)
	apiError(t, create(out(annotations(1, strings.Repeat("✅", 22000), "t"))), http.StatusUnprocessableEntity)
	apiError(t, create(out(annotations(1, "m", strings.Repeat("é", 256)))), http.StatusUnprocessableEntity)
	require.NoError(t, create(out(annotations(1, "m", strings.Repeat("é", 255)))), "255 characters of title")
}

// TestBodyLimits: a pull request body over 65,536 characters is 422 "body is too long (maximum
// is 65536 characters)", counted in characters; an issue body or a comment over 262,144 bytes
// is refused with the same words (GitHub documents neither; the counts are measured:
// https://github.com/dead-claudia/github-limits/pull/13).
// https://docs.github.com/rest/pulls/pulls#create-a-pull-request,
// https://docs.github.com/rest/issues/comments#create-an-issue-comment
func TestBodyLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "r", map[string]string{"README.md": "v1\n"})
	srv.Commit("acme", "r", "topic", "change", map[string]string{"a.txt": "a\n"})
	c := srv.ClientWithToken(srv.InstallationToken("acme"))

	tooLong := strings.Repeat("✅", 65537) // 65,537 characters, 196,611 bytes
	_, _, err := c.PullRequests.Create(ctx, "acme", "r", &github.NewPullRequest{Title: github.String("t"), Head: github.String("topic"), Base: github.String("main"), Body: github.String(tooLong)})
	er := apiError(t, err, http.StatusUnprocessableEntity)
	assert.Equal(t, "body is too long (maximum is 65536 characters)", er.Errors[0].Message)
	p, _, err := c.PullRequests.Create(ctx, "acme", "r", &github.NewPullRequest{Title: github.String("t"), Head: github.String("topic"), Base: github.String("main"), Body: github.String(tooLong[:len(tooLong)-3])})
	require.NoError(t, err, "65,536 characters fit")
	_, _, err = c.PullRequests.Edit(ctx, "acme", "r", p.GetNumber(), &github.PullRequest{Body: github.String(tooLong)})
	apiError(t, err, http.StatusUnprocessableEntity)

	big := strings.Repeat("a", 262145)
	_, _, err = c.Issues.CreateComment(ctx, "acme", "r", p.GetNumber(), &github.IssueComment{Body: github.String(big)})
	er = apiError(t, err, http.StatusUnprocessableEntity)
	assert.Equal(t, "Body is too long (maximum is 65536 characters)", er.Errors[0].Message)
	cm, _, err := c.Issues.CreateComment(ctx, "acme", "r", p.GetNumber(), &github.IssueComment{Body: github.String(big[1:])})
	require.NoError(t, err, "262,144 bytes of comment fit")
	_, _, err = c.Issues.EditComment(ctx, "acme", "r", cm.GetID(), &github.IssueComment{Body: github.String(big)})
	apiError(t, err, http.StatusUnprocessableEntity)
}

// mergeEnv is an org with a protected-to-be repo, an open pull request by alice (write through
// the devs team), bob (write, through the same team) and carol (write, in the platform team
// that owns everything in CODEOWNERS).
type mergeEnv struct {
	srv               *githubtest.Server
	admin, app        *github.Client
	alice, bob, carol *github.Client
	number            int
	head              string
}

func newMergeEnv(t *testing.T, protect *github.ProtectionRequest) *mergeEnv {
	t.Helper()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	e := &mergeEnv{srv: srv, admin: srv.Client()}
	srv.CreateRepo("acme", "r", map[string]string{"README.md": "v1\n", ".github/CODEOWNERS": "* @acme/platform\n"})
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob", "carol"} {
		tokens[u] = srv.CreateUser(u)
	}
	srv.CreateTeam("acme", "devs", "alice", "bob")
	srv.CreateTeam("acme", "platform", "carol")
	srv.SetTeamRepoPermission("acme", "devs", "acme", "r", "push")
	srv.SetTeamRepoPermission("acme", "platform", "acme", "r", "push")
	e.alice, e.bob, e.carol = srv.ClientWithToken(tokens["alice"]), srv.ClientWithToken(tokens["bob"]), srv.ClientWithToken(tokens["carol"])
	e.app = srv.ClientWithToken(srv.InstallationToken("acme"))
	e.head = srv.Commit("acme", "r", "topic", "change", map[string]string{"a.txt": "a\n"})
	p, _, err := e.alice.PullRequests.Create(ctx, "acme", "r", &github.NewPullRequest{Title: github.String("t"), Head: github.String("topic"), Base: github.String("main")})
	require.NoError(t, err)
	e.number = p.GetNumber()
	if protect != nil {
		_, _, err := e.admin.Repositories.UpdateBranchProtection(ctx, "acme", "r", "main", protect)
		require.NoError(t, err)
	}
	return e
}

// merge merges the pull request as c and returns the error.
func (e *mergeEnv) merge(c *github.Client, method string) error {
	_, _, err := c.PullRequests.Merge(context.Background(), "acme", "r", e.number, "", &github.PullRequestOptions{MergeMethod: method})
	return err
}

func (e *mergeEnv) review(t *testing.T, c *github.Client, event string) {
	t.Helper()
	_, _, err := c.PullRequests.CreateReview(context.Background(), "acme", "r", e.number, &github.PullRequestReviewRequest{Event: github.String(event)})
	require.NoError(t, err)
}

func (e *mergeEnv) state(t *testing.T) string {
	t.Helper()
	p, _, err := e.admin.PullRequests.Get(context.Background(), "acme", "r", e.number)
	require.NoError(t, err)
	return p.GetMergeableState()
}

// TestMergeMethodSettings: allow_merge_commit, allow_squash_merge and allow_rebase_merge are
// settings of the repository (on by default, set by PATCH /repos); a merge with a method it
// does not allow is 405 with GitHub's message.
// https://docs.github.com/rest/repos/repos#update-a-repository,
// https://docs.github.com/rest/pulls/pulls#merge-a-pull-request
func TestMergeMethodSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMergeEnv(t, nil)
	r, _, err := e.app.Repositories.Edit(ctx, "acme", "r", &github.Repository{AllowMergeCommit: github.Bool(false), AllowRebaseMerge: github.Bool(false)})
	require.NoError(t, err)
	assert.False(t, r.GetAllowMergeCommit())
	assert.True(t, r.GetAllowSquashMerge())
	assert.False(t, r.GetAllowRebaseMerge())
	got, _, err := e.app.Repositories.Get(ctx, "acme", "r")
	require.NoError(t, err)
	assert.False(t, got.GetAllowMergeCommit(), "kept")

	er := apiError(t, e.merge(e.admin, ""), http.StatusMethodNotAllowed)
	assert.Equal(t, "Merge commits are not allowed on this repository.", er.Message, "merge is the default method")
	er = apiError(t, e.merge(e.admin, "rebase"), http.StatusMethodNotAllowed)
	assert.Equal(t, "Rebase merges are not allowed on this repository.", er.Message)
	_, _, err = e.app.Repositories.Edit(ctx, "acme", "r", &github.Repository{AllowSquashMerge: github.Bool(false), AllowRebaseMerge: github.Bool(true)})
	require.NoError(t, err)
	er = apiError(t, e.merge(e.admin, "squash"), http.StatusMethodNotAllowed)
	assert.Equal(t, "Squash merges are not allowed on this repository.", er.Message)
	require.NoError(t, e.merge(e.admin, "rebase"))

	created, _, err := e.admin.Repositories.Create(ctx, "acme", &github.Repository{Name: github.String("squash-only"),
		AllowMergeCommit: github.Bool(false), AllowRebaseMerge: github.Bool(false)})
	require.NoError(t, err)
	assert.False(t, created.GetAllowMergeCommit(), "a setting given at creation")
	assert.True(t, created.GetAllowSquashMerge())
}

// TestMergeBlockedByRequiredReviews: with "Require approvals" a pull request needs that many
// approving reviews of people with write access, not the author's: until then a merge is 405
// "At least 1 approving review is required by reviewers with write access." and
// mergeable_state is blocked. A repository administrator bypasses the protection unless it is
// enforced for administrators; a GitHub App does not.
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-pull-request-reviews-before-merging,
// https://docs.github.com/rest/pulls/reviews#create-a-review-for-a-pull-request
func TestMergeBlockedByRequiredReviews(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMergeEnv(t, &github.ProtectionRequest{RequiredPullRequestReviews: &github.PullRequestReviewsEnforcementRequest{RequiredApprovingReviewCount: 1}})
	assert.Equal(t, "blocked", e.state(t))
	for name, c := range map[string]*github.Client{"the author": e.alice, "another writer": e.bob, "the App": e.app} {
		er := apiError(t, e.merge(c, "merge"), http.StatusMethodNotAllowed)
		assert.Equal(t, "At least 1 approving review is required by reviewers with write access.", er.Message, name)
	}
	_, _, err := e.alice.PullRequests.CreateReview(ctx, "acme", "r", e.number, &github.PullRequestReviewRequest{Event: github.String("APPROVE")})
	apiError(t, err, http.StatusUnprocessableEntity)
	assert.Contains(t, err.Error(), "Can not approve your own pull request")

	e.review(t, e.bob, "APPROVE")
	assert.Equal(t, "clean", e.state(t))
	reviews, _, err := e.admin.PullRequests.ListReviews(ctx, "acme", "r", e.number, nil)
	require.NoError(t, err)
	require.Len(t, reviews, 1)
	assert.Equal(t, "APPROVED", reviews[0].GetState())
	require.NoError(t, e.merge(e.alice, "merge"), "approved by a writer")
}

// TestAdminsBypassUnlessEnforced: an administrator merges past an unmet protection; with
// enforce_admins ("Do not allow bypassing the above settings") not even an administrator does.
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#do-not-allow-bypassing-the-above-settings
func TestAdminsBypassUnlessEnforced(t *testing.T) {
	t.Parallel()
	reviews := &github.PullRequestReviewsEnforcementRequest{RequiredApprovingReviewCount: 1}
	e := newMergeEnv(t, &github.ProtectionRequest{RequiredPullRequestReviews: reviews, EnforceAdmins: true})
	apiError(t, e.merge(e.admin, "merge"), http.StatusMethodNotAllowed)

	e = newMergeEnv(t, &github.ProtectionRequest{RequiredPullRequestReviews: reviews})
	require.NoError(t, e.merge(e.admin, "merge"), "an administrator bypasses")
}

// TestMergeBlockedByCodeOwnerReview: "Require review from Code Owners" wants an approval of an
// owner (the base branch's CODEOWNERS) of each changed file: another writer's approval leaves
// the merge 405 "Waiting on code owner review from @acme/platform." (the words are GitHub's as
// far as they are known; GitHub does not document them). With stale reviews dismissed, a push
// after the approval needs a new one.
// https://docs.github.com/repositories/managing-your-repositorys-settings-and-features/customizing-your-repository/about-code-owners
func TestMergeBlockedByCodeOwnerReview(t *testing.T) {
	t.Parallel()
	e := newMergeEnv(t, &github.ProtectionRequest{RequiredPullRequestReviews: &github.PullRequestReviewsEnforcementRequest{
		RequireCodeOwnerReviews: true, DismissStaleReviews: true, RequiredApprovingReviewCount: 1}})
	e.review(t, e.bob, "APPROVE")
	er := apiError(t, e.merge(e.alice, "merge"), http.StatusMethodNotAllowed)
	assert.Equal(t, "Waiting on code owner review from @acme/platform.", er.Message)
	assert.Equal(t, "blocked", e.state(t))

	e.review(t, e.carol, "APPROVE")
	assert.Equal(t, "clean", e.state(t))
	e.srv.Commit("acme", "r", "topic", "more", map[string]string{"b.txt": "b\n"})
	assert.Equal(t, "blocked", e.state(t), "a push dismisses the stale approvals")
	e.review(t, e.carol, "APPROVE")
	require.NoError(t, e.merge(e.alice, "squash"))
}

// TestMergeBlockedByRequiredStatusChecks: a required status check must pass on the head (a
// commit status success, or a check run success, neutral or skipped; both when both exist:
// TestRequiredCheckRunAndStatusBothRequired): missing or running, the merge is 405
// `Required status check "ci" is expected.`. A check given as {context, app_id} counts only
// from that App (TestRequiredCheckBoundToAnApp).
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-protected-branches/about-protected-branches#require-status-checks-before-merging,
// https://docs.github.com/rest/branches/branch-protection#update-branch-protection
func TestMergeBlockedByRequiredStatusChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMergeEnv(t, &github.ProtectionRequest{RequiredStatusChecks: &github.RequiredStatusChecks{Strict: true, Contexts: &[]string{"ci"}}})
	er := apiError(t, e.merge(e.alice, "merge"), http.StatusMethodNotAllowed)
	assert.Equal(t, `Required status check "ci" is expected.`, er.Message)
	status := func(state string) {
		_, _, err := e.bob.Repositories.CreateStatus(ctx, "acme", "r", e.head, &github.RepoStatus{State: github.String(state), Context: github.String("ci")})
		require.NoError(t, err)
	}
	status("pending")
	apiError(t, e.merge(e.alice, "merge"), http.StatusMethodNotAllowed)
	status("failure")
	er = apiError(t, e.merge(e.alice, "merge"), http.StatusMethodNotAllowed)
	assert.Equal(t, `Required status check "ci" is failing.`, er.Message)
	status("success")
	assert.Equal(t, "clean", e.state(t))
	require.NoError(t, e.merge(e.alice, "merge"))
}

// TestRequiredCheckRunAndStatusBothRequired: "If you have a check and a status with the same
// name, and you select that name as a required status check, both the check and the status are
// required": a passing check run does not outweigh a failing commit status of its name.
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/defining-the-mergeability-of-pull-requests/troubleshooting-required-status-checks
func TestRequiredCheckRunAndStatusBothRequired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMergeEnv(t, &github.ProtectionRequest{RequiredStatusChecks: &github.RequiredStatusChecks{Strict: true,
		Checks: &[]*github.RequiredStatusCheck{{Context: "ci", AppID: github.Int64(-1)}}}})
	_, _, err := e.app.Checks.CreateCheckRun(ctx, "acme", "r", github.CreateCheckRunOptions{Name: "ci", HeadSHA: e.head,
		Status: github.String("completed"), Conclusion: github.String("success")})
	require.NoError(t, err)
	assert.Equal(t, "clean", e.state(t), "the check run alone passes")
	_, _, err = e.bob.Repositories.CreateStatus(ctx, "acme", "r", e.head, &github.RepoStatus{State: github.String("failure"), Context: github.String("ci")})
	require.NoError(t, err)
	er := apiError(t, e.merge(e.alice, "merge"), http.StatusMethodNotAllowed)
	assert.Equal(t, `Required status check "ci" is failing.`, er.Message)
	_, _, err = e.bob.Repositories.CreateStatus(ctx, "acme", "r", e.head, &github.RepoStatus{State: github.String("success"), Context: github.String("ci")})
	require.NoError(t, err)
	require.NoError(t, e.merge(e.alice, "merge"), "both pass")
}

// TestRequiredCheckWithoutAppBoundToTheAppThatSetIt: a check required without an App (a
// deprecated context, or a check without app_id) is bound to the App that recently provided
// it: "Omit this field to automatically select the GitHub App that has recently provided this
// check, or any app if it was not set by a GitHub App"; the same name from another source is
// then refused with `Required status check "ci" was not set by the expected GitHub app.`
// (GitHub's words, as reported in kubernetes-sigs/prow#915).
// https://docs.github.com/rest/branches/branch-protection#update-branch-protection
func TestRequiredCheckWithoutAppBoundToTheAppThatSetIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newMergeEnv(t, nil)
	older := e.srv.Branch("acme", "r", "main")
	_, _, err := e.app.Checks.CreateCheckRun(ctx, "acme", "r", github.CreateCheckRunOptions{Name: "ci", HeadSHA: older,
		Status: github.String("completed"), Conclusion: github.String("success")})
	require.NoError(t, err)
	for _, rs := range []*github.RequiredStatusChecks{
		{Strict: true, Contexts: &[]string{"ci"}},
		{Strict: true, Checks: &[]*github.RequiredStatusCheck{{Context: "ci"}}},
	} {
		p, _, err := e.admin.Repositories.UpdateBranchProtection(ctx, "acme", "r", "main", &github.ProtectionRequest{RequiredStatusChecks: rs})
		require.NoError(t, err)
		assert.Equal(t, e.srv.AppID(), p.GetRequiredStatusChecks().GetChecks()[0].GetAppID(), "bound to the App that set it")
		assert.Equal(t, map[string]int64{"ci": e.srv.AppID()}, e.srv.RequiredChecks("acme", "r", "main"))
	}
	_, _, err = e.bob.Repositories.CreateStatus(ctx, "acme", "r", e.head, &github.RepoStatus{State: github.String("success"), Context: github.String("ci")})
	require.NoError(t, err)
	er := apiError(t, e.merge(e.alice, "merge"), http.StatusMethodNotAllowed)
	assert.Equal(t, `Required status check "ci" was not set by the expected GitHub app.`, er.Message)

	// A name no App set may come from anyone.
	p, _, err := e.admin.Repositories.UpdateBranchProtection(ctx, "acme", "r", "main", &github.ProtectionRequest{
		RequiredStatusChecks: &github.RequiredStatusChecks{Strict: true, Contexts: &[]string{"lint"}}})
	require.NoError(t, err)
	assert.Nil(t, p.GetRequiredStatusChecks().GetChecks()[0].AppID, "any source")
	_, _, err = e.bob.Repositories.CreateStatus(ctx, "acme", "r", e.head, &github.RepoStatus{State: github.String("success"), Context: github.String("lint")})
	require.NoError(t, err)
	require.NoError(t, e.merge(e.alice, "merge"))
}

// TestProtectionBodyRequiredKeys: a PUT of a branch protection must carry
// required_status_checks, enforce_admins, required_pull_request_reviews and restrictions (null
// allowed): without one it is 422 `Invalid request.\n\n"restrictions" wasn't supplied.`;
// required_status_checks needs strict and exactly one of contexts and checks (GitHub's schema
// errors: google/go-github#2976, ossf/allstar#155); restrictions
// needs users and teams. Nothing is stored.
// https://docs.github.com/rest/branches/branch-protection#update-branch-protection
func TestProtectionBodyRequiredKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The description refuses these bodies too: they are sent on purpose.
	srv := githubtest.NewServer(t, githubtest.WithoutRESTSpec())
	srv.CreateRepo("acme", "r", map[string]string{"README.md": "v1\n"})
	c := srv.ClientWithToken(srv.InstallationToken("acme"))
	put := func(body string) error {
		req, err := c.NewRequest("PUT", "repos/acme/r/branches/main/protection", json.RawMessage(body))
		require.NoError(t, err)
		_, err = c.Do(ctx, req, nil)
		return err
	}
	for body, want := range map[string]string{
		`{"required_status_checks": null, "enforce_admins": null, "required_pull_request_reviews": null}`: `"restrictions" wasn't supplied.`,
		`{"enforce_admins": true}`: `"required_status_checks", "required_pull_request_reviews", "restrictions" weren't supplied.`,
		`{"required_status_checks": {"contexts": []}, "enforce_admins": null, "required_pull_request_reviews": null, "restrictions": null}`:                                                  `"strict" wasn't supplied.`,
		`{"required_status_checks": null, "enforce_admins": null, "required_pull_request_reviews": null, "restrictions": {"users": []}}`:                                                     `"teams" wasn't supplied.`,
		`{"required_status_checks": {"strict": true, "contexts": ["a"], "checks": [{"context": "a"}]}, "enforce_admins": null, "required_pull_request_reviews": null, "restrictions": null}`: `More than one subschema in "oneOf" matched.`,
		`{"required_status_checks": {"strict": true}, "enforce_admins": null, "required_pull_request_reviews": null, "restrictions": null}`:                                                  `No subschema in "oneOf" matched.`,
	} {
		er := apiError(t, put(body), http.StatusUnprocessableEntity)
		assert.True(t, strings.HasPrefix(er.Message, "Invalid request.\n\n"), body)
		assert.Contains(t, er.Message, want, body)
		assert.False(t, srv.Protected("acme", "r", "main"), "nothing stored: %s", body)
	}
	require.NoError(t, put(`{"required_status_checks": null, "enforce_admins": null, "required_pull_request_reviews": null, "restrictions": null}`))
	assert.True(t, srv.Protected("acme", "r", "main"))
}

// tokenFor asks the fake for an installation token of acme's installation with body, as the
// App (its JWT), and returns the token or the error.
func tokenFor(t *testing.T, srv *githubtest.Server, body map[string]any) (string, error) {
	t.Helper()
	ctx := context.Background()
	tr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, srv.AppID(), srv.AppPrivateKeyPEM())
	require.NoError(t, err)
	tr.BaseURL = strings.TrimSuffix(srv.APIURL(), "/")
	app, err := github.NewClient(&http.Client{Transport: tr}).WithEnterpriseURLs(srv.APIURL(), srv.APIURL())
	require.NoError(t, err)
	in, _, err := app.Apps.FindOrganizationInstallation(ctx, "acme")
	require.NoError(t, err)
	req, err := app.NewRequest("POST", fmt.Sprintf("app/installations/%d/access_tokens", in.GetID()), body)
	require.NoError(t, err)
	var tok github.InstallationToken
	_, err = app.Do(ctx, req, &tok)
	return tok.GetToken(), err
}

// TestInstallationTokenNarrowing: a token asked for some repositories sees only those (another
// is 404, over REST, GraphQL and git alike) and one asked for some permissions does only that;
// asking for a repository or a permission the installation does not hold is 422.
// https://docs.github.com/rest/apps/apps#create-an-installation-access-token-for-an-app
func TestInstallationTokenNarrowing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "a", map[string]string{"README.md": "a\n"})
	srv.CreateRepo("acme", "b", map[string]string{"README.md": "b\n"})
	srv.CreateOrg("other")
	srv.CreateRepo("other", "x", map[string]string{"README.md": "x\n"})

	tok, err := tokenFor(t, srv, map[string]any{"repositories": []string{"a"}})
	require.NoError(t, err)
	c := srv.ClientWithToken(tok)
	_, _, err = c.Repositories.Get(ctx, "acme", "a")
	require.NoError(t, err)
	_, _, err = c.Repositories.Get(ctx, "acme", "b")
	apiError(t, err, http.StatusNotFound)
	repos, _, err := c.Apps.ListRepos(ctx, nil)
	require.NoError(t, err)
	require.Len(t, repos.Repositories, 1)
	assert.Equal(t, "a", repos.Repositories[0].GetName())
	req, err := c.NewRequest("POST", srv.URL+"/api/graphql", map[string]string{"query": `{ a: repository(owner: "acme", name: "a") { name } b: repository(owner: "acme", name: "b") { name } }`})
	require.NoError(t, err)
	var answer struct {
		Data   map[string]any
		Errors []struct{ Type string }
	}
	_, err = c.Do(ctx, req, &answer)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"a": map[string]any{"name": "a"}, "b": nil}, answer.Data, "GraphQL sees repository a only")
	require.Len(t, answer.Errors, 1)
	assert.Equal(t, "NOT_FOUND", answer.Errors[0].Type)
	resp, err := http.Get(srv.GitURLWithToken("acme", "b", tok) + "/info/refs?service=git-upload-pack")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "git sees repository a only")

	tok, err = tokenFor(t, srv, map[string]any{"permissions": map[string]string{"metadata": "read", "contents": "read"}})
	require.NoError(t, err)
	c = srv.ClientWithToken(tok)
	_, _, err = c.Git.GetRef(ctx, "acme", "b", "heads/main")
	require.NoError(t, err, "contents: read")
	_, _, err = c.Issues.CreateComment(ctx, "acme", "b", 1, &github.IssueComment{Body: github.String("x")})
	er := apiError(t, err, http.StatusForbidden)
	assert.Equal(t, "Resource not accessible by integration", er.Message, "pull_requests was narrowed away")

	for name, body := range map[string]map[string]any{
		"a repository of another account":  {"repositories": []string{"x"}},
		"a repository that does not exist": {"repositories": []string{"nope"}},
		"an unknown repository id":         {"repository_ids": []int64{999999}},
	} {
		_, err := tokenFor(t, srv, body)
		er := apiError(t, err, http.StatusUnprocessableEntity)
		assert.Equal(t, "There is at least one repository that does not exist or is not accessible to the parent installation.", er.Message, name)
	}
	// app.yml grants no deployments and no issues at all.
	for name, perms := range map[string]map[string]string{
		"deployments: read": {"deployments": "read"},
		"issues: read":      {"issues": "read"},
		"workflows: write":  {"workflows": "write"},
	} {
		_, err := tokenFor(t, srv, map[string]any{"permissions": perms})
		er := apiError(t, err, http.StatusUnprocessableEntity)
		assert.Equal(t, "The permissions requested are not granted to this installation.", er.Message, name)
	}
}

// TestProgramHoldsTokensToAppManifest: the server the fakegithub program builds (New, with its
// state in a directory) holds installation tokens to the repository's app.yml as the in-test
// server does: fleetbot's App may read and create commit statuses (serve's health endpoint
// records the clusters' verdicts), and has no issues permission.
// https://docs.github.com/rest/authentication/permissions-required-for-github-apps
func TestProgramHoldsTokensToAppManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv, err := githubtest.New(t.TempDir())
	require.NoError(t, err)
	srv.DisablePersistence()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(srv.Close)
	srv.URL = hs.URL
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "r", map[string]string{"README.md": "v1\n"})
	c := srv.ClientWithToken(srv.InstallationToken("acme"))
	sha := srv.Branch("acme", "r", "main")

	_, _, err = c.Repositories.ListStatuses(ctx, "acme", "r", sha, nil)
	require.NoError(t, err, "statuses: read")
	_, _, err = c.Repositories.CreateStatus(ctx, "acme", "r", sha, &github.RepoStatus{State: github.String("success"), Context: github.String("ci")})
	require.NoError(t, err, "statuses: write")
	_, _, err = c.Issues.Create(ctx, "acme", "r", &github.IssueRequest{Title: github.String("t")})
	apiError(t, err, http.StatusForbidden)
	_, _, err = srv.Client().Issues.Create(ctx, "acme", "r", &github.IssueRequest{Title: github.String("t")})
	require.NoError(t, err, "a user's token is not held to the App's manifest")
}

// TestUserAgentRequired: "Requests with no User-Agent header will be rejected": 403, before
// anything else (a valid token does not help).
// https://docs.github.com/rest/using-the-rest-api/getting-started-with-the-rest-api#user-agent
func TestUserAgentRequired(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"README.md": "v1\n"})
	get := func(ua string) *http.Response {
		req, err := http.NewRequest("GET", srv.APIURL()+"repos/acme/r", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "token "+githubtest.DefaultToken)
		req.Header["User-Agent"] = []string{ua} // "" is sent as no User-Agent
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := get("")
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	body := new(strings.Builder)
	_, _ = io.Copy(body, resp.Body)
	assert.Contains(t, body.String(), "Please make sure your request has a User-Agent header")
	assert.Equal(t, http.StatusOK, get("fleetbot").StatusCode)
}

// TestTopicRules: topics are lowered ("Topic names will be saved as lowercase"), must start with
// a letter or digit, hold only a-z, 0-9 and hyphens, have at most 50 characters, and a
// repository at most 20 of them; anything else is 422 and changes nothing.
// https://docs.github.com/repositories/managing-your-repositorys-settings-and-features/customizing-your-repository/classifying-your-repository-with-topics,
// https://docs.github.com/rest/repos/repos#replace-all-repository-topics
func TestTopicRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"README.md": "v1\n"})
	c := srv.ClientWithToken(srv.InstallationToken("acme"))
	got, _, err := c.Repositories.ReplaceAllTopics(ctx, "acme", "r", []string{"Fleetbot-Managed", "k8s", "fleetbot-managed"})
	require.NoError(t, err)
	assert.Equal(t, []string{"fleetbot-managed", "k8s"}, got, "lowered, once each")
	var twentyOne []string
	for i := range 21 {
		twentyOne = append(twentyOne, fmt.Sprintf("t%d", i))
	}
	for name, topics := range map[string][]string{
		"a leading hyphen": {"-x"},
		"an underscore":    {"a_b"},
		"a space":          {"a b"},
		"51 characters":    {strings.Repeat("a", 51)},
		"a non-ASCII":      {"café"},
		"21 topics":        twentyOne,
	} {
		_, _, err := c.Repositories.ReplaceAllTopics(ctx, "acme", "r", topics)
		er := apiError(t, err, http.StatusUnprocessableEntity)
		assert.Equal(t, "Validation Failed", er.Message, name)
	}
	got, _, err = c.Repositories.ListAllTopics(ctx, "acme", "r")
	require.NoError(t, err)
	assert.Equal(t, []string{"fleetbot-managed", "k8s"}, got, "nothing changed")
	_, _, err = c.Repositories.ReplaceAllTopics(ctx, "acme", "r", []string{strings.Repeat("a", 50)})
	require.NoError(t, err, "50 characters")
}

// TestAppJWTRules: an App JWT may expire at most ten minutes ahead; its iat may be in the future
// by the clock drift GitHub allows (the docs recommend iat 60 s in the past); exp must be after
// iat and in the future; iss the App's id. Anything else is 401.
// https://docs.github.com/apps/creating-github-apps/authenticating-with-a-github-app/generating-a-json-web-token-jwt-for-a-github-app
func TestAppJWTRules(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	block, _ := pem.Decode(srv.AppPrivateKeyPEM())
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	require.NoError(t, err)
	now := time.Now()
	get := func(iat, exp time.Time, iss string) (int, string) {
		signed, err := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.RegisteredClaims{
			IssuedAt: jwt.NewNumericDate(iat), ExpiresAt: jwt.NewNumericDate(exp), Issuer: iss}).SignedString(key)
		require.NoError(t, err)
		req, err := http.NewRequest("GET", srv.APIURL()+"app", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+signed)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var body struct{ Message string }
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Message
	}
	app := fmt.Sprint(srv.AppID())
	status, _ := get(now.Add(-60*time.Second), now.Add(10*time.Minute-5*time.Second), app)
	assert.Equal(t, http.StatusOK, status, "GitHub's own example: iat 60 s ago, exp ten minutes ahead")
	status, _ = get(now.Add(30*time.Second), now.Add(5*time.Minute), app)
	assert.Equal(t, http.StatusOK, status, "an iat 30 s ahead: within the drift")
	for name, tc := range map[string]struct {
		iat, exp time.Time
		iss, msg string
	}{
		"valid for eleven minutes":    {now.Add(-30 * time.Second), now.Add(11 * time.Minute), app, "'Expiration time' claim ('exp') is too far in the future"},
		"issued two minutes ahead":    {now.Add(2 * time.Minute), now.Add(5 * time.Minute), app, "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"},
		"expired":                     {now.Add(-5 * time.Minute), now.Add(-time.Minute), app, "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"},
		"another App's id":            {now.Add(-30 * time.Second), now.Add(5 * time.Minute), "999", "'Issuer' claim ('iss') must be an Integer"},
		"expires before it is issued": {now.Add(40 * time.Second), now.Add(20 * time.Second), app, "'Expiration time' claim ('exp') must be after the 'Issued at' claim ('iat')"},
	} {
		status, msg := get(tc.iat, tc.exp, tc.iss)
		assert.Equal(t, http.StatusUnauthorized, status, name)
		assert.Equal(t, tc.msg, msg, name)
	}
}
