package githubtest_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

func enterpriseClient(t *testing.T, srv *githubtest.Server, tr http.RoundTripper) *github.Client {
	t.Helper()
	c, err := github.NewClient(&http.Client{Transport: tr}).WithEnterpriseURLs(srv.APIURL(), srv.APIURL())
	require.NoError(t, err)
	return c
}

func TestAppInstallationTokenWithGhinstallation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t, githubtest.WithApp(4242, "fleetbot"))
	id := srv.CreateOrg("acme")
	srv.CreateRepo("acme", "r", map[string]string{"a": "a"})

	atr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, srv.AppID(), srv.AppPrivateKeyPEM())
	require.NoError(t, err)
	atr.BaseURL = srv.URL + "/api/v3"
	app := enterpriseClient(t, srv, atr)
	installs, _, err := app.Apps.ListInstallations(ctx, nil)
	require.NoError(t, err)
	require.Len(t, installs, 1)
	assert.Equal(t, id, installs[0].GetID())
	in, _, err := app.Apps.FindOrganizationInstallation(ctx, "acme")
	require.NoError(t, err)
	assert.Equal(t, "acme", in.GetAccount().GetLogin())

	itr := ghinstallation.NewFromAppsTransport(atr, id)
	itr.BaseURL = srv.URL + "/api/v3"
	itr.InstallationTokenOptions = &github.InstallationTokenOptions{} // {} rather than null
	c := enterpriseClient(t, srv, itr)
	repo, _, err := c.Repositories.Get(ctx, "acme", "r")
	require.NoError(t, err)
	assert.Equal(t, "main", repo.GetDefaultBranch())
	expires, _, err := itr.Expiry()
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(time.Hour), expires, time.Minute)
	reqs := srv.Requests()
	assert.Equal(t, "POST /app/installations/{id}/access_tokens", reqs[len(reqs)-2].Route)
	assert.Equal(t, "fleetbot[bot]", reqs[len(reqs)-1].Principal)
}

func TestAppJWTRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	_ = srv.AppPrivateKeyPEM()

	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	otherPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)})
	atr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, srv.AppID(), otherPEM)
	require.NoError(t, err)
	atr.BaseURL = srv.URL + "/api/v3"
	_, _, err = enterpriseClient(t, srv, atr).Apps.Get(ctx, "")
	assert.Equal(t, http.StatusUnauthorized, errStatus(t, err), "wrong key")

	key, err := x509.ParsePKCS1PrivateKey(mustPEM(t, srv.AppPrivateKeyPEM()))
	require.NoError(t, err)
	sign := func(claims jwt.RegisteredClaims) string {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
		require.NoError(t, err)
		return tok
	}
	now := time.Now()
	for name, tok := range map[string]string{
		"expired":                    sign(jwt.RegisteredClaims{Issuer: "1", IssuedAt: jwt.NewNumericDate(now.Add(-20 * time.Minute)), ExpiresAt: jwt.NewNumericDate(now.Add(-10 * time.Minute))}),
		"wrong issuer":               sign(jwt.RegisteredClaims{Issuer: "999", IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute))}),
		"installation token on /app": srv.InstallationToken("acme"),
	} {
		_, _, err := srv.ClientWithToken(tok).Apps.Get(ctx, "")
		assert.Equal(t, http.StatusUnauthorized, errStatus(t, err), name)
	}
	good := sign(jwt.RegisteredClaims{Issuer: "1", IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute))})
	app, _, err := srv.ClientWithToken(good).Apps.Get(ctx, "")
	require.NoError(t, err)
	assert.Equal(t, "fleetbot", app.GetSlug())

	_, _, err = srv.ClientWithToken("nope").Repositories.Get(ctx, "acme", "r")
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er)
	assert.Equal(t, "Bad credentials", er.Message)
}

func TestInstallationTokenExpires(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateRepo("acme", "r", nil)
	c := srv.ClientWithToken(srv.InstallationToken("acme"))
	_, _, err := c.Repositories.Get(context.Background(), "acme", "r")
	require.NoError(t, err)
	srv.AdvanceClock(61 * time.Minute)
	_, _, err = c.Repositories.Get(context.Background(), "acme", "r")
	assert.Equal(t, http.StatusUnauthorized, errStatus(t, err))
}

func mustPEM(t *testing.T, data []byte) []byte {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal(errors.New("no PEM block"))
	}
	return block.Bytes
}
