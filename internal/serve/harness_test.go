package serve_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/serve"
	"github.com/fleetbot-io/fleetbot/internal/serve/servetest"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

const serveSecret = "webhook-secret-for-tests"

// serveEnv is a fake GitHub holding acme/control (the example control repo)
// and a running fleetbot serve wired to it, as in production: real
// dispatcher, queue, workers, GitHub forge and App authentication.
type serveEnv struct {
	t       *testing.T
	gh      *githubtest.Server
	url     string
	targets []string // target repo names
	jobs    atomic.Int64
	gate    gate
	stop    func() // stops serve and waits for it; idempotent
	// wake signals what serve does: every record it logs (from Info up), every job started
	// and finished; waiter wakes on it and on the fake GitHub's changes (eventually).
	wake   servetest.Signal
	waiter *servetest.Waiter
}

type serveOptions struct {
	webhooks  bool          // the fake delivers push and pull_request events itself
	resync    time.Duration // default one hour: only the startup resync
	maxBody   int64
	beforeJob func(j webhook.Job)                     // runs after the gate, inside the job
	grace     time.Duration                           // shutdown grace (default 5s)
	reuse     *serveEnv                               // run against this env's fake GitHub instead of a new one
	status    serve.StatusPages                       // the /status pages (off by default)
	cacheDir  string                                  // the snapshot cache and baseline ("" keeps them in memory)
	ghOptions []githubtest.Option                     // more options of a new fake GitHub
	clock     func(*githubtest.Server) jobqueue.Clock // serve's clock on the fake GitHub (nil: the wall clock)
	// editControl, when set, edits the files of acme/control before the fake holds them.
	editControl func(files map[string]string)
	// tenantCheck is serve --tenant-check ("": off, as these tests ran before the tenant check;
	// serve_tenant_test.go turns it on).
	tenantCheck string
	// healthKeys is serve --health-keys ("": no /health endpoint).
	healthKeys string
}

// gate holds every job at its start while closed.
type gate struct {
	mu sync.Mutex
	ch chan struct{} // nil: open
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ch = make(chan struct{})
}

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}

func (g *gate) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func startServe(t *testing.T, o serveOptions) *serveEnv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	e := &serveEnv{t: t, url: "http://" + ln.Addr().String()}
	if o.reuse != nil {
		e.gh, e.targets = o.reuse.gh, o.reuse.targets
	} else {
		e.newGitHub(o.webhooks, o.editControl, o.ghOptions...)
	}
	resync := o.resync
	if resync == 0 {
		resync = time.Hour
	}
	grace := o.grace
	if grace == 0 {
		grace = 5 * time.Second
	}
	e.waiter = servetest.NewWaiter(t, e.gh.Changed, e.wake.C)
	ready := make(chan struct{})
	var logs slog.Handler // nil: discarded
	if testing.Verbose() && os.Getenv("FLEETBOT_SERVE_LOGS") != "" {
		logs = slog.NewJSONHandler(os.Stderr, nil)
	}
	logger := slog.New(e.wake.Handler(logs))
	cfg := serve.Config{
		Control: "acme/control", Secret: []byte(serveSecret),
		App: app.Config{Forge: app.ForgeGitHub, GitURL: e.gh.URL, CacheDir: o.cacheDir, Logger: logger,
			GitHub: ghforge.Config{APIURL: e.gh.APIURL(), AppID: e.gh.AppID(), PrivateKey: e.gh.AppPrivateKeyPEM(),
				Budget: ghforge.BudgetConfig{PerMinute: 100000, PerHour: 1000000, MinInterval: -1}}},
		Resync: resync, Workers: 4, QueueSize: 100, MaxBody: o.maxBody, Grace: grace,
		CheckName: checkrun.DefaultCheckName, TenantCheck: o.tenantCheck, Logger: logger, Status: o.status, HealthKeys: o.healthKeys,
		BeforeJob: func(ctx context.Context, j webhook.Job) error {
			if err := e.gate.wait(ctx); err != nil {
				return err
			}
			e.jobs.Add(1)
			if o.beforeJob != nil {
				o.beforeJob(j)
			}
			e.wake.Notify()
			return nil
		},
		AfterJob: func(webhook.Job) { e.wake.Notify() },
		OnReady:  func() { close(ready) },
	}
	if o.clock != nil {
		cfg.Clock = o.clock(e.gh)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, cfg, ln) }()
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			e.gate.open()
			cancel()
			// A serve that never returns is a hang: go test -timeout names it with every stack.
			assert.NoError(t, <-done, "serve returned")
		})
	}
	t.Cleanup(e.stop)
	select {
	case <-ready:
	case err := <-done: // never ready is a hang, for go test -timeout
		t.Fatalf("serve stopped before ready: %v", err)
	}
	return e
}

