package github

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGitURL: the push URL is the repo's web host, never the API host, and never carries
// credentials.
func TestGitURL(t *testing.T) {
	t.Parallel()
	for api, want := range map[string]string{
		"":                                  "https://github.com/acme/cluster-a.git",
		"https://api.github.com/":           "https://github.com/acme/cluster-a.git",
		"https://ghe.example.com/api/v3/":   "https://ghe.example.com/acme/cluster-a.git",
		"http://127.0.0.1:8080/api/v3":      "http://127.0.0.1:8080/acme/cluster-a.git",
		"https://ghe.example.com/x/api/v3/": "https://ghe.example.com/x/acme/cluster-a.git",
	} {
		c, err := newAPIClient(http.DefaultTransport, api, "")
		require.NoError(t, err)
		f := &Forge{api: c}
		assert.Equal(t, want, f.gitURL("acme", "cluster-a"), api)
	}
}

// TestLeaseRefusal: receive-pack's reasons for a ref that was not at its expected old value
// are told from other refusals (a protected branch, a hook), which fall back to the API.
func TestLeaseRefusal(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"failed to update ref", "failed to lock", "stale info", "fetch first", "reference already exists"} {
		assert.True(t, leaseRefusal(s), s)
	}
	for _, s := range []string{"protected branch hook declined", "pre-receive hook declined", "deny updating a hidden ref"} {
		assert.False(t, leaseRefusal(s), s)
	}
}

// TestGitAuthTransport: a git request's "token X" becomes basic auth x-access-token:X; an
// API request keeps its header.
func TestGitAuthTransport(t *testing.T) {
	t.Parallel()
	var got []string
	tr := gitAuthTransport{next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.Header.Get("Authorization"))
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})}
	for _, u := range []string{"https://github.com/acme/a.git/info/refs?service=git-receive-pack", "https://api.github.com/repos/acme/a"} {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "token s3cr3t")
		_, err = tr.RoundTrip(req)
		require.NoError(t, err)
		assert.Equal(t, "token s3cr3t", req.Header.Get("Authorization"), "the caller's request is not modified")
	}
	assert.Equal(t, []string{"Basic eC1hY2Nlc3MtdG9rZW46czNjcjN0", "token s3cr3t"}, got)
}
