package ingress

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// TestRolloutEventsAdvanceTheRollout: a Flux status (not pending) of a context the gate counts
// (a Kustomization's or a HelmRelease's, rollout.CountsAsHealth) or a closed pull request in a
// cluster repo of the rollout in progress queues a full apply; a CI status (ci/build) does not; the same events elsewhere keep
// their old meaning (ignored, or a drift reconcile of the one repo).
func TestRolloutEventsAdvanceTheRollout(t *testing.T) {
	t.Parallel()
	status := func(repo, context, state string) string {
		return `{"id":7,"sha":"` + "0123456789abcdef0123456789abcdef01234567" + `","state":"` + state + `","context":"` + context +
			`","repository":{"full_name":"` + repo + `"},"sender":{"login":"flux"}}`
	}
	closed := func(repo string) string {
		return `{"action":"closed","number":2,"repository":{"full_name":"` + repo + `"},"sender":{"login":"alice"}}`
	}
	for _, tc := range []struct {
		name, event, body string
		want              *webhook.Job // nil: ignored
	}{
		{"Flux success", "status", status("acme/Cluster-A", "kustomization/platform/0c9c2e41", "success"),
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: webhook.ReasonRolloutStatus}},
		{"Flux failure", "status", status("acme/cluster-a", "kustomization/apps/7a1b2c3d", "failure"),
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: webhook.ReasonRolloutStatus}},
		{"HelmRelease failure", "status", status("acme/cluster-a", "helmrelease/podinfo/0c9c2e41", "failure"),
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: webhook.ReasonRolloutStatus}},
		{"HelmRelease success", "status", status("acme/cluster-a", "helmrelease/podinfo/0c9c2e41", "success"),
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: webhook.ReasonRolloutStatus}},
		{"Flux pending", "status", status("acme/cluster-a", "kustomization/platform/0c9c2e41", "pending"), nil},
		{"a CI status", "status", status("acme/cluster-a", "ci/build", "success"), nil},
		{"a repo outside the rollout", "status", status("acme/cluster-b", "kustomization/platform/0c9c2e41", "success"), nil},
		{"another owner's repo of the same name", "status", status("evil/cluster-a", "kustomization/platform/0c9c2e41", "failure"), nil},
		{"no repository", "status", `{"state":"success","context":"kustomization/platform/1"}`, nil},
		{"closed in another owner's repo of the same name", "pull_request", closed("evil/cluster-a"),
			&webhook.Job{Kind: webhook.KindDrift, Repo: "evil/cluster-a", Reason: "pull_request.closed"}},
		{"merged in the rollout", "pull_request", closed("acme/cluster-a"),
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: webhook.ReasonRolloutMerge}},
		{"merged outside the rollout", "pull_request", closed("acme/cluster-b"),
			&webhook.Job{Kind: webhook.KindDrift, Repo: "acme/cluster-b", Reason: "pull_request.closed"}},
	} {
		q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
		w := &webhook.RolloutWatch{Queue: q, Control: "acme/control", Clock: &fakeClock{}}
		w.Observe([]string{"acme/cluster-a"}, time.Time{})
		d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Metrics: metrics.New()},
			Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", Queue: q, Rollout: w})...)
		require.NoError(t, err)
		code, outcome := post{event: tc.event, delivery: "x", body: tc.body}.do(t, d)
		require.Equal(t, http.StatusAccepted, code, tc.name)
		if tc.want == nil {
			assert.Equal(t, metrics.OutcomeIgnored, outcome, tc.name)
			assert.Zero(t, q.Len(), tc.name)
			continue
		}
		got := q.Drain()
		require.Len(t, got, 1, tc.name)
		got[0].Delivery, got[0].Queued = "", time.Time{}
		assert.Equal(t, *tc.want, got[0], tc.name)
	}

	// Without a rollout in progress (none observed, or done), a status is ignored.
	q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Metrics: metrics.New()},
		Handlers(HandlerConfig{Control: "acme/control", Queue: q})...)
	require.NoError(t, err)
	_, outcome := post{event: "status", delivery: "y", body: status("acme/cluster-a", "kustomization/platform/1", "success")}.do(t, d)
	assert.Equal(t, metrics.OutcomeIgnored, outcome)
	code, _ := post{event: "status", delivery: "z", body: `{"state":`}.do(t, d)
	assert.Equal(t, http.StatusBadRequest, code, "a status payload that is not JSON")
	assert.Zero(t, q.Len())
}
