package githubtest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

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
