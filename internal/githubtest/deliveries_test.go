package githubtest_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// receiver is a webhook endpoint that answers each delivery with the next status of statuses
// (the last one once they run out) and records what it received.
type receiver struct {
	mu       sync.Mutex
	statuses []int
	got      []received
}

type received struct {
	guid, event, signature string
	body                   []byte
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, received{r.Header.Get("X-GitHub-Delivery"), r.Header.Get("X-GitHub-Event"), r.Header.Get("X-Hub-Signature-256"), body})
	status := rc.statuses[0]
	if len(rc.statuses) > 1 {
		rc.statuses = rc.statuses[1:]
	}
	rc.mu.Unlock()
	w.WriteHeader(status)
}

func (rc *receiver) received() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// appClient is a go-github client authenticated as the fake's App (a JWT, as ghinstallation
// signs it).
func appClient(t *testing.T, srv *githubtest.Server) *github.Client {
	t.Helper()
	atr, err := ghinstallation.NewAppsTransport(http.DefaultTransport, srv.AppID(), srv.AppPrivateKeyPEM())
	require.NoError(t, err)
	atr.BaseURL = srv.URL + "/api/v3"
	return enterpriseClient(t, srv, atr)
}

// TestDeliveryLogAndRedelivery: every delivery the fake sends is in the App's delivery log
// (GET /app/hook/deliveries, App JWT only) with its outcome; GitHub does not deliver a failed
// one again by itself, but redelivers it when asked: the same payload with the same GUID, as a
// new attempt (new id, redelivery true), signed. The log lists the newest first, pages with a
// cursor, filters by outcome as documented, and keeps 3 days: an older delivery is neither
// listed nor redelivered.
func TestDeliveryLogAndRedelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rc := &receiver{statuses: []int{http.StatusServiceUnavailable, http.StatusAccepted}}
	hook := httptest.NewServer(rc)
	t.Cleanup(hook.Close)
	srv := githubtest.NewServer(t, githubtest.WithWebhook(hook.URL, "s3cret"), githubtest.WithManualClock())
	srv.CreateOrg("acme") // an installation event: refused with 503
	srv.WaitWebhooks()
	app := appClient(t, srv)

	ds, _, err := app.Apps.ListHookDeliveries(ctx, &github.ListCursorOptions{PerPage: 100})
	require.NoError(t, err)
	require.Len(t, ds, 1)
	first := ds[0]
	assert.Equal(t, "installation", first.GetEvent())
	assert.Equal(t, "created", first.GetAction())
	assert.Equal(t, http.StatusServiceUnavailable, first.GetStatusCode())
	assert.NotEqual(t, "OK", first.GetStatus())
	assert.False(t, first.GetRedelivery())
	assert.NotZero(t, first.GetInstallationID())
	assert.Equal(t, rc.received()[0].guid, first.GetGUID())
	srv.AdvanceClock(time.Minute)
	srv.WaitWebhooks()
	assert.Len(t, rc.received(), 1, "GitHub does not redeliver by itself")

	_, _, err = app.Apps.RedeliverHookDelivery(ctx, first.GetID())
	var accepted *github.AcceptedError
	require.ErrorAs(t, err, &accepted, "202 Accepted")
	srv.WaitWebhooks()
	got := rc.received()
	require.Len(t, got, 2)
	assert.Equal(t, got[0].guid, got[1].guid, "the same GUID")
	assert.Equal(t, got[0].body, got[1].body, "the same payload")
	assert.Equal(t, githubtest.Sign("s3cret", got[1].body), got[1].signature)

	ds, _, err = app.Apps.ListHookDeliveries(ctx, &github.ListCursorOptions{PerPage: 100})
	require.NoError(t, err)
	require.Len(t, ds, 2)
	again := ds[0]
	assert.Equal(t, first.GetGUID(), again.GetGUID())
	assert.NotEqual(t, first.GetID(), again.GetID(), "a new attempt id")
	assert.True(t, again.GetRedelivery())
	assert.Equal(t, "OK", again.GetStatus())
	assert.Equal(t, http.StatusAccepted, again.GetStatusCode())
	assert.True(t, again.GetDeliveredAt().After(first.GetDeliveredAt().Time), "newest first")

	full, _, err := app.Apps.GetHookDelivery(ctx, again.GetID())
	require.NoError(t, err)
	assert.Equal(t, first.GetGUID(), full.GetGUID())
	assert.Equal(t, "installation", full.Request.Headers["X-Github-Event"])
	assert.NotContains(t, full.Request.Headers, "X-Hub-Signature-256")

	// Pages: newest first, a cursor in the Link header.
	for range 3 {
		require.NoError(t, srv.Deliver(ctx, hook.URL, "s3cret", "push", map[string]any{"ref": "refs/heads/main"}))
	}
	var pages [][]int64
	opts := &github.ListCursorOptions{PerPage: 2}
	for {
		page, resp, err := app.Apps.ListHookDeliveries(ctx, opts)
		require.NoError(t, err)
		var ids []int64
		for _, d := range page {
			ids = append(ids, d.GetID())
		}
		pages = append(pages, ids)
		if resp.Cursor == "" {
			break
		}
		opts.Cursor = resp.Cursor
	}
	require.Len(t, pages, 3)
	assert.Equal(t, []int{2, 2, 1}, []int{len(pages[0]), len(pages[1]), len(pages[2])})
	assert.Greater(t, pages[0][0], pages[0][1], "newest first")
	assert.Greater(t, pages[0][1], pages[1][0], "the cursor continues after the last one")

	failures := listWithStatus(t, srv, "failure")
	assert.Equal(t, []int64{first.GetID()}, failures, "status=failure: a status code of 400-599")

	// Retention: three days.
	require.Len(t, srv.Deliveries(), 5)
	srv.AdvanceClock(githubtest.DeliveryRetention)
	ds, _, err = app.Apps.ListHookDeliveries(ctx, &github.ListCursorOptions{PerPage: 100})
	require.NoError(t, err)
	require.Len(t, ds, 4, "the first delivery is older than 3 days; the others, a minute younger, are not")
	for _, d := range ds {
		assert.NotEqual(t, first.GetID(), d.GetID())
	}
	_, _, err = app.Apps.RedeliverHookDelivery(ctx, first.GetID())
	assert.Equal(t, http.StatusNotFound, errStatus(t, err))

	// The App's JWT only.
	_, _, err = srv.ClientWithToken(srv.InstallationToken("acme")).Apps.ListHookDeliveries(ctx, nil)
	assert.Equal(t, http.StatusUnauthorized, errStatus(t, err))
}

// listWithStatus lists the delivery ids of the log with ?status= (go-github v62 has no option
// for it).
func listWithStatus(t *testing.T, srv *githubtest.Server, status string) []int64 {
	t.Helper()
	app := appClient(t, srv)
	req, err := app.NewRequest(http.MethodGet, "app/hook/deliveries?per_page=100&status="+status, nil)
	require.NoError(t, err)
	var ds []*github.HookDelivery
	_, err = app.Do(context.Background(), req, &ds)
	require.NoError(t, err)
	var ids []int64
	for _, d := range ds {
		ids = append(ids, d.GetID())
	}
	return ids
}
