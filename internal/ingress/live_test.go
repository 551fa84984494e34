package ingress

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

const (
	liveHead  = "0123456789abcdef0123456789abcdef01234567"
	liveNewer = "89abcdef0123456789abcdef0123456789abcdef"
)

// liveRecorder is a LiveReports that records what the handlers hand it.
type liveRecorder struct {
	mu       sync.Mutex
	statuses []app.LiveStatus
	pushes   []app.LivePush
	answer   webhook.Observation
}

func (l *liveRecorder) ObserveStatus(_ string, st app.LiveStatus) webhook.Observation {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.statuses = append(l.statuses, st)
	return l.answer
}

func (l *liveRecorder) ObserveBotPush(_ string, p app.LivePush) webhook.Observation {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.pushes = append(l.pushes, p)
	return l.answer
}

func statusBody(repo, sha, context, state string) string {
	return `{"id":7,"sha":"` + sha + `","state":"` + state + `","context":"` + context + `","description":"Kustomization reconciliation failed",` +
		`"target_url":"https://grafana.example/d/flux","repository":{"full_name":"` + repo + `"},"sender":{"login":"flux"}}`
}

func branchPushBody(repo, ref, after, sender string, deleted bool) string {
	d := "false"
	if deleted {
		d = "true"
	}
	return `{"ref":"` + ref + `","after":"` + after + `","deleted":` + d + `,"repository":{"full_name":"` + repo + `","default_branch":"main"},` +
		`"pusher":{"name":"` + sender + `"},"sender":{"login":"` + sender + `"}}`
}

// TestHandlersTakeLiveEventsIntoTheReports: a Flux status (a Kustomization's or a HelmRelease's,
// not pending) and a push to a target repo's branch by someone other than fleetbot reach the
// stored reports with no job ("observed"); with rollout waves a Kustomization's or a
// HelmRelease's status on a cluster repo of the rollout also queues the full apply. Fleetbot's own pushes, deleted
// branches, the control repo, and statuses that are not a Flux verdict do not.
func TestHandlersTakeLiveEventsIntoTheReports(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, event, body string
		outcome           string
		statuses, pushes  int
		job               *webhook.Job
	}{
		{"Flux failure", "status", statusBody("acme/cluster-b", liveHead, "kustomization/apps/7a1b", "failure"), metrics.OutcomeObserved, 1, 0, nil},
		{"HelmRelease error", "status", statusBody("acme/cluster-b", liveHead, "helmrelease/redis/7a1b", "error"), metrics.OutcomeObserved, 1, 0, nil},
		{"Flux failure, rollout wave", "status", statusBody("acme/cluster-a", liveHead, "kustomization/apps/7a1b", "failure"), metrics.OutcomeQueued, 1, 0,
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: webhook.ReasonRolloutStatus}},
		{"HelmRelease failure, rollout wave", "status", statusBody("acme/cluster-a", liveHead, "helmrelease/redis/7a1b", "failure"), metrics.OutcomeQueued, 1, 0,
			&webhook.Job{Kind: webhook.KindApply, Repo: "acme/control", Reason: webhook.ReasonRolloutStatus}},
		{"a CI status, rollout wave", "status", statusBody("acme/cluster-a", liveHead, "ci/build", "failure"), metrics.OutcomeIgnored, 0, 0, nil},
		{"Flux pending", "status", statusBody("acme/cluster-b", liveHead, "kustomization/apps/7a1b", "pending"), metrics.OutcomeIgnored, 0, 0, nil},
		{"a CI status", "status", statusBody("acme/cluster-b", liveHead, "ci/build", "failure"), metrics.OutcomeIgnored, 0, 0, nil},
		{"a short sha", "status", statusBody("acme/cluster-b", "0123", "kustomization/apps/7a1b", "failure"), metrics.OutcomeIgnored, 0, 0, nil},
		{"the control repo", "status", statusBody("acme/control", liveHead, "kustomization/apps/7a1b", "failure"), metrics.OutcomeIgnored, 0, 0, nil},
		{"a human's push to the bot branch", "push", branchPushBody("acme/cluster-b", "refs/heads/fleetbot/sync", liveNewer, "bob", false),
			metrics.OutcomeObserved, 0, 1, nil},
		{"fleetbot's own push", "push", branchPushBody("acme/cluster-b", "refs/heads/fleetbot/sync", liveNewer, "fleetbot[bot]", false),
			metrics.OutcomeIgnored, 0, 0, nil},
		{"a deleted branch", "push", branchPushBody("acme/cluster-b", "refs/heads/fleetbot/sync", strings.Repeat("0", 40), "bob", true),
			metrics.OutcomeIgnored, 0, 0, nil},
		{"a tag", "push", branchPushBody("acme/cluster-b", "refs/tags/v1", liveNewer, "bob", false), metrics.OutcomeIgnored, 0, 0, nil},
		{"a control repo branch", "push", branchPushBody("acme/control", "refs/heads/feature", liveNewer, "bob", false), metrics.OutcomeIgnored, 0, 0, nil},
	} {
		q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
		w := &webhook.RolloutWatch{Queue: q, Control: "acme/control", Clock: &fakeClock{}}
		w.Observe([]string{"acme/cluster-a"}, time.Time{})
		live := &liveRecorder{answer: webhook.Observed}
		d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Metrics: metrics.New()},
			Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", Queue: q, Rollout: w, Live: live})...)
		require.NoError(t, err)
		code, outcome := post{event: tc.event, delivery: "x", body: tc.body}.do(t, d)
		require.Equal(t, http.StatusAccepted, code, tc.name)
		assert.Equal(t, tc.outcome, outcome, tc.name)
		assert.Len(t, live.statuses, tc.statuses, tc.name)
		assert.Len(t, live.pushes, tc.pushes, tc.name)
		if tc.job == nil {
			assert.Zero(t, q.Len(), tc.name)
			continue
		}
		got := q.Drain()
		require.Len(t, got, 1, tc.name)
		got[0].Delivery, got[0].Queued = "", time.Time{}
		assert.Equal(t, *tc.job, got[0], tc.name)
	}

	// What the reports do not take is ignored, with why.
	q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
	live := &liveRecorder{answer: webhook.NotObservedRepo}
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Metrics: metrics.New()},
		Handlers(HandlerConfig{Control: "acme/control", Queue: q, Live: live})...)
	require.NoError(t, err)
	_, outcome := post{event: "status", delivery: "y", body: statusBody("evil/cluster-b", liveHead, "kustomization/apps/1", "failure")}.do(t, d)
	assert.Equal(t, metrics.OutcomeIgnored, outcome)
	assert.Zero(t, q.Len())
}
