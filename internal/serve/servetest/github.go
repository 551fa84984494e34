package servetest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// NewGitHub starts a fake GitHub (closed by t.Cleanup) with the org acme, the teams the control
// repo in controlDir names and acme/control holding its files, edited by edit when set; opts
// configure the fake further (githubtest.WithWebhook: it delivers its events). targets are the
// names of the target repos the control repo renders, which fleetbot creates.
func NewGitHub(t testing.TB, controlDir string, edit func(files map[string]string), opts ...githubtest.Option) (gh *githubtest.Server, targets []string) {
	t.Helper()
	gh = githubtest.NewServer(t, opts...)
	repo, err := control.LoadDir(controlDir)
	require.NoError(t, err)
	rendered, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
	require.NoError(t, err)
	gh.CreateOrg("acme")
	teams := map[string]bool{}
	for _, tg := range rendered {
		targets = append(targets, tg.Repo)
		for slug := range tg.Access.Teams {
			teams[slug] = true
		}
	}
	for slug := range teams {
		gh.CreateTeam("acme", slug)
	}
	files := map[string]string{}
	require.NoError(t, fs.WalkDir(os.DirFS(controlDir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(controlDir, p))
		files[p] = string(b)
		return err
	}))
	if edit != nil {
		edit(files)
	}
	gh.CreateRepo("acme", "control", files)
	return gh, targets
}
