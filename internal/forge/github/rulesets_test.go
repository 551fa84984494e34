package github_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// withBranchRules declares rules in the env's control repo and renders its targets again.
func withBranchRules(t *testing.T, e *env, rules *control.BranchRules) {
	t.Helper()
	e.repo.Platform.Spec.Access.BranchRules = rules
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(e.repo)
	require.NoError(t, err)
	e.targets = targets
}

// repoRulesets lists a repo's own rulesets, as GitHub shows them.
func repoRulesets(t *testing.T, srv *githubtest.Server, repo string) []*gh.Ruleset {
	t.Helper()
	rs, _, err := srv.Client().Repositories.GetAllRulesets(context.Background(), "acme", repo, false)
	require.NoError(t, err)
	return rs
}

// openPR is the number of fleetbot's open pull request on repo.
func openPR(t *testing.T, srv *githubtest.Server, repo string) int {
	t.Helper()
	for _, p := range srv.Pulls("acme", repo) {
		if p.GetState() == "open" {
			return p.GetNumber()
		}
	}
	t.Fatalf("%s: no open pull request", repo)
	return 0
}

// TestBranchRulesAsRepoRulesets: declared branch rules become one ruleset per repo ("fleetbot",
// on the default branch, no classic protection), which GitHub enforces on merges like a
// protection (405 for an org owner too, unless a bypass actor); a ruleset weakened by hand is
// drift that plan shows and apply repairs.
func TestBranchRulesAsRepoRulesets(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	two := 2
	withBranchRules(t, e, &control.BranchRules{RequiredApprovals: &two,
		RequiredChecks: []control.RequiredCheckSpec{{Context: "ci/test"}}})
	rep := e.apply(t, e.forge(t, false))
	require.Empty(t, rep.Failed())
	repo := e.targets[0].Repo
	for _, tg := range e.targets {
		rs := repoRulesets(t, e.srv, tg.Repo)
		require.Len(t, rs, 1, tg.Repo)
		assert.Equal(t, "fleetbot", rs[0].Name)
		assert.False(t, e.srv.Protected("acme", tg.Repo, "main"), "%s: the ruleset enforces the rules, not a classic protection", tg.Repo)
	}

	// Enforced on merge: the org owner is no bypass actor of a ruleset.
	_, resp, err := e.srv.Client().PullRequests.Merge(context.Background(), "acme", repo, openPR(t, e.srv, repo), "", nil)
	require.Error(t, err)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Contains(t, err.Error(), "At least 2 approving reviews are required")

	// Drift: someone lowers the approvals and lets every admin bypass.
	rs := repoRulesets(t, e.srv, repo)[0]
	full, _, err := e.srv.Client().Repositories.GetRuleset(context.Background(), "acme", repo, rs.GetID(), false)
	require.NoError(t, err)
	for _, r := range full.Rules {
		if r.Type == "pull_request" {
			raw := json.RawMessage(strings.Replace(string(*r.Parameters), `"required_approving_review_count":2`, `"required_approving_review_count":0`, 1))
			r.Parameters = &raw
		}
	}
	full.BypassActors = []*gh.BypassActor{{ActorID: gh.Int64(5), ActorType: gh.String("RepositoryRole"), BypassMode: gh.String("always")}}
	_, _, err = e.srv.Client().Repositories.UpdateRuleset(context.Background(), "acme", repo, rs.GetID(), full)
	require.NoError(t, err)

	plan, err := reconcile.Plan(context.Background(), e.forge(t, true), e.repo, e.targets, reconcile.Options{Only: []string{repo}})
	require.NoError(t, err)
	var steps []string
	for _, r := range plan.Results {
		if r.Repo == "acme/"+repo && r.Access != nil {
			steps = r.Access.Steps
		}
	}
	assert.Contains(t, steps, "ruleset: 0 approval(s) required, want at least 2")
	assert.Contains(t, steps, "ruleset: repository role admin may bypass the rules, and the control repo does not say so")

	again := e.apply(t, e.forge(t, false))
	require.Empty(t, again.Failed())
	_, resp, err = e.srv.Client().PullRequests.Merge(context.Background(), "acme", repo, openPR(t, e.srv, repo), "", nil)
	require.Error(t, err, "repaired: the admin bypass is gone")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	assert.Len(t, repoRulesets(t, e.srv, repo), 1, "updated in place, not a second ruleset")
}

// TestBranchRulesBypassActor: a declared bypass actor (repository role admin) merges past the
// ruleset.
func TestBranchRulesBypassActor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	withBranchRules(t, e, &control.BranchRules{Bypass: []control.BypassSpec{{Role: "admin"}}})
	require.Empty(t, e.apply(t, e.forge(t, false)).Failed())
	repo := e.targets[0].Repo
	_, _, err := e.srv.Client().PullRequests.Merge(context.Background(), "acme", repo, openPR(t, e.srv, repo), "", nil)
	require.NoError(t, err, "an admin bypasses")
}

