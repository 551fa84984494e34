package ingress

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// get answers one GET on h: status and body.
func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	b, err := io.ReadAll(w.Result().Body)
	require.NoError(t, err)
	return w.Code, string(b)
}

// TestServerHealthReadinessAndDeliveries: what a Kubernetes probe and GitHub see while serve
// starts, runs and stops: alive at once; not ready (with the reason) until GitHub is reached;
// deliveries refused with 503 (failed deliveries, in the App's delivery log) until the dispatcher is set, then verified
// and queued; not ready again on shutdown; metrics count the refused deliveries.
func TestServerHealthReadinessAndDeliveries(t *testing.T) {
	t.Parallel()
	m := metrics.New()
	srv := NewServer(m)
	h := srv.Handler()

	code, body := get(t, h, "/healthz")
	assert.Equal(t, http.StatusOK, code, "alive while starting")
	assert.Equal(t, "ok\n", body)
	code, body = get(t, h, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code, "not ready before GitHub is reached")
	assert.Contains(t, body, "GitHub App not reached yet")
	require.Error(t, srv.Ready())

	push := post{event: "push", delivery: "early", body: pushBody("acme/control", "refs/heads/main", "alice")}
	code, _ = push.do(t, h)
	assert.Equal(t, http.StatusServiceUnavailable, code, "a delivery before the service is connected is refused: it fails, and stays in the App's delivery log")

	srv.SetReady(errors.New("not connected to GitHub: 401 Bad credentials"))
	code, body = get(t, h, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "401 Bad credentials", "readiness says why")

	q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Metrics: m},
		Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q})...)
	require.NoError(t, err)
	srv.SetDispatcher(d)
	srv.SetReady(nil)
	code, body = get(t, h, "/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ready\n", body)
	assert.NoError(t, srv.Ready())
	code, outcome := post{event: "push", delivery: "d1", body: push.body}.do(t, h)
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, metrics.OutcomeQueued, outcome)
	assert.Equal(t, 1, q.Len())
	code, _ = post{event: "push", delivery: "d2", body: push.body, signature: sign("wrong", push.body)}.do(t, h)
	assert.Equal(t, http.StatusUnauthorized, code, "the routes verify signatures too")

	srv.SetReady(errors.New("shutting down"))
	code, body = get(t, h, "/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "shutting down")

	code, body = get(t, h, "/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, `fleetbot_webhook_deliveries_total{event="push",outcome="not_ready"} 1`)
	assert.Contains(t, body, `fleetbot_webhook_deliveries_total{event="push",outcome="queued"} 1`)
}
