package ingress

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// blockingBody is a request body that signals when it is first read and then blocks until
// released: a slow client holding a slot.
type blockingBody struct {
	reading chan<- struct{}
	release <-chan struct{}
	once    sync.Once
}

func (b *blockingBody) Read(p []byte) (int, error) {
	b.once.Do(func() { b.reading <- struct{}{} })
	<-b.release
	return 0, io.EOF
}

// TestAttackSlowUnauthenticatedBodies: clients that send headers and then trickle their bodies
// hold at most MaxUnverified slots; the next delivery is refused at once with 503 (a failed
// delivery, in the App's delivery log), and a signed delivery goes through once a slot is free.
func TestAttackSlowUnauthenticatedBodies(t *testing.T) {
	t.Parallel()
	q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), MaxUnverified: 2, Metrics: metrics.New()},
		Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q})...)
	require.NoError(t, err)
	reading, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := httptest.NewRequest(http.MethodPost, "/webhook", &blockingBody{reading: reading, release: release})
			req.Header.Set("X-GitHub-Event", "push")
			d.ServeHTTP(httptest.NewRecorder(), req)
		}()
		<-reading
	}
	code, outcome := post{event: "push", delivery: "d1", body: pushBody("acme/control", "refs/heads/main", "alice")}.do(t, d)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, metrics.OutcomeBusy, outcome)
	close(release)
	wg.Wait()
	code, outcome = post{event: "push", delivery: "d2", body: pushBody("acme/control", "refs/heads/main", "alice")}.do(t, d)
	assert.Equal(t, http.StatusAccepted, code)
	assert.Equal(t, metrics.OutcomeQueued, outcome)
}

// TestAttackUnauthenticatedHeadersInLogs: what an unauthenticated sender puts in the event and
// delivery headers reaches the log only bounded.
func TestAttackUnauthenticatedHeadersInLogs(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: metrics.New()})
	require.NoError(t, err)
	junk := strings.Repeat("A", 10_000)
	req := httptest.NewRequest(http.MethodPost, "/webhook", strings.NewReader("{}"))
	req.Header.Set("X-GitHub-Event", "evil"+junk)
	req.Header.Set("X-GitHub-Delivery", "id\n"+junk)
	req.Header.Set(SignatureHeader, "sha256=00")
	w := httptest.NewRecorder()
	d.ServeHTTP(w, req)
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.NotContains(t, logs.String(), junk)
	assert.Contains(t, logs.String(), "event=other")
	assert.Contains(t, logs.String(), "delivery=(invalid)")
	assert.Less(t, logs.Len(), 1000, "one short line")
}

// TestGitHubSizedBodiesAccepted: GitHub caps payloads at 25 MB; a signed 20 MB delivery is
// accepted by default (the old 5 MB cap refused legal deliveries).
func TestGitHubSizedBodiesAccepted(t *testing.T) {
	t.Parallel()
	q := webhook.NewQueue(jobqueue.Config{Capacity: 10})
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret)},
		Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q})...)
	require.NoError(t, err)
	body := pushBody("acme/control", "refs/heads/main", "alice")
	body = body[:len(body)-1] + `,"padding":"` + strings.Repeat("x", 20<<20) + `"}`
	code, outcome := post{event: "push", delivery: "big", body: body}.do(t, d)
	assert.Equal(t, http.StatusAccepted, code, outcome)
	assert.Equal(t, int64(25<<20), int64(DefaultMaxBody))
}
