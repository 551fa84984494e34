package githubtest_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/githubtest/restspec"
)

// loadSpec loads GitHub's REST description for a test (its committed compact copy).
func loadSpec(t *testing.T) *restspec.Description {
	t.Helper()
	d, err := githubtest.RESTSpec()
	require.NoError(t, err)
	return d
}

// The conformance check names the operation and the field of a request GitHub's description
// refuses, and of a response it does not document the fake's way.
func TestRESTSpecNamesOperationAndField(t *testing.T) {
	t.Parallel()
	d := loadSpec(t)
	srv, violations := serverCollecting(t, d)
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "r", map[string]string{"README.md": "hi\n"})
	c := srv.ClientWithToken(githubtest.DefaultToken)
	ctx := context.Background()

	// A bad request: "visibility" takes public, private or internal.
	_, _, err := c.Repositories.Create(ctx, "acme", &github.Repository{Name: github.String("x"), Visibility: github.String("secret")})
	_ = err // the fake's answer does not matter here, the check does
	// A path GitHub does not have.
	req, err := c.NewRequest("GET", "repos/acme/r/no-such-thing", nil)
	require.NoError(t, err)
	_, err = c.Do(ctx, req, nil)
	require.Error(t, err)

	var lines []string
	for _, v := range violations() {
		if !v.Missing {
			lines = append(lines, v.String())
		}
	}
	all := strings.Join(lines, "\n")
	assert.Contains(t, all, "POST /orgs/acme/repos (repos/create-in-org, /orgs/{org}/repos): request: field visibility: value is not one of the allowed values")
	assert.Contains(t, all, "GET /repos/acme/r/no-such-thing: request: GitHub's REST API has no such operation")
}

// The matcher finds the operation of a path whose last parameter holds slashes.
func TestRESTSpecMatchesSlashedRef(t *testing.T) {
	t.Parallel()
	d := loadSpec(t)
	rt, params, ok := d.Match("GET", "/repos/acme/r/git/ref/heads/feature/a")
	require.True(t, ok)
	assert.Equal(t, "/repos/{owner}/{repo}/git/ref/{ref}", rt.Path)
	assert.Equal(t, "heads/feature/a", params["ref"])
	rt, _, ok = d.Match("GET", "/repos/acme/r")
	require.True(t, ok)
	assert.Equal(t, "repos/get", rt.Operation.OperationID)
}

// A client that goes away in the middle of its request body (a serve stopped mid-apply) sent
// no request GitHub's description can judge: the conformance check stays quiet about the cut
// body, which a stopped client never meant to send.
func TestRESTSpecIgnoresABodyCutByTheClient(t *testing.T) {
	t.Parallel()
	d := loadSpec(t)
	srv, violations := serverCollecting(t, d)
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "r", map[string]string{"README.md": "hi\n"})

	u, err := url.Parse(srv.APIURL())
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	body := `{"title":"t","head":"fleetbot/sync","base":"main"}`
	_, err = fmt.Fprintf(conn, "POST %srepos/acme/r/pulls HTTP/1.1\r\nHost: %s\r\nAuthorization: token %s\r\n"+
		"User-Agent: test\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		u.Path, u.Host, githubtest.DefaultToken, len(body), body[:20])
	require.NoError(t, err)
	require.NoError(t, conn.Close()) // gone, 20 bytes into a body of more
	srv.Close()                      // waits for the handler

	for _, v := range violations() {
		assert.NotContains(t, v.String(), "unexpected EOF", "a cut body is not a conformance finding")
	}
}

// serverCollecting is a fake GitHub whose conformance findings are collected, not failed:
// violations returns those so far.
func serverCollecting(t *testing.T, d *restspec.Description) (srv *githubtest.Server, violations func() []restspec.Violation) {
	t.Helper()
	var mu sync.Mutex
	var got []restspec.Violation
	srv = githubtest.NewServer(t, githubtest.WithRESTSpec(d, func(v restspec.Violation) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, v)
	}))
	return srv, func() []restspec.Violation {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}