// TestBranchRulesWithoutRulesetsFallBackToProtection: a GitHub Enterprise Server without
// rulesets (404) gets the declared rules as classic branch protection; the 404 is met once per
// run, not once per repo.
func TestBranchRulesWithoutRulesetsFallBackToProtection(t *testing.T) {
	t.Parallel()
	e := newEnv(t, githubtest.WithoutRulesets())
	withBranchRules(t, e, &control.BranchRules{})
	rep := e.apply(t, e.forge(t, false))
	require.Empty(t, rep.Failed())
	for _, tg := range e.targets {
		assert.True(t, e.srv.Protected("acme", tg.Repo, "main"), tg.Repo)
	}
	n := 0
	for _, r := range e.srv.Requests() {
		if strings.Contains(r.Route, "/rulesets") {
			n++
		}
	}
	assert.Equal(t, 1, n, "one ruleset request found them missing for the whole run")
	again := e.apply(t, e.forge(t, false))
	for _, r := range again.Results {
		if r.Access != nil {
			assert.Empty(t, r.Access.Steps, "%s: converged", r.Repo)
		}
	}
}

// TestBranchRulesOnFreePrivateReposOncePerRun: GitHub Free refuses rulesets and protection on
// private repos with its documented 403: fleetbot meets it once per run, warns on every repo,
// and converges the rest.
func TestBranchRulesOnFreePrivateReposOncePerRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.srv.SetOrgPlan("acme", githubtest.PlanFree)
	withBranchRules(t, e, &control.BranchRules{})
	rep := e.apply(t, e.forge(t, false))
	require.Empty(t, rep.Failed())
	refused := map[string]bool{}
	for _, r := range e.srv.Requests() {
		if r.Status == http.StatusForbidden {
			refused[r.Path] = true
		}
	}
	assert.Len(t, refused, 1, "the plan's refusal, met on one repo for the whole run (the client's retries aside): %v", refused)
	for _, r := range rep.Results {
		assert.NotEmpty(t, r.Warnings, "%s: warned", r.Repo)
	}
}

// TestBranchRulesAsOrganizationRuleset: with organization: true (and the App's organization
// permissions), the repos get their custom properties at creation and one org ruleset targets
// them, written once for the whole fleet; without those permissions the run fails saying which.
func TestBranchRulesAsOrganizationRuleset(t *testing.T) {
	t.Parallel()
	m, err := githubtest.LoadAppManifest(filepath.Join("..", "..", "..", "app.yml"))
	require.NoError(t, err)
	perms := map[string]string{"organization_administration": "write", "organization_custom_properties": "admin", "custom_properties": "write"}
	for k, v := range m.Permissions {
		if _, ok := perms[k]; !ok {
			perms[k] = v
		}
	}
	e := newEnv(t, githubtest.WithAppPermissions(perms))
	e.srv.SetOrgBasePermission("acme", "read")
	withBranchRules(t, e, &control.BranchRules{Organization: true, Bypass: []control.BypassSpec{{Team: "platform"}}})
	rep := e.apply(t, e.forge(t, false))
	require.Empty(t, rep.Failed())
	writes := 0
	for _, r := range e.srv.Requests() {
		if r.Route == "POST /orgs/{org}/rulesets" || r.Route == "PUT /orgs/{org}/rulesets/{ruleset_id}" {
			writes++
		}
	}
	assert.Equal(t, 1, writes, "one org ruleset for the fleet")
	for _, tg := range e.targets {
		assert.Empty(t, repoRulesets(t, e.srv, tg.Repo), "%s: no ruleset of its own", tg.Repo)
		vals, _, err := e.srv.Client().Repositories.GetAllCustomPropertyValues(context.Background(), "acme", tg.Repo)
		require.NoError(t, err)
		got := map[string]string{}
		for _, v := range vals {
			got[v.PropertyName] = v.GetValue()
		}
		assert.Equal(t, string(tg.Kind), got["fleetbot-kind"], tg.Repo)
		assert.Equal(t, tg.Name, got["fleetbot-"+string(tg.Kind)], tg.Repo)
	}
	repo := e.targets[0].Repo
	_, resp, err := e.srv.Client().PullRequests.Merge(context.Background(), "acme", repo, openPR(t, e.srv, repo), "", nil)
	require.Error(t, err, "the org ruleset is enforced")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)

	again := e.apply(t, e.forge(t, false))
	for _, r := range again.Results {
		if r.Access != nil {
			assert.Empty(t, r.Access.Steps, "%s: converged", r.Repo)
		}
	}

	t.Run("without the organization permissions", func(t *testing.T) {
		e := newEnv(t, githubtest.WithAppPermissions(m.Permissions))
		withBranchRules(t, e, &control.BranchRules{Organization: true})
		rep, err := reconcile.Apply(context.Background(), e.forge(t, false), e.repo, e.targets, reconcile.Options{})
		require.Error(t, err)
		require.NotEmpty(t, rep.Failed())
		assert.Contains(t, rep.Failed()[0].Err.Error(), "spec.access.branchRules.organization")
	})
}
