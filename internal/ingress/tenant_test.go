package ingress

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// TestTenantHandlersDecide: with tenant checks on, every pull request opened, synchronized or
// reopened outside the control repo (fleetbot's own too) and every re-run of fleetbot's check
// run there is a tenant job on its head; the control repo's keep their plan check, a closed
// pull request its drift, and another App's check run or a head that is no commit is ignored.
func TestTenantHandlersDecide(t *testing.T) {
	t.Parallel()
	sha := strings.Repeat("c", 40)
	pull := func(repo, action, sender, head string) string {
		return fmt.Sprintf(`{"action":%q,"number":3,"pull_request":{"head":{"sha":%q}},"repository":{"full_name":%q},"sender":{"login":%q}}`, action, head, repo, sender)
	}
	rerun := func(repo string, app int) string {
		return fmt.Sprintf(`{"action":"rerequested","check_run":{"head_sha":%q,"app":{"id":%d},"pull_requests":[{"number":3}]},"repository":{"full_name":%q},"sender":{"login":"alice"}}`, sha, app, repo)
	}
	for _, tc := range []struct {
		name, event, body string
		want              *webhook.Job // nil: ignored
	}{
		{"workspace PR opened", "pull_request", pull("acme/workspace-payments", "opened", "alice", sha),
			&webhook.Job{Kind: webhook.KindTenant, Repo: "acme/workspace-payments", SHA: sha, PR: 3, Reason: "pull_request.opened"}},
		{"fleetbot's own PR synchronized", "pull_request", pull("acme/cluster-a", "synchronize", "fleetbot[bot]", sha),
			&webhook.Job{Kind: webhook.KindTenant, Repo: "acme/cluster-a", SHA: sha, PR: 3, Reason: "pull_request.synchronize"}},
		{"PR reopened", "pull_request", pull("acme/cluster-a", "reopened", "alice", sha),
			&webhook.Job{Kind: webhook.KindTenant, Repo: "acme/cluster-a", SHA: sha, PR: 3, Reason: "pull_request.reopened"}},
		{"PR without a head commit", "pull_request", pull("acme/cluster-a", "opened", "alice", "main"), nil},
		{"PR edited", "pull_request", pull("acme/cluster-a", "edited", "alice", sha), nil},
		{"PR closed", "pull_request", pull("acme/cluster-a", "closed", "alice", sha),
			&webhook.Job{Kind: webhook.KindDrift, Repo: "acme/cluster-a", Reason: "pull_request.closed"}},
		{"control PR opened", "pull_request", pull("acme/control", "opened", "alice", sha),
			&webhook.Job{Kind: webhook.KindCheck, Repo: "acme/control", SHA: sha, PR: 3, Reason: "pull_request.opened"}},
		{"re-run of fleetbot's tenant check", "check_run", rerun("acme/workspace-payments", 1),
			&webhook.Job{Kind: webhook.KindTenant, Repo: "acme/workspace-payments", SHA: sha, Reason: "check_run.rerequested"}},
		{"re-run of another App's check", "check_run", rerun("acme/workspace-payments", 15368), nil},
		{"re-run of the plan check", "check_run", rerun("acme/control", 1),
			&webhook.Job{Kind: webhook.KindCheck, Repo: "acme/control", SHA: sha, PR: 3, Reason: "check_run.rerequested"}},
	} {
		q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
		d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Metrics: metrics.New()},
			Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q, TenantChecks: true})...)
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
}
