package app

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
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

func TestOpenForgeRefusesBadSpecs(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"local:":            "--forge local:PATH needs a PATH",
		"gitlab":            `--forge "gitlab": want "local:PATH" or "github"`,
		"":                  `--forge "": want "local:PATH" or "github"`,
		"local:/dev/null/x": "local forge",
	} {
		_, _, err := Config{Forge: spec}.OpenForge(context.Background(), "acme", true)
		require.Error(t, err, spec)
		assert.Contains(t, err.Error(), want, spec)
	}
}

func TestGitHubForgeNeedsCredentials(t *testing.T) {
	t.Parallel()
	_, _, err := Config{Forge: ForgeGitHub, GitHub: ghforge.Config{APIURL: "http://127.0.0.1:1/api/v3/"}}.OpenForge(context.Background(), "acme", true)
	require.Error(t, err, "no token, no App")
	assert.Contains(t, err.Error(), "no credentials")
}

func TestClientConfigIsPerOwnerAndMode(t *testing.T) {
	t.Parallel()
	c := Config{GitHub: ghforge.Config{APIURL: "https://ghe.example.com/api/v3", Token: "t", Budget: ghforge.BudgetConfig{PerMinute: 7}}}
	cc := c.ClientConfig("acme", true)
	assert.Equal(t, "https://ghe.example.com/api/v3/", cc.APIURL)
	assert.Equal(t, "acme", cc.Owner)
	assert.True(t, cc.ReadOnly)
	assert.Equal(t, 7, cc.Budget.PerMinute, "every client gets the configured budget")
	assert.Empty(t, c.GitHub.Owner, "the configuration itself is not changed")
}

// exampleControl is the example control repo of the repository.
var exampleControl = filepath.Join("..", "..", "testdata", "control")

// Load renders the Git URL the configuration resolves: an Enterprise API URL gives the
// Enterprise host in Flux GitRepository objects, whichever front end loads.
func TestLoadRendersTheResolvedGitURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "url: https://github.com/acme/workspace-payments"},
		{Config{Forge: ForgeGitHub, GitHub: ghforge.Config{APIURL: "https://ghe.example.com/api/v3/"}}, "url: https://ghe.example.com/acme/workspace-payments"},
		{Config{Forge: "local:/tmp/forge"}, "url: http://" + DefaultGitServeListen + "/acme/workspace-payments"},
		{Config{GitURL: "http://mirror.example"}, "url: http://mirror.example/acme/workspace-payments"},
	} {
		f, err := tc.cfg.Load(context.Background(), exampleControl)
		require.NoError(t, err)
		var flux string
		for _, tg := range f.Targets {
			if tg.Repo == "cluster-prod-eu-1" {
				flux = string(tg.Files["flux/fleetbot.yaml"])
			}
		}
		assert.Contains(t, flux, tc.want, "%+v", tc.cfg)
	}
}

func TestLoadErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "nothing")
	_, err := Config{}.Load(context.Background(), missing)
	require.Error(t, err)
	assert.Contains(t, DescribeLoadError(missing, err).Error(), "hint: --control must name a control repo directory")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Config{}.Load(ctx, exampleControl)
	require.ErrorIs(t, err, context.Canceled)
}
