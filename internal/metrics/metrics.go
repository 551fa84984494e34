// Package metrics holds the Prometheus metrics of the webhook service
// (fleetbot serve): webhook deliveries, the job queue, job latency,
// reconcile outcomes per repo and GitHub requests. The registry is built by
// the caller with New and never shared with Prometheus' global default, so
// tests and several services in one process do not collide.
//
// Every method is safe on a nil *Metrics, which records nothing: packages
// that report metrics do not need a special case when there are none.
package metrics

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Namespace prefixes every fleetbot metric.
const Namespace = "fleetbot"

// Delivery outcomes, the "outcome" label of fleetbot_webhook_deliveries_total.
const (
	// OutcomeQueued: a new job was queued.
	OutcomeQueued = "queued"
	// OutcomeCoalesced: merged into a job already waiting for the same target.
	OutcomeCoalesced = "coalesced"
	// OutcomeIgnored: a handled event type whose action, branch, repo or
	// sender needs no work (fleetbot's own events, say).
	OutcomeIgnored = "ignored"
	// OutcomeObserved: the delivery updated the stored report of one target repo (the status
	// pages: Flux's commit status, a push to the bot branch); no job.
	OutcomeObserved = "observed"
	// OutcomeUnhandled: an event type fleetbot has no handler for (202).
	OutcomeUnhandled = "unhandled"
	// OutcomeDuplicate: a delivery id seen before; done once.
	OutcomeDuplicate = "duplicate"
	// OutcomeBadSignature: missing or wrong X-Hub-Signature-256 (401).
	OutcomeBadSignature = "bad_signature"
	// OutcomeTooLarge: body over the size cap (413).
	OutcomeTooLarge = "too_large"
	// OutcomeBusy: too many deliveries being read and verified at once (503; GitHub does not
	// redeliver it by itself: serve's pass over the App's delivery log asks for it).
	OutcomeBusy = "busy"
	// OutcomeBadRequest: not a POST, no event header or an unparsable payload (400).
	OutcomeBadRequest = "bad_request"
	// OutcomeQueueFull: the queue was full (503); the next resync catches up.
	OutcomeQueueFull = "queue_full"
	// OutcomeNotReady: the service was not connected to GitHub yet (503).
	OutcomeNotReady = "not_ready"
)

// Outcome bounds an outcome reported by another process (serve's front, --job-process) to the
// outcomes above; anything else is "other".
func Outcome(o string) string {
	switch o {
	case OutcomeQueued, OutcomeCoalesced, OutcomeIgnored, OutcomeObserved, OutcomeUnhandled, OutcomeDuplicate, OutcomeBadSignature,
		OutcomeTooLarge, OutcomeBusy, OutcomeBadRequest, OutcomeQueueFull, OutcomeNotReady, "error":
		return o
	}
	return "other"
}

// Metrics are the service's collectors on their own registry.
type Metrics struct {
	registry *prometheus.Registry

	deliveries *prometheus.CounterVec
	ack        prometheus.Histogram
	front      prometheus.Gauge
	jobWait    *prometheus.HistogramVec
	jobRun     *prometheus.HistogramVec
	reconciles *prometheus.CounterVec

	mu      sync.Mutex
	sources []GitHubSource
}

// New returns Metrics registered on a new registry, with the Go runtime and
// process collectors beside them.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "webhook", Name: "deliveries_total",
			Help: "Webhook deliveries received, by X-GitHub-Event (the events fleetbot subscribes to, else other) and outcome (queued, coalesced, ignored, observed, unhandled, duplicate, bad_signature, too_large, bad_request, queue_full, busy, not_ready).",
		}, []string{"event", "outcome"}),
		ack: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "webhook", Name: "ack_seconds",
			Help:    "Time from reading a delivery's headers to answering it.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .5},
		}),
		front: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "webhook", Name: "front_buffered",
			Help: "Deliveries acknowledged by serve's front and not yet handed to its job process (--job-process; 0 without it), as of the front's last batch.",
		}),
		jobWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "job", Name: "wait_seconds",
			Help:    "Time a job waited in the queue, from its first delivery to a worker taking it.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900},
		}, []string{"kind"}),
		jobRun: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "job", Name: "duration_seconds",
			Help:    "Time a worker spent on a job, by kind (apply, drift, check) and outcome (ok, error, panic, canceled).",
			Buckets: []float64{.01, .05, .1, .5, 1, 2, 5, 10, 30, 60, 120, 300, 900},
		}, []string{"kind", "outcome"}),
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "reconcile", Name: "outcomes_total",
			Help: "Target repo reconciles by outcome (the pr action: noop, cleanup, open, update, close, create, remove, blocked; or failed, deferred, skipped: the same words as the plan and apply outputs). Per-repo detail is in the logs: a label per repo would be unbounded at thousands of repos.",
		}, []string{"outcome"}),
	}
	m.registry.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.deliveries, m.ack, m.front, m.jobWait, m.jobRun, m.reconciles,
		newGitHubCollector(m),
	)
	return m
}

