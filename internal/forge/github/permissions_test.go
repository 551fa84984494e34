package github_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// The fake enforces the App manifest's permissions: with app.yml as it is, fleetbot's first
// apply succeeds; without any one of the permissions apply needs, it fails with GitHub's
// "Resource not accessible by integration" — so app.yml cannot lose a permission fleetbot
// needs without a test failing, and every one it asks for is used.
func TestAppManifestPermissions(t *testing.T) {
	t.Parallel()
	manifest, err := githubtest.LoadAppPermissions(filepath.Join("..", "..", "..", "app.yml"))
	require.NoError(t, err)

	t.Run("app.yml", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, githubtest.WithAppPermissions(manifest))
		rep := e.apply(t, e.forge(t, false))
		for _, r := range rep.Results {
			assert.NoError(t, r.Err, r.Repo)
		}
	})
	for _, perm := range []string{"metadata", "contents", "pull_requests", "administration", "members"} {
		t.Run("without "+perm, func(t *testing.T) {
			t.Parallel()
			perms := map[string]string{}
			for k, v := range manifest {
				if k != perm {
					perms[k] = v
				}
			}
			require.Len(t, perms, len(manifest)-1, "app.yml grants %s", perm)
			e := newEnv(t, githubtest.WithAppPermissions(perms))
			var msgs []string
			c, err := e.newClient()
			if err == nil {
				rep, aerr := reconcile.Apply(context.Background(), c, e.repo, e.targets, reconcile.Options{Source: "c0ffee"})
				if aerr != nil {
					msgs = append(msgs, aerr.Error())
				}
				if rep != nil {
					if rep.Refused != nil {
						msgs = append(msgs, rep.Refused.Error())
					}
					for _, r := range rep.Results {
						if r.Err != nil {
							msgs = append(msgs, r.Err.Error())
						}
					}
				}
			} else {
				msgs = append(msgs, err.Error())
			}
			assert.Contains(t, strings.Join(msgs, "\n"), "Resource not accessible by integration",
				"apply without %s must fail on GitHub's 403", perm)
		})
	}
}
