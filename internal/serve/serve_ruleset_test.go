package serve_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// withBranchRules declares branch rules as code in the example control repo: one ruleset
// named fleetbot per target repo.
func withBranchRules(files map[string]string) {
	files["platform.yaml"] += "  access:\n    branchRules:\n      requiredApprovals: 1\n"
}

// fleetbotRuleset returns the id and enforcement of the repo's own ruleset named fleetbot (0
// when there is none).
func fleetbotRuleset(t *testing.T, c *github.Client, repo string) (int64, string) {
	t.Helper()
	list, _, err := c.Repositories.GetAllRulesets(context.Background(), "acme", repo, false)
	require.NoError(t, err)
	for _, rs := range list {
		if rs.Name == "fleetbot" {
			return rs.GetID(), rs.Enforcement
		}
	}
	return 0, ""
}

// TestServeRestoresARulesetDeletedByHand: fleetbot's ruleset on a target repo deleted by hand
// through GitHub's API is restored by serve as soon as GitHub's repository_ruleset delivery
// arrives (one drift job of that repo, no resync: the resync interval is an hour), as a branch
// protection removed by hand is; fleetbot's own re-creation, delivered too, is ignored.
func TestServeRestoresARulesetDeletedByHand(t *testing.T) {
	t.Parallel()
	var drifts atomic.Int64
	e := startServe(t, serveOptions{webhooks: true, editControl: withBranchRules, beforeJob: func(j webhook.Job) {
		if j.Kind == webhook.KindDrift {
			drifts.Add(1)
		}
	}})
	e.waitMetric(appliedOK, 1)
	e.gh.WaitWebhooks()
	e.idle()
	human := e.gh.Client()
	id, enforcement := fleetbotRuleset(t, human, "cluster-edge-1")
	require.NotZero(t, id, "the first apply creates the ruleset fleetbot")
	require.Equal(t, "active", enforcement)
	before, applied := drifts.Load(), e.metric(appliedOK)
	queued := e.metric(`fleetbot_webhook_deliveries_total{event="repository_ruleset",outcome="queued"}`)

	_, err := human.Repositories.DeleteRuleset(context.Background(), "acme", "cluster-edge-1", id)
	require.NoError(t, err)
	e.gh.WaitWebhooks() // GitHub's delivery of repository_ruleset.deleted, answered
	assert.Equal(t, queued+1, e.metric(`fleetbot_webhook_deliveries_total{event="repository_ruleset",outcome="queued"}`))
	e.waitMetric(`fleetbot_job_duration_seconds_count{kind="drift",outcome="ok"}`, 1)
	e.gh.WaitWebhooks() // the delivery of fleetbot's re-creation
	e.idle()

	restored, enforcement := fleetbotRuleset(t, human, "cluster-edge-1")
	assert.NotZero(t, restored, "the ruleset is back")
	assert.Equal(t, "active", enforcement)
	assert.Equal(t, int64(1), drifts.Load()-before, "one drift job, of the repo whose ruleset was deleted")
	assert.Equal(t, applied, e.metric(appliedOK), "no apply, no resync: the drift job alone")
	assert.GreaterOrEqual(t, e.metric(`fleetbot_webhook_deliveries_total{event="repository_ruleset",outcome="ignored"}`), float64(1),
		"fleetbot's own re-creation is ignored")
}

// TestServeRefusesBadRulesetDeliveries: a repository_ruleset payload GitHub would not send is
// refused 400 naming what is wrong, and queues nothing.
func TestServeRefusesBadRulesetDeliveries(t *testing.T) {
	t.Parallel()
	e := startServe(t, serveOptions{})
	e.waitMetric(appliedOK, 1)
	e.idle()
	for name, body := range map[string]string{
		"no ruleset":     `{"action":"deleted","repository":{"full_name":"acme/cluster-edge-1"},"sender":{"login":"octocat"}}`,
		"path traversal": `{"action":"deleted","repository_ruleset":{"id":1,"name":"fleetbot","source":"acme/x","enforcement":"active"},"repository":{"full_name":"acme/../control"},"sender":{"login":"octocat"}}`,
		"not JSON":       `{"action":`,
	} {
		assert.Equal(t, http.StatusBadRequest, e.deliver("repository_ruleset", "bad-"+name, []byte(body), serveSecret), name)
	}
	assert.Equal(t, float64(3), e.metric(`fleetbot_webhook_deliveries_total{event="repository_ruleset",outcome="bad_request"}`))
	assert.Zero(t, e.metric(`fleetbot_job_duration_seconds_count{kind="drift",outcome="ok"}`), "nothing queued")
}

// TestServeRestoresTheOrgRulesetDeletedByHand: with branchRules.organization (and the App's
// organization permissions), fleetbot's one org ruleset deleted by hand is restored when its
// repository_ruleset delivery (which names no repository) arrives: one apply of the fleet, no
// drift job per repo, no resync.
func TestServeRestoresTheOrgRulesetDeletedByHand(t *testing.T) {
	t.Parallel()
	m, err := githubtest.LoadAppManifest(filepath.Join("..", "..", "app.yml"))
	require.NoError(t, err)
	perms := map[string]string{"organization_administration": "write", "organization_custom_properties": "admin", "custom_properties": "write"}
	for k, v := range m.Permissions {
		perms[k] = v
	}
	m.Permissions = perms
	var drifts atomic.Int64
	e := startServe(t, serveOptions{webhooks: true, ghOptions: []githubtest.Option{githubtest.WithAppManifest(m)},
		editControl: func(files map[string]string) {
			files["platform.yaml"] += "  access:\n    branchRules:\n      organization: true\n"
		},
		beforeJob: func(j webhook.Job) {
			if j.Kind == webhook.KindDrift {
				drifts.Add(1)
			}
		}})
	e.waitMetric(appliedOK, 1)
	e.gh.WaitWebhooks()
	e.idle()
	human := e.gh.Client()
	orgRuleset := func() int64 {
		list, _, err := human.Organizations.GetAllOrganizationRulesets(context.Background(), "acme")
		require.NoError(t, err)
		for _, rs := range list {
			if rs.Name == "fleetbot" {
				return rs.GetID()
			}
		}
		return 0
	}
	id := orgRuleset()
	require.NotZero(t, id, "the first apply creates the org ruleset fleetbot")
	before, applied := drifts.Load(), e.metric(appliedOK)

	_, err = human.Organizations.DeleteOrganizationRuleset(context.Background(), "acme", id)
	require.NoError(t, err)
	e.gh.WaitWebhooks()
	e.waitMetric(appliedOK, applied+1)
	e.gh.WaitWebhooks()
	e.idle()
	assert.NotZero(t, orgRuleset(), "the org ruleset is back")
	assert.Equal(t, applied+1, e.metric(appliedOK), "one apply")
	assert.Equal(t, before, drifts.Load(), "no drift job")
}
