package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// WebhookOptions shape the webhook measurement.
type WebhookOptions struct {
	// Rate is deliveries per second, for Duration.
	Rate     int
	Duration time.Duration
	// Repos is the number of target repos events are spread over.
	Repos int
	// Apply, Drift and Check are how long the simulated jobs take (the
	// executor sleeps: the measurement is of the service, not of GitHub).
	Apply, Drift, Check time.Duration
}

// WebhookResult is the webhook service under a steady stream of signed
// deliveries.
type WebhookResult struct {
	Rate       int
	Deliveries int
	// P50, P99 and Max are acknowledgement latencies seen by the sender
	// (request written to response headers read, over loopback HTTP).
	P50, P99, Max time.Duration
	// Statuses counts responses by HTTP status.
	Statuses map[int]int
	// Jobs counts the jobs the pool ran, by kind; JobsRun is their sum.
	Jobs    map[string]int
	JobsRun int
	// Ignored is the deliveries that needed no work (fleetbot's own events,
	// other branches).
	Ignored int
	// Apply, Drift, Check echo the simulated job durations.
	Apply, Drift, Check time.Duration
}

// countingExecutor sleeps for the job's simulated duration and counts it.
type countingExecutor struct {
	o    WebhookOptions
	mu   sync.Mutex
	jobs map[string]int
}

func (e *countingExecutor) Execute(ctx context.Context, j webhook.Job) error {
	d := e.o.Drift
	switch j.Kind {
	case webhook.KindApply:
		d = e.o.Apply
	case webhook.KindCheck:
		d = e.o.Check
	}
	e.mu.Lock()
	e.jobs[string(j.Kind)]++
	e.mu.Unlock()
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// delivery is one event to send.
type delivery struct {
	event string
	body  []byte
}

// deliveries returns a realistic stream during a busy fan-out: humans
// merging fleetbot's PRs (pull_request closed, then a push to the default
// branch, on target repos), pushes and PR updates on the control repo, and
// fleetbot's own events echoed back (ignored).
func deliveries(n, repos int, rng *rand.Rand) []delivery {
	out := make([]delivery, n)
	for i := range out {
		target := fmt.Sprintf("acme/cluster-%d", rng.IntN(repos))
		switch r := rng.IntN(100); {
		case r < 40:
			out[i] = delivery{"pull_request", fmt.Appendf(nil, `{"action":"closed","number":%d,"pull_request":{"number":%d,"merged":true},"repository":{"full_name":%q,"default_branch":"main"},"sender":{"login":"alice"}}`, 1+i%7, 1+i%7, target)}
		case r < 75:
			out[i] = delivery{"push", fmt.Appendf(nil, `{"ref":"refs/heads/main","after":"%040x","repository":{"full_name":%q,"default_branch":"main"},"sender":{"login":"alice"}}`, i, target)}
		case r < 80:
			out[i] = delivery{"push", fmt.Appendf(nil, `{"ref":"refs/heads/main","after":"%040x","repository":{"full_name":"acme/control","default_branch":"main"},"sender":{"login":"bob"}}`, i)}
		case r < 85:
			out[i] = delivery{"pull_request", fmt.Appendf(nil, `{"action":"synchronize","number":%d,"pull_request":{"number":%d,"head":{"sha":"%040x"},"base":{"sha":"%040x"},"user":{"login":"bob"}},"repository":{"full_name":"acme/control","default_branch":"main"},"sender":{"login":"bob"}}`, 100+i%3, 100+i%3, i, 1)}
		default:
			out[i] = delivery{"pull_request", fmt.Appendf(nil, `{"action":"opened","number":1,"pull_request":{"number":1},"repository":{"full_name":%q,"default_branch":"main"},"sender":{"login":"fleetbot[bot]"}}`, target)}
		}
	}
	return out
}

// Webhook sends o.Rate signed deliveries per second for o.Duration to the
// webhook service's HTTP handler (dispatcher, handlers, queue, a pool of
// workers running a sleeping executor) over loopback HTTP, open-loop (each
// delivery at its scheduled time, whatever the earlier ones are doing), and
// measures acknowledgement latency and how many jobs the deliveries became.
func Webhook(ctx context.Context, o WebhookOptions) (*WebhookResult, error) {
	secret := []byte("bench-secret")
	m := metrics.New()
	q := webhook.NewQueue(webhook.DefaultQueueSize)
	disp, err := webhook.NewDispatcher(webhook.DispatcherConfig{Secret: secret, Metrics: m},
		webhook.Handlers(webhook.HandlerConfig{Control: "acme/control", Self: "fleetbot[bot]", AppID: 1, Queue: q})...)
	if err != nil {
		return nil, err
	}
	srv := webhook.NewServer(m)
	srv.SetDispatcher(disp)
	srv.SetReady(nil)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	exec := &countingExecutor{o: o, jobs: map[string]int{}}
	pool := &webhook.Pool{Queue: q, Exec: exec}
	pctx, stop := context.WithCancel(ctx)
	poolDone := make(chan error, 1)
	go func() { poolDone <- pool.Run(pctx) }()

	n := int(float64(o.Rate) * o.Duration.Seconds())
	evs := deliveries(n, o.Repos, rand.New(rand.NewPCG(7, 7)))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0}, Timeout: 30 * time.Second}
	lat := make([]time.Duration, n)
	status := make([]int, n)
	var failed atomic.Int64
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(o.Rate)
	start := time.Now()
	for i, ev := range evs {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			mac := hmac.New(sha256.New, secret)
			mac.Write(ev.body)
			req, _ := http.NewRequest(http.MethodPost, hs.URL+"/webhook", bytes.NewReader(ev.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", ev.event)
			req.Header.Set("X-GitHub-Delivery", fmt.Sprintf("bench-%d", i))
			req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
			t := time.Now()
			resp, err := client.Do(req)
			lat[i] = time.Since(t)
			if err != nil {
				failed.Add(1)
				return
			}
			status[i] = resp.StatusCode
			_ = resp.Body.Close()
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		stop()
		return nil, fmt.Errorf("%d of %d deliveries failed", f, n)
	}
	// Let the queue drain, then stop the pool.
	for deadline := time.Now().Add(2*o.Apply + 10*time.Second); (q.Len() > 0 || q.Running() > 0) && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-poolDone; err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}

	res := &WebhookResult{Rate: o.Rate, Deliveries: n, Statuses: map[int]int{}, Jobs: exec.jobs,
		Apply: o.Apply, Drift: o.Drift, Check: o.Check}
	for _, s := range status {
		res.Statuses[s]++
	}
	for _, c := range exec.jobs {
		res.JobsRun += c
	}
	for _, ev := range evs {
		if bytes.Contains(ev.body, []byte(`"fleetbot[bot]"`)) {
			res.Ignored++
		}
	}
	slices.Sort(lat)
	res.P50, res.P99, res.Max = lat[n/2], lat[n*99/100], lat[n-1]
	return res, nil
}
