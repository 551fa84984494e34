package githubtest_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// rawDo sends a JSON request as c and returns the status (and the error GitHub answered).
func rawDo(t *testing.T, c *github.Client, method, path string, body any) (int, error) {
	t.Helper()
	req, err := c.NewRequest(method, path, body)
	require.NoError(t, err)
	resp, err := c.Do(context.Background(), req, nil)
	if resp == nil {
		require.NoError(t, err)
	}
	return resp.StatusCode, err
}

// approvalRuleset is a branch ruleset on the default branch requiring one approval.
func approvalRuleset(bypass []map[string]any, conditions map[string]any) map[string]any {
	if conditions == nil {
		conditions = map[string]any{}
	}
	conditions["ref_name"] = map[string]any{"include": []string{"~DEFAULT_BRANCH"}, "exclude": []string{}}
	if bypass == nil {
		bypass = []map[string]any{}
	}
	return map[string]any{"name": "fleetbot", "target": "branch", "enforcement": "active", "bypass_actors": bypass,
		"conditions": conditions,
		"rules": []map[string]any{{"type": "pull_request", "parameters": map[string]any{
			"required_approving_review_count": 1, "dismiss_stale_reviews_on_push": true, "require_code_owner_review": false,
			"require_last_push_approval": false, "required_review_thread_resolution": false}}}}
}

// TestRulesetEnforcedOnMerge: an active repository ruleset targeting the base branch blocks a
// merge like a branch protection (405), an organization owner included, unless a bypass actor;
// an approval of a writer satisfies it.
// https://docs.github.com/rest/repos/rules#create-a-repository-ruleset
// https://docs.github.com/repositories/configuring-branches-and-merges-in-your-repository/managing-rulesets/about-rulesets#about-rule-layering
func TestRulesetEnforcedOnMerge(t *testing.T) {
	t.Parallel()
	e := newMergeEnv(t, nil)
	status, err := rawDo(t, e.admin, http.MethodPost, "repos/acme/r/rulesets", approvalRuleset(nil, nil))
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, status)
	assert.Equal(t, "blocked", e.state(t))
	er := apiError(t, e.merge(e.admin, "merge"), http.StatusMethodNotAllowed)
	assert.Equal(t, "At least 1 approving review is required by reviewers with write access.", er.Message, "an org owner is no bypass actor")
	e.review(t, e.bob, "APPROVE")
	require.NoError(t, e.merge(e.alice, "merge"))

	e = newMergeEnv(t, nil)
	_, err = rawDo(t, e.admin, http.MethodPost, "repos/acme/r/rulesets",
		approvalRuleset([]map[string]any{{"actor_id": 5, "actor_type": "RepositoryRole", "bypass_mode": "always"}}, nil))
	require.NoError(t, err)
	apiError(t, e.merge(e.alice, "merge"), http.StatusMethodNotAllowed)
	require.NoError(t, e.merge(e.admin, "merge"), "repository role admin may bypass")
}

// TestOrgRulesetTargetsCustomProperties: an organization ruleset applies to the repos whose
// custom properties match its repository_property condition; values must be defined by the
// org first, and a single_select value must be one of its allowed values.
// https://docs.github.com/rest/orgs/rules#create-an-organization-repository-ruleset
// https://docs.github.com/rest/repos/custom-properties#create-or-update-custom-property-values-for-a-repository
func TestOrgRulesetTargetsCustomProperties(t *testing.T) {
	t.Parallel()
	e := newMergeEnv(t, nil)
	set := func(v any) (int, error) {
		return rawDo(t, e.admin, http.MethodPatch, "repos/acme/r/properties/values",
			map[string]any{"properties": []map[string]any{{"property_name": "fleetbot-kind", "value": v}}})
	}
	status, err := set("cluster")
	require.Error(t, err, "not defined by the org")
	assert.Equal(t, http.StatusUnprocessableEntity, status)
	_, err = rawDo(t, e.admin, http.MethodPatch, "orgs/acme/properties/schema", map[string]any{"properties": []map[string]any{
		{"property_name": "fleetbot-kind", "value_type": "single_select", "allowed_values": []string{"cluster", "workspace"}}}})
	require.NoError(t, err)
	status, err = set("galaxy")
	require.Error(t, err, "not an allowed value")
	assert.Equal(t, http.StatusUnprocessableEntity, status)

	_, err = rawDo(t, e.admin, http.MethodPost, "orgs/acme/rulesets", approvalRuleset(nil, map[string]any{
		"repository_property": map[string]any{"include": []map[string]any{{"name": "fleetbot-kind", "property_values": []string{"cluster"}}}, "exclude": []map[string]any{}}}))
	require.NoError(t, err)
	assert.Equal(t, "clean", e.state(t), "the repo lacks the property: not targeted")
	_, err = set("cluster")
	require.NoError(t, err)
	assert.Equal(t, "blocked", e.state(t), "targeted by its property")
	apiError(t, e.merge(e.admin, "merge"), http.StatusMethodNotAllowed)
}

// TestRulesetsUnavailable: GitHub Free refuses rulesets on a private repository with its
// documented 403; a GitHub Enterprise Server without rulesets answers 404.
// https://docs.github.com/get-started/learning-about-github/githubs-plans
func TestRulesetsUnavailable(t *testing.T) {
	t.Parallel()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "r", map[string]string{"README.md": "x\n"})
	_, _, err := srv.Client().Repositories.Edit(context.Background(), "acme", "r", &github.Repository{Private: github.Bool(true)})
	require.NoError(t, err)
	srv.SetOrgPlan("acme", githubtest.PlanFree)
	status, err := rawDo(t, srv.Client(), http.MethodGet, "repos/acme/r/rulesets", nil)
	require.Error(t, err)
	assert.Equal(t, http.StatusForbidden, status)
	assert.Contains(t, err.Error(), "Upgrade to GitHub Pro or make this repository public to enable this feature.")

	old := githubtest.NewServer(t, githubtest.WithoutRulesets())
	old.CreateOrg("acme")
	old.CreateRepo("acme", "r", map[string]string{"README.md": "x\n"})
	status, err = rawDo(t, old.Client(), http.MethodGet, "repos/acme/r/rulesets", nil)
	require.Error(t, err)
	assert.Equal(t, http.StatusNotFound, status)
}
