package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// jobSide is the job process of serve --job-process as the front sees it: a Server taking
// batches, over a queue, on a loopback test server.
type jobSide struct {
	url     string
	srv     *Server
	queue   *webhook.Queue
	metrics *metrics.Metrics
	disp    *Dispatcher
}

func newJobSide(t *testing.T, capacity int) *jobSide {
	t.Helper()
	j := &jobSide{queue: webhook.NewQueue(jobqueue.Config{Capacity: capacity}), metrics: metrics.New()}
	j.srv = NewServer(j.metrics)
	j.srv.AcceptBatches()
	d, err := NewDispatcher(DispatcherConfig{Secret: []byte(testSecret), Metrics: j.metrics},
		Handlers(HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: j.queue})...)
	require.NoError(t, err)
	j.disp = d
	ts := httptest.NewServer(j.srv.Handler())
	t.Cleanup(ts.Close)
	j.url = ts.URL
	return j
}

// ready routes batches to the dispatcher (before, the job side answers 503: starting).
func (j *jobSide) ready() { j.srv.SetDispatcher(j.disp) }

// deliveries is fleetbot_webhook_deliveries_total{event, outcome} of the job process.
func (j *jobSide) deliveries(t *testing.T, event, outcome string) float64 {
	t.Helper()
	fams, err := j.metrics.Registry().Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != "fleetbot_webhook_deliveries_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["event"] == event && labels["outcome"] == outcome {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func newTestFront(t *testing.T, jobURL string, capacity int, clock jobqueue.Clock) *Front {
	t.Helper()
	f, err := NewFront(FrontConfig{Secret: []byte(testSecret), MaxBody: 1024, Capacity: capacity, JobProcess: jobURL, Clock: clock})
	require.NoError(t, err)
	return f
}

// driftBody is a merged pull request on a target repo: a drift job for repo.
func driftBody(repo string, n int) string {
	return fmt.Sprintf(`{"action":"closed","number":%d,"pull_request":{"number":%d,"merged":true},"repository":{"full_name":%q,"default_branch":"main"},"sender":{"login":"alice"}}`, n, n, repo)
}

// TestFrontAcknowledgesThenHandsOverInOrder: the front answers 202 to signed deliveries
// without the job process, and hands them over in the order they came; the job process queues
// each as POST /webhook would have and counts it with the front's acknowledgement time.
func TestFrontAcknowledgesThenHandsOverInOrder(t *testing.T) {
	t.Parallel()
	job := newJobSide(t, 100)
	job.ready()
	f := newTestFront(t, job.url, 100, nil)
	var repos []string
	for i := range 20 {
		repo := fmt.Sprintf("acme/cluster-%02d", i)
		repos = append(repos, repo)
		code, outcome := post{event: "pull_request", delivery: fmt.Sprint("d", i), body: driftBody(repo, i)}.do(t, f)
		require.Equal(t, http.StatusAccepted, code)
		assert.Equal(t, "accepted", outcome)
	}
	assert.Equal(t, 20, f.Held(), "held until Run hands them over")
	assert.Zero(t, job.queue.Len(), "nothing reached the job process yet")

	assert.Zero(t, f.Drain(context.Background()), "everything taken")
	require.Equal(t, 20, job.queue.Len())
	var got []string
	for _, j := range job.queue.Drain() {
		got = append(got, j.Repo)
	}
	assert.Equal(t, repos, got, "in the order GitHub sent them")
	assert.Equal(t, 20.0, job.deliveries(t, "pull_request", metrics.OutcomeQueued))
	assert.Equal(t, uint64(20), histogramCount(t, job.metrics), "every acknowledgement counted once")
}

func histogramCount(t *testing.T, m *metrics.Metrics) uint64 {
	t.Helper()
	fams, err := m.Registry().Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() == "fleetbot_webhook_ack_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("no fleetbot_webhook_ack_seconds")
	return 0
}

