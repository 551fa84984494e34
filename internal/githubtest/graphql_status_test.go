package githubtest

import (
	"context"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGraphQLStatusCheckRollup: Commit.statusCheckRollup.state combines the newest status of
// each context and the check runs of the commit, as GitHub does; null without any.
func TestGraphQLStatusCheckRollup(t *testing.T) {
	t.Parallel()
	RequireGraphQLSchema(t)
	s := NewServer(t)
	s.CreateRepo("acme", "r", map[string]string{"README.md": "hi"})
	sha := s.Branch("acme", "r", "main")
	q := `query { repository(owner: "acme", name: "r") { ref(qualifiedName: "refs/heads/main") {
	  target { oid ... on Commit { statusCheckRollup { state } } } } } }`
	rollup := func() any {
		t.Helper()
		out := graphQL(t, s, q, nil)
		require.Nil(t, out["errors"])
		target := out["data"].(map[string]any)["repository"].(map[string]any)["ref"].(map[string]any)["target"].(map[string]any)
		assert.Equal(t, sha, target["oid"])
		if r, _ := target["statusCheckRollup"].(map[string]any); r != nil {
			return r["state"]
		}
		return nil
	}
	assert.Nil(t, rollup(), "no status, no check run: null")

	ctx := context.Background()
	api := s.Client()
	status := func(context, state string) {
		_, _, err := api.Repositories.CreateStatus(ctx, "acme", "r", sha, &github.RepoStatus{State: github.String(state), Context: github.String(context)})
		require.NoError(t, err)
	}
	status("flux", "pending")
	assert.Equal(t, "PENDING", rollup())
	status("flux", "success")
	assert.Equal(t, "SUCCESS", rollup(), "only the newest status of a context counts")
	status("ci", "error")
	assert.Equal(t, "ERROR", rollup())
	status("ci", "success")
	app := s.ClientWithToken(s.InstallationToken("acme")) // check runs are for GitHub Apps only
	run, _, err := app.Checks.CreateCheckRun(ctx, "acme", "r", github.CreateCheckRunOptions{Name: "lint", HeadSHA: sha, Status: github.String("in_progress")})
	require.NoError(t, err)
	assert.Equal(t, "PENDING", rollup(), "a check run still running")
	_, _, err = app.Checks.UpdateCheckRun(ctx, "acme", "r", run.GetID(), github.UpdateCheckRunOptions{Name: "lint", Status: github.String("completed"), Conclusion: github.String("failure")})
	require.NoError(t, err)
	assert.Equal(t, "FAILURE", rollup())
}

// TestGraphQLPullRequestAgeAndReview: PullRequest.createdAt and reviewDecision (REVIEW_REQUIRED
// when the base branch's protection requires a review nobody gave, else null).
func TestGraphQLPullRequestAgeAndReview(t *testing.T) {
	t.Parallel()
	RequireGraphQLSchema(t)
	s := NewServer(t)
	s.CreateRepo("acme", "r", map[string]string{"README.md": "hi"})
	s.Commit("acme", "r", "topic", "change", map[string]string{"a.txt": "a"})
	ctx := context.Background()
	api := s.Client()
	p, _, err := api.PullRequests.Create(ctx, "acme", "r", &github.NewPullRequest{Title: github.String("t"), Head: github.String("topic"), Base: github.String("main")})
	require.NoError(t, err)
	q := `query { repository(owner: "acme", name: "r") { pullRequests(first: 1, states: [OPEN]) { nodes { number createdAt reviewDecision } } } }`
	node := func() map[string]any {
		t.Helper()
		out := graphQL(t, s, q, nil)
		require.Nil(t, out["errors"])
		return out["data"].(map[string]any)["repository"].(map[string]any)["pullRequests"].(map[string]any)["nodes"].([]any)[0].(map[string]any)
	}
	n := node()
	assert.Equal(t, p.GetCreatedAt().UTC().Format("2006-01-02T15:04:05Z"), n["createdAt"])
	assert.Nil(t, n["reviewDecision"], "no protection: no review required")
	_, _, err = api.Repositories.UpdateBranchProtection(ctx, "acme", "r", "main", &github.ProtectionRequest{
		RequiredPullRequestReviews: &github.PullRequestReviewsEnforcementRequest{RequiredApprovingReviewCount: 1},
	})
	require.NoError(t, err)
	assert.Equal(t, "REVIEW_REQUIRED", node()["reviewDecision"])
}
