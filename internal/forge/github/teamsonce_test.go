package github_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// TestFirstRolloutReadsTeamsOnce: a first rollout reads the org's teams once (the run's listing)
// and never each new repo's teams again: before, every new repo read every team it grants
// (GET /orgs/{org}/teams/{team_slug}), 2,623 reads for 901 repos.
func TestFirstRolloutReadsTeamsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rep := e.apply(t, e.forge(t, false))
	require.Empty(t, rep.Failed())
	assert.Equal(t, 1, routeCount(e.srv, "GET /orgs/{org}/teams"), "the org's teams, once per run")
	assert.Zero(t, routeCount(e.srv, "GET /orgs/{org}/teams/{team_slug}"), "no team read per new repo")
	for _, tg := range e.targets {
		for slug, role := range tg.Access.Teams {
			assert.Equal(t, string(role), e.srv.TeamPermissions("acme", tg.Repo)[slug], "%s: team %s", tg.Repo, slug)
		}
	}
}

// TestNewRepoWithTeamMissingFromTheRunsListing: a team the run's listing lacks stops the new
// repo before anything is created, with no read of the team.
func TestNewRepoWithTeamMissingFromTheRunsListing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	f := e.forge(t, false)
	_, err := f.Org(context.Background(), "acme")
	require.NoError(t, err)
	tg := e.targets[0]
	tg.Access.Teams["ghost-team"] = policy.RolePush
	err = f.CreateRepo(context.Background(), pr.RepoSpec{Owner: "acme", Repo: tg.Repo, Kind: tg.Kind, Name: tg.Name,
		DefaultBranch: "main", Access: tg.Access})
	require.ErrorIs(t, err, ghforge.ErrTeamMissing)
	assert.Contains(t, err.Error(), "ghost-team")
	assert.Contains(t, err.Error(), "create the team in acme or fix the control repo")
	assert.Nil(t, e.srv.Repo("acme", tg.Repo), "nothing created")
	assert.Zero(t, routeCount(e.srv, "GET /orgs/{org}/teams/{team_slug}"))
}

// TestBaseRoleCoversReadGrants: in an org whose base permission is read, a team whose role is
// read (workspace admins on the cluster repos of their workspace) gets no grant of its own,
// neither at creation nor as drift; push and admin teams (code owners: GitHub wants the team
// itself to have write access) are granted as before. The base permission is read only when
// organization administration is opted in (spec.access.branchRules.organization); otherwise
// every team is granted.
func TestBaseRoleCoversReadGrants(t *testing.T) {
	t.Parallel()
	perms, err := githubtest.LoadAppManifest(filepath.Join("..", "..", "..", "app.yml"))
	require.NoError(t, err)
	withOrgAdmin := map[string]string{"organization_administration": "write", "organization_custom_properties": "admin", "custom_properties": "write"}
	for k, v := range perms.Permissions {
		withOrgAdmin[k] = v
	}
	for _, tc := range []struct {
		name      string
		perms     map[string]string
		rules     *control.BranchRules
		wantPulls bool
	}{
		{"organization administration opted in", withOrgAdmin, &control.BranchRules{Organization: true}, false},
		{"App without it (app.yml)", perms.Permissions, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, githubtest.WithAppPermissions(tc.perms))
			e.srv.SetOrgBasePermission("acme", "read")
			if tc.rules != nil {
				withBranchRules(t, e, tc.rules)
			}
			rep := e.apply(t, e.forge(t, false))
			require.Empty(t, rep.Failed())
			pulls := 0
			for _, tg := range e.targets {
				got := e.srv.TeamPermissions("acme", tg.Repo)
				for slug, role := range tg.Access.Teams {
					if role == policy.RolePull {
						pulls++
						assert.Equal(t, tc.wantPulls, got[slug] != "", "%s: team %s (pull)", tg.Repo, slug)
						continue
					}
					assert.Equal(t, string(role), got[slug], "%s: team %s", tg.Repo, slug)
				}
			}
			require.NotZero(t, pulls, "the example fleet has read-only teams")
			again := e.apply(t, e.forge(t, false))
			for _, r := range again.Results {
				if r.Access != nil {
					assert.Empty(t, r.Access.Steps, "%s: no drift", r.Repo)
				}
			}
		})
	}
}
