package githubtest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// apiCommit creates a commit through the Git Data API with c, without author or committer,
// as fleetbot does, and reads it back.
func apiCommit(t *testing.T, srv *githubtest.Server, c *github.Client) *github.Commit {
	t.Helper()
	ctx := context.Background()
	base, _, err := c.Git.GetRef(ctx, "acme", "r", "heads/main")
	require.NoError(t, err)
	parent, _, err := c.Git.GetCommit(ctx, "acme", "r", base.GetObject().GetSHA())
	require.NoError(t, err)
	made, _, err := c.Git.CreateCommit(ctx, "acme", "r", &github.Commit{
		Message: github.String("m"), Tree: parent.Tree, Parents: []*github.Commit{{SHA: parent.SHA}},
	}, nil)
	require.NoError(t, err)
	got, _, err := c.Git.GetCommit(ctx, "acme", "r", made.GetSHA())
	require.NoError(t, err)
	assert.Equal(t, made.GetCommitter(), got.GetCommitter(), "create and get agree")
	return got
}

// TestAPICommitIdentity: GitHub records an App's API commit as authored by its bot and
// committed by web-flow ("GitHub <noreply@github.com>"), signed; a personal access token's as
// the user's own, unsigned; GitHub Enterprise Server signs neither.
func TestAPICommitIdentity(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                       string
		ghes, app                  bool
		author, committer, cmEmail string
		verified                   bool
	}{
		{name: "github.com App", app: true, author: "fleetbot[bot]", committer: "GitHub", cmEmail: "noreply@github.com", verified: true},
		{name: "github.com PAT", author: githubtest.DefaultUser, committer: githubtest.DefaultUser, verified: false},
		{name: "GHES App", ghes: true, app: true, author: "fleetbot[bot]", committer: "GitHub Enterprise", verified: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts []githubtest.Option
			if tc.ghes {
				opts = append(opts, githubtest.WithEnterpriseServer())
			}
			srv := githubtest.NewServer(t, opts...)
			srv.CreateRepo("acme", "r", map[string]string{"README.md": "hi\n"})
			c := srv.Client()
			if tc.app {
				c = srv.ClientWithToken(srv.InstallationToken("acme"))
			}
			got := apiCommit(t, srv, c)
			assert.Equal(t, tc.author, got.GetAuthor().GetName())
			assert.Equal(t, tc.committer, got.GetCommitter().GetName())
			if tc.cmEmail != "" {
				assert.Equal(t, tc.cmEmail, got.GetCommitter().GetEmail())
			}
			assert.Equal(t, tc.verified, got.GetVerification().GetVerified())
			if !tc.verified {
				assert.Equal(t, "unsigned", got.GetVerification().GetReason())
			}
		})
	}
}

// TestGetUserWithInstallationToken: an installation token is no user; GET /user answers 403
// "Resource not accessible by integration", while a personal access token reads its user.
func TestGetUserWithInstallationToken(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	_, _, err := srv.ClientWithToken(srv.InstallationToken("acme")).Users.Get(context.Background(), "")
	require.Error(t, err)
	assert.Equal(t, http.StatusForbidden, errStatus(t, err))
	assert.Contains(t, err.Error(), "Resource not accessible by integration")

	u, _, err := srv.Client().Users.Get(context.Background(), "")
	require.NoError(t, err)
	assert.Equal(t, githubtest.DefaultUser, u.GetLogin())
}

// TestInternalVisibility: internal repositories exist only for organizations of an enterprise
// (GitHub Enterprise Cloud) and on GitHub Enterprise Server; elsewhere the create is a 422 on
// the visibility field and nothing is created.
func TestInternalVisibility(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	internal := &github.Repository{Name: github.String("x"), Visibility: github.String("internal")}

	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	_, _, err := srv.Client().Repositories.Create(ctx, "acme", internal)
	require.Error(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, errStatus(t, err))
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er)
	require.Len(t, er.Errors, 1)
	assert.Equal(t, "visibility", er.Errors[0].Field)
	assert.Nil(t, srv.Repo("acme", "x"), "nothing created")
	_, _, err = srv.Client().Repositories.Create(ctx, "", internal)
	assert.Equal(t, http.StatusUnprocessableEntity, errStatus(t, err), "a user account has no internal repos")

	srv.SetOrgEnterprise("acme", true)
	r, _, err := srv.Client().Repositories.Create(ctx, "acme", internal)
	require.NoError(t, err, "an enterprise org may")
	assert.Equal(t, "internal", r.GetVisibility())

	ghes := githubtest.NewServer(t, githubtest.WithEnterpriseServer())
	ghes.CreateOrg("acme")
	_, _, err = ghes.Client().Repositories.Create(ctx, "acme", internal)
	require.NoError(t, err, "every org on GHES may")
}
