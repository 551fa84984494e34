package githubtest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// TestCommitStatusOverTLS posts and lists commit statuses as Flux's notification-controller
// does (its github provider: list the commit's statuses, then create one), over HTTPS with the
// server's certificate as the only CA, as a Provider's certSecretRef gives it. NewServer checks
// every request and answer against GitHub's REST description.
func TestCommitStatusOverTLS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t, githubtest.WithTLS())
	srv.CreateRepo("acme", "cluster", map[string]string{"README.md": "v1\n"})
	head := srv.Branch("acme", "cluster", "main")
	require.Regexp(t, `^https://127\.0\.0\.1:`, srv.URL)

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(srv.CertPEM()), "CertPEM is a PEM certificate")
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	c, err := github.NewClient(hc).WithAuthToken(githubtest.DefaultToken).WithEnterpriseURLs(srv.URL, srv.URL)
	require.NoError(t, err)

	list, _, err := c.Repositories.ListStatuses(ctx, "acme", "cluster", head, &github.ListOptions{PerPage: 50})
	require.NoError(t, err)
	assert.Empty(t, list)
	st, resp, err := c.Repositories.CreateStatus(ctx, "acme", "cluster", head, &github.RepoStatus{
		State: github.String("success"), Context: github.String("kustomization/apps/0c9c2e41"),
		Description: github.String("reconciliation succeeded"),
	})
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "success", st.GetState())

	list, _, err = c.Repositories.ListStatuses(ctx, "acme", "cluster", "main", nil)
	require.NoError(t, err)
	require.Len(t, list, 1, "a branch name lists its head's statuses")
	assert.Equal(t, "kustomization/apps/0c9c2e41", list[0].GetContext())
	assert.Equal(t, "reconciliation succeeded", list[0].GetDescription())

	// The same server's own client trusts its certificate.
	_, _, err = srv.Client().Repositories.ListStatuses(ctx, "acme", "cluster", head, nil)
	require.NoError(t, err)
}

// TestCommitStatusRefusals: a status for a commit the repository lacks or with a state GitHub
// does not know is refused with 422, as GitHub does, and nothing is recorded.
func TestCommitStatusRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A state outside the description's enum is a request GitHub's description refuses on purpose.
	srv := githubtest.NewServer(t, githubtest.WithoutRESTSpec())
	srv.CreateRepo("acme", "cluster", map[string]string{"README.md": "v1\n"})
	head := srv.Branch("acme", "cluster", "main")
	c := srv.Client()

	_, resp, err := c.Repositories.CreateStatus(ctx, "acme", "cluster", "0123456789012345678901234567890123456789",
		&github.RepoStatus{State: github.String("success")})
	require.Error(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)
	assert.Contains(t, err.Error(), "No commit found for SHA")

	_, resp, err = c.Repositories.CreateStatus(ctx, "acme", "cluster", head, &github.RepoStatus{State: github.String("done")})
	require.Error(t, err)
	assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode)

	list, _, err := c.Repositories.ListStatuses(ctx, "acme", "cluster", head, nil)
	require.NoError(t, err)
	assert.Empty(t, list)
}