// TestFrontRefusesWhatTheDispatcherRefuses: the front refuses unsigned, wrongly signed,
// oversized, non-POST and eventless deliveries with the Dispatcher's statuses, answers a ping,
// holds none of them, and the job process counts each refusal under its outcome.
func TestFrontRefusesWhatTheDispatcherRefuses(t *testing.T) {
	t.Parallel()
	job := newJobSide(t, 100)
	job.ready()
	f := newTestFront(t, job.url, 100, nil)
	body := pushBody("acme/control", "refs/heads/main", "alice")

	code, outcome := post{event: "push", delivery: "1", body: body, signature: "-"}.do(t, f)
	assert.Equal(t, http.StatusUnauthorized, code, "unsigned")
	assert.Equal(t, metrics.OutcomeBadSignature, outcome)
	code, _ = post{event: "push", delivery: "2", body: body, signature: sign("wrong", body)}.do(t, f)
	assert.Equal(t, http.StatusUnauthorized, code, "wrong secret")
	code, _ = post{event: "push", delivery: "3", body: body, signature: sign512(testSecret, body)}.do(t, f)
	assert.Equal(t, http.StatusUnauthorized, code, "sha512 is not accepted")
	code, outcome = post{event: "push", delivery: "4", body: body + strings.Repeat(" ", 1024)}.do(t, f)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Equal(t, metrics.OutcomeTooLarge, outcome)
	code, _ = post{event: "", delivery: "5", body: body}.do(t, f)
	assert.Equal(t, http.StatusBadRequest, code, "no event")
	code, outcome = post{event: "ping", delivery: "6", body: `{}`}.do(t, f)
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, metrics.OutcomeIgnored, outcome)
	req := httptest.NewRequest(http.MethodGet, "/webhook", nil)
	w := httptest.NewRecorder()
	f.ServeHTTP(w, req)
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Zero(t, f.Held(), "nothing held")

	assert.Zero(t, f.Drain(context.Background()))
	assert.Zero(t, job.queue.Len(), "nothing queued")
	assert.Equal(t, 3.0, job.deliveries(t, "push", metrics.OutcomeBadSignature))
	assert.Equal(t, 1.0, job.deliveries(t, "push", metrics.OutcomeTooLarge))
	assert.Equal(t, 2.0, job.deliveries(t, "none", metrics.OutcomeBadRequest), "no event, and the GET")
	assert.Equal(t, 1.0, job.deliveries(t, "ping", metrics.OutcomeIgnored))
}

// TestFrontHoldsWhatTheJobProcessCannotTakeYet: while the job process is starting (503 for
// the batch) or its queue is full (503 for a delivery), the front keeps the deliveries, in
// order, and hands them over once it can; none is lost or counted twice. Beyond Capacity held
// deliveries the front answers 503 (a failed delivery, in the App's delivery log).
func TestFrontHoldsWhatTheJobProcessCannotTakeYet(t *testing.T) {
	t.Parallel()
	job := newJobSide(t, 2)
	// A forward that fails waits on the clock: armed says the wait began (the forward before
	// it is over), Advance ends it.
	clock := &fakeClock{now: t0, armed: make(chan struct{}, 1)}
	f := newTestFront(t, job.url, 3, clock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx) }()

	for i := range 3 {
		code, _ := post{event: "pull_request", delivery: fmt.Sprint("d", i), body: driftBody(fmt.Sprintf("acme/cluster-%d", i), i)}.do(t, f)
		require.Equal(t, http.StatusAccepted, code)
	}
	code, outcome := post{event: "pull_request", delivery: "d3", body: driftBody("acme/cluster-3", 3)}.do(t, f)
	assert.Equal(t, http.StatusServiceUnavailable, code, "capacity reached")
	assert.Equal(t, metrics.OutcomeQueueFull, outcome)

	<-clock.armed // a forward failed: the job process is starting
	assert.Equal(t, 3, f.Held())
	assert.Zero(t, job.queue.Len())
	clock.Advance(frontRetryMax)
	<-clock.armed // and again
	assert.Equal(t, 3, f.Held())

	job.ready()
	clock.Advance(frontRetryMax)
	<-clock.armed // the job process took two; its queue is full, the third waits at the front
	assert.Equal(t, 2, job.queue.Len())
	assert.Equal(t, 1, f.Held())
	first := job.queue.Drain()
	cancel()
	<-done
	assert.Zero(t, f.Drain(context.Background()), "handed over once the job process has room")
	assert.Zero(t, f.Held())
	rest := job.queue.Drain()
	require.Len(t, first, 2)
	require.Len(t, rest, 1)
	assert.Equal(t, []string{"acme/cluster-0", "acme/cluster-1", "acme/cluster-2"}, []string{first[0].Repo, first[1].Repo, rest[0].Repo})
	assert.Equal(t, 3.0, job.deliveries(t, "pull_request", metrics.OutcomeQueued), "each counted once")
	assert.Equal(t, 1.0, job.deliveries(t, "pull_request", metrics.OutcomeQueueFull), "the front's own refusal")
	assert.Zero(t, job.deliveries(t, "pull_request", metrics.OutcomeDuplicate), "a retried delivery is no duplicate")
}

