package github_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// On GitHub Free an organization's private repositories cannot be protected: every
// branch-protection call answers 403 "Upgrade to GitHub Pro or make this repository public".
// fleetbot applies everything else, says once per repo what is not enforced and what to do,
// does not fail the repo, and does not try again on the next run.
func TestFreePlanProtectionUnavailable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.srv.SetOrgPlan("acme", githubtest.PlanFree)

	check := func(run string) {
		t.Helper()
		rep := e.apply(t, e.forge(t, false))
		require.NotEmpty(t, rep.Results)
		for _, r := range rep.Results {
			name := strings.TrimPrefix(r.Repo, "acme/")
			assert.NoError(t, r.Err, "%s: %s is not failed", run, r.Repo)
			require.Len(t, r.Warnings, 1, "%s: %s: one warning", run, r.Repo)
			w := r.Warnings[0]
			for _, want := range []string{"not enforced", "code-owner review", "make the repository public", "paid GitHub plan",
				"Upgrade to GitHub Pro"} {
				assert.Contains(t, w, want, "%s: %s", run, r.Repo)
			}
			assert.Contains(t, r.Line(), "WARNING: ", run)
			assert.True(t, strings.HasPrefix(r.Line(), r.Repo+": "), "%s: the line names the repo", run)
			assert.NotEmpty(t, e.srv.TeamPermissions("acme", name), "%s: %s: the teams are granted all the same", run, r.Repo)
			assert.False(t, e.srv.Protected("acme", name, "main"), run)
		}
	}
	check("new repos")
	// Every repo has the same warning: the text report says it once, naming the repos.
	var text strings.Builder
	require.NoError(t, e.apply(t, e.forge(t, false)).WriteText(&text))
	assert.Equal(t, 1, strings.Count(text.String(), "is not enforced"), text.String())
	e.srv.ResetLog()
	check("next run")
	for _, r := range e.srv.Requests() {
		assert.NotEqual(t, "PUT /repos/{owner}/{repo}/branches/{branch}/protection", r.Route,
			"a known-unavailable protection is not asked for again")
	}
}
