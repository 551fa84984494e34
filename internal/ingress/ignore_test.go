package ingress

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// TestIgnoredDeliveryIsLoggedAtInfo: a signed delivery that queues nothing says why at the
// default log level (info), with the delivery, the event and the repo, so an operator reading
// serve's logs sees why a push did nothing without turning on debug.
func TestIgnoredDeliveryIsLoggedAtInfo(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), MaxBody: 1 << 20, DedupeSize: 3, Metrics: metrics.New()},
		Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q,
			Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})...)
	require.NoError(t, err)
	code, outcome := post{event: "repository_ruleset", delivery: "d-1", body: rulesetBody("created", "fleetbot", "acme/cluster-a", "fleetbot[bot]")}.do(t, d)
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, metrics.OutcomeIgnored, outcome)
	assert.Zero(t, q.Len())
	var rec struct {
		Level, Msg, Delivery, Event, Repo, Why string
	}
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &rec), logs.String())
	assert.Equal(t, "INFO", rec.Level)
	assert.Equal(t, "event ignored", rec.Msg)
	assert.Equal(t, "d-1", rec.Delivery)
	assert.Equal(t, "repository_ruleset", rec.Event)
	assert.Equal(t, "acme/cluster-a", rec.Repo)
	assert.NotEmpty(t, rec.Why, "the reason is said")
}