// TestServeBatchTakesOnlySignedBatches: the batch endpoint refuses a batch without the front's
// signature (401) before reading it, also a GitHub delivery replayed as a batch (its
// signature is keyed with the secret itself, batches with a key derived from it); in a signed
// batch, a delivery whose own GitHub signature is wrong is refused alone.
func TestServeBatchTakesOnlySignedBatches(t *testing.T) {
	t.Parallel()
	job := newJobSide(t, 10)
	job.ready()
	good := driftBody("acme/cluster-a", 1)
	batch := fmt.Sprintf(`{"deliveries":[{"id":"x","event":"pull_request","signature":%q,"body":%q}],"buffered":0}`,
		sign(testSecret, good), []byte(good))
	batch = strings.Replace(batch, fmt.Sprintf("%q", []byte(good)), fmt.Sprintf("%q", base64(good)), 1)

	postBatch := func(body, sig string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, job.url+BatchPath, strings.NewReader(body))
		require.NoError(t, err)
		if sig != "" {
			req.Header.Set(BatchSignatureHeader, sig)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, _ := postBatch(batch, "")
	assert.Equal(t, http.StatusUnauthorized, code, "unsigned")
	code, _ = postBatch(batch, sign(testSecret, batch))
	assert.Equal(t, http.StatusUnauthorized, code, "signed with the webhook secret itself")
	code, _ = postBatch(good, sign(testSecret, good))
	assert.Equal(t, http.StatusUnauthorized, code, "a GitHub delivery replayed as a batch")
	assert.Zero(t, job.queue.Len())

	key := BatchKey([]byte(testSecret))
	code, body := postBatch(batch, signBatch(key, []byte(batch)))
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"status":202`)
	assert.Equal(t, 1, job.queue.Len())

	forged := strings.Replace(batch, sign(testSecret, good), sign("wrong", good), 1)
	forged = strings.Replace(forged, `"id":"x"`, `"id":"y"`, 1)
	code, body = postBatch(forged, signBatch(key, []byte(forged)))
	require.Equal(t, http.StatusOK, code, body)
	assert.Contains(t, body, `"status":401`, "the delivery's own signature is checked again")
	assert.Equal(t, 1, job.queue.Len())

	code, _ = postBatch(`{"deliveries":`, signBatch(key, []byte(`{"deliveries":`)))
	assert.Equal(t, http.StatusBadRequest, code, "a signed batch that is not JSON")
	req, err := http.NewRequest(http.MethodPost, job.url+"/internal/front-batch", bytes.NewReader(nil))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	plain := NewServer(metrics.New()) // serve without --job-process has no batch route
	plain.SetDispatcher(job.disp)
	w := httptest.NewRecorder()
	plain.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, BatchPath, strings.NewReader(batch)))
	assert.Equal(t, http.StatusNotFound, w.Code)
}

func base64(s string) string {
	b, _ := json.Marshal([]byte(s))
	return strings.Trim(string(b), `"`)
}

// TestServeBatchKeepsTheOrderBehindAFullQueue: behind a delivery the queue has no room for,
// the rest of the batch is not dispatched (503 too), even what would have coalesced: the front
// hands them over again in their order, and none is counted before it is taken.
func TestServeBatchKeepsTheOrderBehindAFullQueue(t *testing.T) {
	t.Parallel()
	job := newJobSide(t, 1)
	_, err := job.queue.Push(webhook.Job{Kind: webhook.KindDrift, Repo: "acme/cluster-a"})
	require.NoError(t, err)
	item := func(id, repo string) FrontDelivery {
		body := driftBody(repo, 1)
		return FrontDelivery{ID: id, Event: "pull_request", Signature: sign(testSecret, body), Body: []byte(body)}
	}
	answers := job.disp.dispatchBatch(context.Background(), &Batch{Deliveries: []FrontDelivery{
		item("1", "acme/cluster-b"), // needs room: none
		item("2", "acme/cluster-a"), // would coalesce into the waiting job
	}})
	require.Len(t, answers, 2)
	assert.Equal(t, http.StatusServiceUnavailable, answers[0].Status)
	assert.Equal(t, http.StatusServiceUnavailable, answers[1].Status, "not dispatched ahead of the first")
	assert.Zero(t, job.deliveries(t, "pull_request", metrics.OutcomeCoalesced))
	assert.Equal(t, 1, job.queue.Len())
}

// TestFrontSendsNoEmptyBatch: with nothing held and no refusal to report, handing over sends
// nothing (a wake whose delivery an earlier batch took must not post an empty batch, which
// would count as no progress and put the forwarder into its backoff).
func TestFrontSendsNoEmptyBatch(t *testing.T) {
	t.Parallel()
	var posts atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		posts.Add(1)
		_, _ = w.Write([]byte("[]"))
	}))
	t.Cleanup(ts.Close)
	f := newTestFront(t, ts.URL, 10, nil)
	progress, err := f.forwardOnce(context.Background())
	require.NoError(t, err)
	assert.True(t, progress, "nothing to do is not a failure")
	assert.Zero(t, posts.Load())
}
