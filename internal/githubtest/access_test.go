package githubtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

func TestBranchProtection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a": "a"})
	c := srv.Client()

	_, _, err := c.Repositories.GetBranchProtection(ctx, "acme", "r", "main")
	assert.True(t, errors.Is(err, github.ErrBranchNotProtected), "got %v", err)
	_, _, err = c.Repositories.GetBranchProtection(ctx, "acme", "r", "nope")
	assert.Equal(t, http.StatusNotFound, errStatus(t, err))

	p, _, err := c.Repositories.UpdateBranchProtection(ctx, "acme", "r", "main", &github.ProtectionRequest{
		RequiredPullRequestReviews: &github.PullRequestReviewsEnforcementRequest{
			RequireCodeOwnerReviews: true, DismissStaleReviews: true, RequiredApprovingReviewCount: 1},
		EnforceAdmins:    false,
		AllowForcePushes: github.Bool(false),
		AllowDeletions:   github.Bool(false),
	})
	require.NoError(t, err)
	assert.True(t, p.GetRequiredPullRequestReviews().RequireCodeOwnerReviews)

	p, _, err = c.Repositories.GetBranchProtection(ctx, "acme", "r", "main")
	require.NoError(t, err)
	assert.True(t, p.GetRequiredPullRequestReviews().DismissStaleReviews)
	assert.Equal(t, 1, p.GetRequiredPullRequestReviews().RequiredApprovingReviewCount)
	assert.False(t, p.GetAllowForcePushes().Enabled)
	assert.False(t, p.GetEnforceAdmins().Enabled)
	assert.True(t, srv.Protected("acme", "r", "main"))

	_, err = c.Repositories.RemoveBranchProtection(ctx, "acme", "r", "main")
	require.NoError(t, err)
	_, err = c.Repositories.RemoveBranchProtection(ctx, "acme", "r", "main")
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er) // go-github v62 maps the sentinel only on reads
	assert.Equal(t, "Branch not protected", er.Message)
}

func TestTeamsCollaboratorsAndCodeowners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateTeam("acme", "platform", "alice")
	srv.CreateTeam("acme", "payments-devs", "bob")
	srv.CreateRepo("acme", "workspace-pay", map[string]string{".github/CODEOWNERS": "* @acme/platform\n" +
		"/apps/ @acme/payments-devs @acme/ghost\n" +
		"!nope @acme/platform\n" +
		"/x/ notanowner\n"})
	c := srv.ClientWithToken(srv.InstallationToken("acme"))

	teams, _, err := c.Teams.ListTeams(ctx, "acme", nil)
	require.NoError(t, err)
	require.Len(t, teams, 2)
	_, err = c.Teams.AddTeamRepoBySlug(ctx, "acme", "platform", "acme", "workspace-pay", &github.TeamAddTeamRepoOptions{Permission: "admin"})
	require.NoError(t, err)
	_, err = c.Teams.AddTeamRepoBySlug(ctx, "acme", "payments-devs", "acme", "workspace-pay", &github.TeamAddTeamRepoOptions{Permission: "push"})
	require.NoError(t, err)
	_, err = c.Teams.AddTeamRepoBySlug(ctx, "acme", "nope", "acme", "workspace-pay", &github.TeamAddTeamRepoOptions{})
	assert.Equal(t, http.StatusNotFound, errStatus(t, err))

	repoTeams, _, err := c.Repositories.ListTeams(ctx, "acme", "workspace-pay", nil)
	require.NoError(t, err)
	got := map[string]string{}
	for _, tm := range repoTeams {
		got[tm.GetSlug()] = tm.GetPermission()
	}
	assert.Equal(t, map[string]string{"platform": "admin", "payments-devs": "push"}, got)
	assert.Equal(t, got, srv.TeamPermissions("acme", "workspace-pay"))

	members, _, err := c.Teams.ListTeamMembersBySlug(ctx, "acme", "platform", nil)
	require.NoError(t, err)
	require.Len(t, members, 1)
	assert.Equal(t, "alice", members[0].GetLogin())
	m, _, err := c.Teams.GetTeamMembershipBySlug(ctx, "acme", "platform", "alice")
	require.NoError(t, err)
	assert.Equal(t, "active", m.GetState())

	_, err = c.Teams.RemoveTeamRepoBySlug(ctx, "acme", "payments-devs", "acme", "workspace-pay")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"platform": "admin"}, srv.TeamPermissions("acme", "workspace-pay"))

	srv.CreateUser("carol")
	_, _, err = c.Repositories.AddCollaborator(ctx, "acme", "workspace-pay", "carol", &github.RepositoryAddCollaboratorOptions{Permission: "admin"})
	require.NoError(t, err)
	collabs, _, err := c.Repositories.ListCollaborators(ctx, "acme", "workspace-pay", &github.ListCollaboratorsOptions{Affiliation: "direct"})
	require.NoError(t, err)
	require.Len(t, collabs, 1)
	assert.True(t, collabs[0].GetPermissions()["admin"])
	_, err = c.Repositories.RemoveCollaborator(ctx, "acme", "workspace-pay", "carol")
	require.NoError(t, err)

	cerrs, _, err := c.Repositories.GetCodeownersErrors(ctx, "acme", "workspace-pay", nil)
	require.NoError(t, err)
	kinds := map[int]string{}
	for _, e := range cerrs.Errors {
		kinds[e.Line] = e.Kind
	}
	// payments-devs lost write access above, ghost does not exist
	assert.Equal(t, map[int]string{2: "Unknown owner", 3: "Invalid pattern", 4: "Invalid owner"}, kinds)
	assert.Len(t, cerrs.Errors, 4)
}

func TestRepoSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", map[string]string{"a": "a"})
	c := srv.Client()
	topics, _, err := c.Repositories.ReplaceAllTopics(ctx, "acme", "r", []string{"fleetbot", "cluster"})
	require.NoError(t, err)
	assert.Equal(t, []string{"fleetbot", "cluster"}, topics)

	repo, _, err := c.Repositories.Edit(ctx, "acme", "r", &github.Repository{Archived: github.Bool(true)})
	require.NoError(t, err)
	assert.True(t, repo.GetArchived())
	_, _, err = c.Git.CreateBlob(ctx, "acme", "r", &github.Blob{Content: github.String("x")})
	assert.Equal(t, http.StatusForbidden, errStatus(t, err), "archived repositories are read-only")
	assert.Equal(t, []string{"fleetbot", "cluster"}, srv.Repo("acme", "r").Topics)
}

// GitHub Free: branch protection exists only on public repositories of an organization.
func TestFreePlanRefusesProtectionOnPrivateRepos(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	srv.SetOrgPlan("acme", githubtest.PlanFree)
	c := srv.Client()
	for _, vis := range []string{"private", "public"} {
		_, _, err := c.Repositories.Create(ctx, "acme", &github.Repository{Name: github.String(vis), Visibility: github.String(vis), AutoInit: github.Bool(true)})
		require.NoError(t, err)
	}
	req := &github.ProtectionRequest{AllowForcePushes: github.Bool(false)}
	_, resp, err := c.Repositories.UpdateBranchProtection(ctx, "acme", "private", "main", req)
	require.Error(t, err)
	assert.Equal(t, 403, resp.StatusCode)
	assert.Contains(t, err.Error(), "Upgrade to GitHub Pro or make this repository public to enable this feature.")
	_, _, err = c.Repositories.GetBranchProtection(ctx, "acme", "private", "main")
	assert.ErrorContains(t, err, "Upgrade to GitHub Pro")
	_, _, err = c.Repositories.UpdateBranchProtection(ctx, "acme", "public", "main", req)
	assert.NoError(t, err, "a public repository can be protected on any plan")
}

// The CODEOWNERS check answers GitHub's documented example as documented
// (https://docs.github.com/rest/repos/repos#list-codeowners-errors), and follows the
// documented rules: full-line comments only, no negation, no character ranges, owners with
// write access, visible teams.
func TestCodeownersErrorsAsDocumented(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	srv.CreateUser("monalisa")
	srv.CreateTeam("acme", "platform")
	srv.CreateRepo("acme", "r", map[string]string{".github/CODEOWNERS": "# owners\n\n***/*.rb @monalisa\n*.md @acme/platform\n\n\n*.txt docs@\n"})
	srv.SetCollaborator("acme", "r", "monalisa", "push")
	srv.SetTeamRepoPermission("acme", "platform", "acme", "r", "push")
	c := srv.Client()

	req, err := c.NewRequest("GET", "repos/acme/r/codeowners/errors", nil)
	require.NoError(t, err)
	var got map[string]any
	_, err = c.Do(ctx, req, &got)
	require.NoError(t, err)
	want := map[string]any{"errors": []any{
		map[string]any{"line": float64(3), "column": float64(1), "kind": "Invalid pattern", "source": "***/*.rb @monalisa",
			"suggestion": "Did you mean `**/*.rb`?", "message": "Invalid pattern on line 3: Did you mean `**/*.rb`?\n\n  ***/*.rb @monalisa\n  ^",
			"path": ".github/CODEOWNERS"},
		map[string]any{"line": float64(7), "column": float64(7), "kind": "Invalid owner", "source": "*.txt docs@",
			"suggestion": nil, "message": "Invalid owner on line 7:\n\n  *.txt docs@\n        ^", "path": ".github/CODEOWNERS"},
	}}
	assert.Equal(t, want, got)

	// Rules: an inline "#" is not a comment (gitignore), a pull-only team owns nothing, a team
	// of another org is unknown, an e-mail is accepted, negation and ranges are refused.
	srv.CreateTeam("acme", "readers")
	srv.SetTeamRepoPermission("acme", "readers", "acme", "r", "pull")
	srv.Commit("acme", "r", "main", "owners", map[string]string{".github/CODEOWNERS": "" +
		"* @acme/platform # platform\n" +
		"/a/ @acme/readers\n" +
		"/b/ @other/platform\n" +
		"/c/ someone@example.com\n" +
		"!/d/ @acme/platform\n" +
		"/[ef]/ @acme/platform\n"})
	cerrs, _, err := c.Repositories.GetCodeownersErrors(ctx, "acme", "r", nil)
	require.NoError(t, err)
	var lines []string
	for _, e := range cerrs.Errors {
		lines = append(lines, fmt.Sprintf("%d:%d %s", e.Line, e.Column, e.Kind))
	}
	assert.Equal(t, []string{"1:18 Invalid owner", "1:20 Invalid owner", "2:5 Unknown owner", "3:5 Unknown owner",
		"5:1 Invalid pattern", "6:2 Invalid pattern"}, lines)
}