// Registry returns the registry, to register more collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Delivery counts one webhook delivery. The event label is one of the events fleetbot
// subscribes to, "none" or "other": the header comes from whoever sent the request, signed or
// not, and must not grow the label set.
func (m *Metrics) Delivery(event, outcome string) {
	if m == nil {
		return
	}
	m.deliveries.WithLabelValues(EventLabel(event), outcome).Inc()
}

// EventLabel bounds an X-GitHub-Event value to a fixed set: the events fleetbot subscribes to
// (app.yml), "ping", "none" for an empty one, and "other". A label passes through unchanged
// (serve's front reports its refusals to the job process by label).
func EventLabel(event string) string {
	switch event {
	case "", "none":
		return "none"
	case "push", "pull_request", "check_run", "check_suite", "installation", "installation_repositories",
		"repository", "member", "membership", "team", "team_add", "branch_protection_rule", "repository_ruleset", "status", "ping":
		return event
	}
	return "other"
}

// Ack records how long answering a delivery took.
func (m *Metrics) Ack(d time.Duration) {
	if m == nil {
		return
	}
	m.ack.Observe(d.Seconds())
}

// FrontBuffered records how many deliveries serve's front holds for the job process.
func (m *Metrics) FrontBuffered(n int) {
	if m == nil {
		return
	}
	m.front.Set(float64(n))
}

// JobStarted records how long a job of kind waited in the queue.
func (m *Metrics) JobStarted(kind string, wait time.Duration) {
	if m == nil {
		return
	}
	m.jobWait.WithLabelValues(kind).Observe(wait.Seconds())
}

// JobDone records a finished job.
func (m *Metrics) JobDone(kind, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.jobRun.WithLabelValues(kind, outcome).Observe(d.Seconds())
}

// Reconciled counts the outcome of one target repo's reconcile (the repo goes to the logs).
func (m *Metrics) Reconciled(outcome string) {
	if m == nil {
		return
	}
	m.reconciles.WithLabelValues(outcome).Inc()
}

// QueueDepth exports depth, called at scrape time, as fleetbot_queue_depth, deepest as
// fleetbot_queue_depth_max and inFlight as fleetbot_jobs_in_flight. Call it once per Metrics.
func (m *Metrics) QueueDepth(depth, deepest, inFlight func() int) error {
	if m == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "queue", Name: "depth",
			Help: "Jobs waiting in the queue (after coalescing).",
		}, func() float64 { return float64(depth()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "queue", Name: "depth_max",
			Help: "The most jobs that have waited in the queue at once since the process started (how close it came to --queue-size, beyond which deliveries are refused); exact where sampling fleetbot_queue_depth misses short peaks.",
		}, func() float64 { return float64(deepest()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "jobs", Name: "in_flight",
			Help: "Jobs being worked on.",
		}, func() float64 { return float64(inFlight()) }),
	} {
		if err := m.registry.Register(c); err != nil {
			return fmt.Errorf("registering queue metrics: %w", err)
		}
	}
	return nil
}

// GitHubStats are the counters of one GitHub client, read at scrape time.
type GitHubStats struct {
	// Reads (including NotModified), Writes (including ContentWrites),
	// ContentWrites, NotModified and Errors (no HTTP response) count requests
	// that reached the network.
	Reads, Writes, ContentWrites, NotModified, Errors int64
	// RateRemaining is the last x-ratelimit-remaining seen, -1 if none yet.
	RateRemaining int64
}

// GitHubSource names a GitHub client and reads its counters.
type GitHubSource struct {
	// Client is the "client" label: which credentials or role (app, write, read-only).
	Client string
	Stats  func() GitHubStats
}

// GitHub exports the request counters and rate-limit headroom of a client.
func (m *Metrics) GitHub(src GitHubSource) {
	if m == nil || src.Stats == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sources = append(m.sources, src)
}

func newGitHubCollector(m *Metrics) *githubCollector {
	return &githubCollector{
		m: m,
		requests: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "github", "requests_total"),
			"GitHub requests that reached the network, by client and class: read (incl. not_modified), write (incl. content), "+
				"content (content-creating writes, 80/min and 500/h on github.com), not_modified (free 304s), error (no response).",
			[]string{"client", "class"}, nil),
		remaining: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "github", "rate_limit_remaining"),
			"The last x-ratelimit-remaining GitHub sent to the client.",
			[]string{"client"}, nil),
	}
}

// githubCollector reads the registered GitHub clients at scrape time.
type githubCollector struct {
	m                   *Metrics
	requests, remaining *prometheus.Desc
}

func (c *githubCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.remaining
}

func (c *githubCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.mu.Lock()
	sources := append([]GitHubSource(nil), c.m.sources...)
	c.m.mu.Unlock()
	for _, src := range sources {
		s := src.Stats()
		for class, v := range map[string]int64{
			"read": s.Reads, "write": s.Writes, "content": s.ContentWrites, "not_modified": s.NotModified, "error": s.Errors,
		} {
			ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(v), src.Client, class)
		}
		if s.RateRemaining >= 0 {
			ch <- prometheus.MustNewConstMetric(c.remaining, prometheus.GaugeValue, float64(s.RateRemaining), src.Client)
		}
	}
}
