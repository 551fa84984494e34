package github_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// TestAttackInterruptedBootstrap: a new repo's bootstrap interrupted at each step never
// leaves a default branch that a persona team can push to without CODEOWNERS and protection;
// the next run finishes it.
func TestAttackInterruptedBootstrap(t *testing.T) {
	t.Parallel()
	for _, step := range []string{
		"PUT /repos/{owner}/{repo}/contents/{path...}",           // the first commit
		"POST /repos/{owner}/{repo}/git/trees",                   // the bootstrap tree
		"PUT /repos/{owner}/{repo}/branches/{branch}/protection", // protection
		"PUT /orgs/{org}/teams/{team_slug}/repos/{owner}/{repo}", // team grants
	} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			f := e.forge(t, false)
			e.srv.Fault(step, githubtest.FaultSpec{Status: 500, Message: "interrupted here"})
			_, err := reconcile.Apply(context.Background(), f, e.repo, e.targets, reconcile.Options{})
			require.Error(t, err, "the run fails at %s", step)
			for _, tg := range e.targets {
				teams := e.srv.TeamPermissions("acme", tg.Repo)
				main := e.srv.Branch("acme", tg.Repo, "main")
				if main == "" {
					assert.Empty(t, teams, "%s: no team may reach a repo before its default branch exists", tg.Repo)
					continue
				}
				_, hasCodeowners := e.srv.File("acme", tg.Repo, "main", ".github/CODEOWNERS")
				assert.True(t, hasCodeowners, "%s: main exists, so it has CODEOWNERS", tg.Repo)
				if len(teams) > 0 {
					assert.True(t, e.srv.Protected("acme", tg.Repo, "main"), "%s: teams have access, so main is protected", tg.Repo)
				}
			}

			e.srv.ClearFaults()
			rep := e.apply(t, e.forge(t, false)) // a new process: nothing remembered
			assert.Empty(t, rep.Failed())
			for _, tg := range e.targets {
				_, hasCodeowners := e.srv.File("acme", tg.Repo, "main", ".github/CODEOWNERS")
				assert.True(t, hasCodeowners, tg.Repo)
				assert.True(t, e.srv.Protected("acme", tg.Repo, "main"), tg.Repo)
				for slug := range tg.Access.Teams {
					assert.NotEmpty(t, e.srv.TeamPermissions("acme", tg.Repo)[slug], "%s: team %s granted", tg.Repo, slug)
				}
			}
		})
	}
}
