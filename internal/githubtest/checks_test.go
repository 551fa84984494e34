package githubtest_test

import (
	"context"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

func TestCheckRunsAreListedByTheirCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "control", map[string]string{"README.md": "v1\n"})
	head := srv.Branch("acme", "control", "main")
	c := srv.ClientWithToken(srv.InstallationToken("acme"))

	cr, _, err := c.Checks.CreateCheckRun(ctx, "acme", "control", github.CreateCheckRunOptions{Name: "plan", HeadSHA: "main"})
	require.NoError(t, err)
	assert.Equal(t, head, cr.GetHeadSHA(), "a branch name resolves to its commit")
	_, _, err = c.Checks.UpdateCheckRun(ctx, "acme", "control", cr.GetID(), github.UpdateCheckRunOptions{Name: "plan", Conclusion: github.String("success")})
	require.NoError(t, err)

	res, _, err := c.Checks.ListCheckRunsForRef(ctx, "acme", "control", head, nil)
	require.NoError(t, err)
	require.Len(t, res.CheckRuns, 1)
	assert.Equal(t, "completed", res.CheckRuns[0].GetStatus())
	payload, err := srv.CheckRunEvent(cr.GetID(), "rerequested")
	require.NoError(t, err)
	var ev github.CheckRunEvent
	require.NoError(t, payload.Decode(&ev))
	assert.Equal(t, head, ev.GetCheckRun().GetHeadSHA())
}