// newGitHub starts a fake GitHub with the org, the teams and acme/control
// holding the example control repo (edited by edit when set).
func (e *serveEnv) newGitHub(webhooks bool, edit func(map[string]string), more ...githubtest.Option) {
	ghOpts := more
	if webhooks {
		ghOpts = append(ghOpts, githubtest.WithWebhook(e.url+"/webhook", serveSecret))
	}
	e.gh, e.targets = servetest.NewGitHub(e.t, exampleControl, edit, ghOpts...)
}

// get fetches a path of the service.
func (e *serveEnv) get(path string) (int, string) {
	e.t.Helper()
	return servetest.Get(e.t, e.url+path)
}

// metric returns the value of one series ("name{labels}" as exposed), 0 if absent.
func (e *serveEnv) metric(series string) float64 {
	e.t.Helper()
	return servetest.Metric(e.t, e.url, series)
}

// eventually returns once cond holds, re-checking it on every event that may change it: a
// change of the fake GitHub (a write answered, a webhook delivered, its clock advanced), a
// record serve logs, a job started or finished. It never sleeps; near the test's deadline it
// fails naming what.
func (e *serveEnv) eventually(what string, cond func() bool) {
	e.t.Helper()
	e.waiter.Eventually(what, cond)
}

func (e *serveEnv) waitMetric(series string, atLeast float64) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s >= %v", series, atLeast), func() bool { return e.metric(series) >= atLeast })
}

// idle waits until no job waits or runs.
func (e *serveEnv) idle() {
	e.t.Helper()
	e.eventually("an idle queue", func() bool {
		return e.metric("fleetbot_queue_depth") == 0 && e.metric("fleetbot_jobs_in_flight") == 0
	})
}

// ackQuantile returns the upper bound of the ack-latency histogram bucket
// holding quantile q.
func (e *serveEnv) ackQuantile(q float64) float64 {
	e.t.Helper()
	_, body := e.get("/metrics")
	total := e.metric("fleetbot_webhook_ack_seconds_count")
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, `fleetbot_webhook_ack_seconds_bucket{le="`)
		if !ok {
			continue
		}
		le, count, _ := strings.Cut(rest, `"} `)
		c, err := strconv.ParseFloat(count, 64)
		require.NoError(e.t, err, line)
		if c >= q*total {
			if le == "+Inf" {
				return math.Inf(1)
			}
			v, err := strconv.ParseFloat(le, 64)
			require.NoError(e.t, err, line)
			return v
		}
	}
	return math.Inf(1)
}

const appliedOK = `fleetbot_job_duration_seconds_count{kind="apply",outcome="ok"}`

// deliver posts a delivery signed with secret ("" leaves it unsigned) and
// returns the status.
func (e *serveEnv) deliver(event, id string, body []byte, secret string) int {
	e.t.Helper()
	return servetest.Deliver(e.t, e.url, event, id, body, secret)
}

func encodeJSON(t *testing.T, v any) []byte {
	t.Helper()
	return servetest.JSON(t, v)
}

func edge1(rangeValue string) map[string]string {
	return map[string]string{"clusters/edge-1.yaml": `apiVersion: fleetbot.io/v1alpha1
kind: Cluster
metadata:
  name: edge-1
  labels: {env: prod, network: metal}
spec:
  values:
    metallb_range: ` + rangeValue + `
    metallb_speaker_tolerations: "true"
`}
}

// writesTo counts fleetbot's write requests (any class but Read) per repo
// in the fake's log, App token minting aside.
func writesTo(reqs []githubtest.Request) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		if r.Class == githubtest.Read || strings.HasPrefix(r.Route, "POST /app/") || r.Principal == githubtest.DefaultUser {
			continue
		}
		parts := strings.Split(strings.TrimPrefix(r.Path, "/api/v3"), "/")
		if len(parts) > 3 && parts[1] == "repos" {
			out[parts[2]+"/"+parts[3]]++
		} else {
			out[r.Route]++
		}
	}
	return out
}

// runServe runs serve on ln until ctx is done, as fleetbot serve does (serve.New, Server.Run).
func runServe(ctx context.Context, cfg serve.Config, ln net.Listener) error {
	cfg.Listener = ln
	srv, err := serve.New(cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
}
