package ingress

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// rulesetBody is a repository_ruleset payload: a repository's ruleset when repo is set, else
// the org's.
func rulesetBody(action, name, repo, sender string) string {
	where := `"organization":{"login":"acme"}`
	if repo != "" {
		where = `"repository":{"full_name":"` + repo + `"},` + where
	}
	return `{"action":"` + action + `","repository_ruleset":{"id":7,"name":"` + name + `","source":"acme","enforcement":"active"},` +
		where + `,"sender":{"login":"` + sender + `"}}`
}

// TestRulesetEventsQueueDrift: a repository's ruleset created, edited or deleted queues a drift
// of that repo that reads access afresh; fleetbot's org ruleset (or one renamed from it) queues
// one apply; other org rulesets, fleetbot's own changes, the control repo and undocumented
// actions queue nothing.
// https://docs.github.com/webhooks/webhook-events-and-payloads#repository_ruleset
func TestRulesetEventsQueueDrift(t *testing.T) {
	t.Parallel()
	renamed := `{"action":"edited","repository_ruleset":{"id":7,"name":"mine","source":"acme","enforcement":"active"},` +
		`"changes":{"name":{"from":"fleetbot"}},"organization":{"login":"acme"},"sender":{"login":"alice"}}`
	for _, tc := range []struct {
		name, body string
		want       *webhook.Job
	}{
		{"repo ruleset deleted", rulesetBody("deleted", "fleetbot", "acme/cluster-a", "alice"),
			&webhook.Job{Kind: webhook.KindDrift, Repo: "acme/cluster-a", Reason: "repository_ruleset.deleted", Access: true}},
		{"another ruleset of a repo edited", rulesetBody("edited", "ci", "acme/cluster-a", "alice"),
			&webhook.Job{Kind: webhook.KindDrift, Repo: "acme/cluster-a", Reason: "repository_ruleset.edited", Access: true}},
		{"fleetbot's org ruleset deleted", rulesetBody("deleted", "fleetbot", "", "alice"),
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: "repository_ruleset.deleted"}},
		{"fleetbot's org ruleset renamed", renamed,
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: "repository_ruleset.edited"}},
		{"another org ruleset", rulesetBody("created", "security", "", "alice"), nil},
		{"fleetbot's own write", rulesetBody("created", "fleetbot", "acme/cluster-a", "fleetbot[bot]"), nil},
		{"the control repo", rulesetBody("deleted", "fleetbot", "acme/control", "alice"), nil},
		{"an undocumented action", rulesetBody("archived", "fleetbot", "acme/cluster-a", "alice"), nil},
	} {
		q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
		d := newTestDispatcher(t, q, 1<<20)
		code, outcome := post{event: "repository_ruleset", delivery: "d", body: tc.body}.do(t, d)
		assert.Equal(t, http.StatusAccepted, code, tc.name)
		if tc.want == nil {
			assert.Equal(t, metrics.OutcomeIgnored, outcome, tc.name)
			assert.Zero(t, q.Len(), tc.name)
			continue
		}
		assert.Equal(t, metrics.OutcomeQueued, outcome, tc.name)
		require.Equal(t, 1, q.Len(), tc.name)
		j, err := q.Next(context.Background())
		require.NoError(t, err)
		assert.Equal(t, *tc.want, webhook.Job{Kind: j.Kind, Repo: j.Repo, Reason: j.Reason, Access: j.Access}, tc.name)
	}
}

// TestRulesetEventsRefuseMalformedPayloads: a repository_ruleset payload GitHub would not send
// (its schema's required properties missing, a repository or org name no account can have) is
// refused 400 with what is wrong, and nothing is queued.
func TestRulesetEventsRefuseMalformedPayloads(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, body, want string }{
		{"not JSON", `{"action":"deleted",`, "decoding repository_ruleset event"},
		{"no action", `{"repository_ruleset":{"id":7,"name":"fleetbot"},"repository":{"full_name":"acme/a"},"sender":{"login":"a"}}`, "no action"},
		{"no ruleset", `{"action":"deleted","repository":{"full_name":"acme/a"},"sender":{"login":"a"}}`, "no repository_ruleset object"},
		{"ruleset of the wrong type", `{"action":"deleted","repository_ruleset":"fleetbot","repository":{"full_name":"acme/a"},"sender":{"login":"a"}}`, "decoding repository_ruleset event"},
		{"ruleset without a name", `{"action":"deleted","repository_ruleset":{"id":7},"repository":{"full_name":"acme/a"},"sender":{"login":"a"}}`, "without an id or a name"},
		{"no sender", `{"action":"deleted","repository_ruleset":{"id":7,"name":"fleetbot"},"repository":{"full_name":"acme/a"}}`, "no sender"},
		{"path in the repo name", rulesetBody("deleted", "fleetbot", "acme/../control", "a"), `repository.full_name "acme/../control" is not a GitHub owner/name`},
		{"three segments", rulesetBody("deleted", "fleetbot", "acme/a/b", "a"), "is not a GitHub owner/name"},
		{"dot name", rulesetBody("deleted", "fleetbot", "acme/..", "a"), "is not a GitHub owner/name"},
		{"whose ruleset", `{"action":"deleted","repository_ruleset":{"id":7,"name":"fleetbot"},"sender":{"login":"a"}}`, "neither a repository nor an organization"},
		{"bad org login", `{"action":"deleted","repository_ruleset":{"id":7,"name":"fleetbot"},"organization":{"login":"-acme/x"},"sender":{"login":"a"}}`, "neither a repository nor an organization"},
	} {
		q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
		h := &RulesetHandler{&base{cfg: HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", Queue: q}}}
		_, err := h.Handle(context.Background(), Delivery{ID: "d", Event: "repository_ruleset", Payload: []byte(tc.body)})
		require.ErrorIs(t, err, ErrBadPayload, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		assert.Zero(t, q.Len(), tc.name)

		d := newTestDispatcher(t, q, 1<<20)
		code, outcome := post{event: "repository_ruleset", delivery: "d", body: tc.body}.do(t, d)
		assert.Equal(t, http.StatusBadRequest, code, tc.name)
		assert.Equal(t, metrics.OutcomeBadRequest, outcome, tc.name)
		assert.Zero(t, q.Len(), tc.name)
	}
}
