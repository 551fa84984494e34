package app

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWebRoot(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "", WebRoot(""))
	assert.Equal(t, "", WebRoot("https://api.github.com/"))
	assert.Equal(t, "https://ghe.example.com", WebRoot("https://ghe.example.com/api/v3/"))
	assert.Equal(t, "http://127.0.0.1:8787", WebRoot("http://127.0.0.1:8787/api/v3/"))
}

// The Git URL rendered into Flux objects is decided in one place for every front end.
func TestResolveGitURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ explicit, forge, api, want string }{
		{"", "", "", "https://github.com"},
		{"", "github", "", "https://github.com"},
		{"", "github", "https://api.github.com/", "https://github.com"},
		{"", "github", "https://ghe.example.com/api/v3/", "https://ghe.example.com"},
		{"", "", "https://ghe.example.com/api/v3/", "https://ghe.example.com"},
		{"", "local:/tmp/forge", "https://ghe.example.com/api/v3/", "http://" + DefaultGitServeListen},
		{"http://mirror", "github", "https://ghe.example.com/api/v3/", "http://mirror"},
	} {
		assert.Equal(t, tc.want, ResolveGitURL(tc.explicit, tc.forge, tc.api), "%+v", tc)
	}
}

func TestAPIURLEndsInSlash(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "", APIURL(""))
	assert.Equal(t, "https://ghe.example.com/api/v3/", APIURL("https://ghe.example.com/api/v3"))
	assert.Equal(t, "https://ghe.example.com/api/v3/", APIURL("https://ghe.example.com/api/v3/"))
}
