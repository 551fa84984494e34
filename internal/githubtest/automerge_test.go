package githubtest

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCreateRepoAllowAutoMerge: a repo created through the API does not allow auto-merge unless
// the request says so, as on GitHub; PATCH can turn it on.
func TestCreateRepoAllowAutoMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewServer(t)
	s.CreateOrg("acme")
	c := s.Client()
	r, _, err := c.Repositories.Create(ctx, "acme", &github.Repository{Name: github.String("plain")})
	require.NoError(t, err)
	assert.False(t, r.GetAllowAutoMerge(), "off by default")
	r, _, err = c.Repositories.Create(ctx, "acme", &github.Repository{Name: github.String("auto"), AllowAutoMerge: github.Bool(true)})
	require.NoError(t, err)
	assert.True(t, r.GetAllowAutoMerge())
	r, _, err = c.Repositories.Edit(ctx, "acme", "plain", &github.Repository{AllowAutoMerge: github.Bool(true)})
	require.NoError(t, err)
	assert.True(t, r.GetAllowAutoMerge())
}

// TestEnableAutoMergeRefusals: enablePullRequestAutoMerge fails with GitHub's messages when the
// repository does not allow auto-merge and when the pull request is already mergeable (clean);
// it succeeds on a pull request that waits for a required review.
func TestEnableAutoMergeRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewServer(t)
	s.CreateRepo("acme", "r", map[string]string{"README.md": "hi\n"})
	s.Commit("acme", "r", "topic", "change", map[string]string{"x": "1\n"})
	c := s.Client()
	p, _, err := c.PullRequests.Create(ctx, "acme", "r", &github.NewPullRequest{Title: github.String("t"), Head: github.String("topic"), Base: github.String("main")})
	require.NoError(t, err)
	enable := func() map[string]any {
		return graphQL(t, s, `mutation($id: ID!) { enablePullRequestAutoMerge(input: {pullRequestId: $id, mergeMethod: SQUASH}) { pullRequest { number } } }`,
			map[string]any{"id": p.GetNodeID()})
	}

	out := enable()
	assert.Contains(t, fmt.Sprint(out["errors"]), "Auto merge is not allowed for this repository")

	_, _, err = c.Repositories.Edit(ctx, "acme", "r", &github.Repository{AllowAutoMerge: github.Bool(true)})
	require.NoError(t, err)
	got, _, err := c.PullRequests.Get(ctx, "acme", "r", p.GetNumber())
	require.NoError(t, err)
	assert.Equal(t, "clean", got.GetMergeableState())
	out = enable()
	assert.Contains(t, fmt.Sprint(out["errors"]), "Pull request Pull request is in clean status")

	_, _, err = c.Repositories.UpdateBranchProtection(ctx, "acme", "r", "main", &github.ProtectionRequest{
		RequiredPullRequestReviews: &github.PullRequestReviewsEnforcementRequest{RequiredApprovingReviewCount: 1},
	})
	require.NoError(t, err)
	got, _, err = c.PullRequests.Get(ctx, "acme", "r", p.GetNumber())
	require.NoError(t, err)
	assert.Equal(t, "blocked", got.GetMergeableState())
	// expectedHeadOid is a compare-and-swap on the head: another commit is refused, nothing
	// enabled.
	out = graphQL(t, s, `mutation($id: ID!) { enablePullRequestAutoMerge(input: {pullRequestId: $id, mergeMethod: SQUASH, expectedHeadOid: "`+s.Branch("acme", "r", "main")+`"}) { pullRequest { number } } }`,
		map[string]any{"id": p.GetNodeID()})
	assert.Contains(t, fmt.Sprint(out["errors"]), "head ref has been modified")
	got, _, err = c.PullRequests.Get(ctx, "acme", "r", p.GetNumber())
	require.NoError(t, err)
	assert.Nil(t, got.GetAutoMerge())
	out = enable()
	assert.Nil(t, out["errors"])
	got, _, err = c.PullRequests.Get(ctx, "acme", "r", p.GetNumber())
	require.NoError(t, err)
	assert.Equal(t, "squash", got.GetAutoMerge().GetMergeMethod())
}
