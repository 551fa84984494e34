package github_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

var t0 = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// attempt is a delivery attempt of the log, minutes after t0.
func attempt(id int64, guid string, minutes int, status int) ghforge.Delivery {
	d := ghforge.Delivery{ID: id, GUID: guid, Event: "push", DeliveredAt: t0.Add(time.Duration(minutes) * time.Minute), StatusCode: status, Status: "OK"}
	if status < 200 || status > 299 {
		d.Status = "Invalid HTTP Response: " + http.StatusText(status)
	}
	return d
}

func ids(ds []ghforge.Delivery) []int64 {
	out := []int64{}
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// TestRedeliveriesPicksFailedEventsOnce: of the delivery log's attempts, an event (GUID) is
// redelivered when its latest attempt failed: not when a later attempt succeeded, once however
// many attempts failed, never when the service handled it, never outside the window (since the
// last pass, and within GitHub's retention), at most Max per pass, the oldest first. The clock
// is the query's: no test of it waits.
func TestRedeliveriesPicksFailedEventsOnce(t *testing.T) {
	t.Parallel()
	log := []ghforge.Delivery{
		attempt(1, "a", 0, 503),          // a: failed, then redelivered and OK
		attempt(2, "b", 1, 503),          // b: failed twice (a redelivery failed too)
		attempt(3, "c", 2, 200),          // c: OK
		attempt(4, "d", 3, 0),            // d: no answer at all (status code 0)
		attempt(5, "a", 4, 202),          // a's redelivery: OK
		attempt(6, "b", 5, 500),          // b's redelivery: failed
		attempt(7, "e", 6, 503),          // e: failed, handled by the service (it acknowledged late)
		attempt(8, "f", -3*24*60-1, 503), // f: older than GitHub's retention
		{ID: 9, GUID: "g", DeliveredAt: t0.Add(7 * time.Minute), StatusCode: 200, Status: "timed out"}, // g: 200, not OK
	}
	now := t0.Add(time.Hour)
	q := ghforge.RedeliveryQuery{Now: now, Retention: ghforge.DeliveryRetentionGitHub, Handled: func(guid string) bool { return guid == "e" }}
	got := ghforge.Redeliveries(log, q)
	assert.Equal(t, []int64{4, 6, 9}, ids(got), "d, b's latest failed attempt, g: the oldest attempt first (3, 5, 7 min)")

	q.Max = 2
	assert.Equal(t, []int64{4, 6}, ids(ghforge.Redeliveries(log, q)), "at most Max")

	q.Max, q.Since = 0, t0.Add(4*time.Minute)
	assert.Equal(t, []int64{6, 9}, ids(ghforge.Redeliveries(log, q)), "d's attempt is before the window")

	q.Since, q.Retention = time.Time{}, 0
	q.Handled = nil
	assert.Equal(t, []int64{8, 4, 6, 7, 9}, ids(ghforge.Redeliveries(log, q)), "no retention, nothing handled: f and e too")

	q.Now, q.Retention = t0.Add(3*24*time.Hour+4*time.Minute), ghforge.DeliveryRetentionGitHub
	assert.Equal(t, []int64{6, 7, 9}, ids(ghforge.Redeliveries(log, q)), "three days after d's attempt, GitHub no longer keeps it")
	assert.Empty(t, ghforge.Redeliveries(nil, q))
}

// hookReceiver answers deliveries with its status (settable) and counts them per GUID.
type hookReceiver struct {
	mu     sync.Mutex
	status int
	byGUID map[string]int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.byGUID[r.Header.Get("X-GitHub-Delivery")]++
	status := h.status
	h.mu.Unlock()
	w.WriteHeader(status)
}

func (h *hookReceiver) set(status int) {
	h.mu.Lock()
	h.status = status
	h.mu.Unlock()
}

func (h *hookReceiver) counts() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for k, v := range h.byGUID {
		out[k] = v
	}
	return out
}

// TestRedeliverFailedAgainstTheFake: deliveries refused while the service was down are found in
// the App's delivery log (read with the App's JWT, a page of 100 at a time) and redelivered once
// each, with their GUIDs; the next pass, with the service up, has nothing to redeliver.
func TestRedeliverFailedAgainstTheFake(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc := &hookReceiver{status: http.StatusServiceUnavailable, byGUID: map[string]int{}}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	srv := githubtest.NewServer(t, githubtest.WithWebhook(hook.URL, "s3cret"), githubtest.WithManualClock())
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "r", map[string]string{"a.txt": "a\n"})
	srv.Commit("acme", "r", "main", "two", map[string]string{"b.txt": "b\n"})
	srv.WaitWebhooks()
	failed := rc.counts()
	require.Len(t, failed, 3, "an installation and two pushes, each refused once")

	app, err := ghforge.NewApp(ghforge.AppConfig{APIURL: srv.APIURL(), AppID: srv.AppID(), PrivateKey: srv.AppPrivateKeyPEM()})
	require.NoError(t, err)
	assert.Equal(t, ghforge.DeliveryRetentionEnterprise, app.DeliveryRetention(), "the fake's URL is GHES-shaped (/api/v3)")

	rc.set(http.StatusAccepted)
	pass, err := app.RedeliverFailed(ctx, ghforge.RedeliveryQuery{Now: srv.Now(), Retention: ghforge.DeliveryRetentionGitHub})
	require.NoError(t, err)
	assert.Equal(t, 3, pass.Listed)
	assert.True(t, pass.Complete)
	require.Len(t, pass.Asked, 3)
	srv.WaitWebhooks()
	for guid, n := range rc.counts() {
		assert.Equal(t, 2, n, "%s: refused once, redelivered once with its GUID", guid)
		assert.Contains(t, failed, guid)
	}

	pass, err = app.RedeliverFailed(ctx, ghforge.RedeliveryQuery{Now: srv.Now(), Retention: ghforge.DeliveryRetentionGitHub})
	require.NoError(t, err)
	assert.Equal(t, 6, pass.Listed, "three failed attempts and their three redeliveries")
	assert.Empty(t, pass.Asked, "every event's latest attempt succeeded")
	ds, complete, err := app.Deliveries(ctx, srv.Now().Add(time.Second))
	require.NoError(t, err)
	assert.True(t, complete)
	assert.Empty(t, ds, "nothing delivered since")
	assert.Zero(t, app.Stats().Writes-3, "three redeliveries asked, nothing else written")
}
