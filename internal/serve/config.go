// Package serve is the composition root of fleetbot serve, the GitHub App webhook service: New
// builds the service from one resolved Config (metrics, the HTTP routes, the job queue, the
// rollout watch, the /status pages) and Server.Run connects to GitHub, wires the webhook
// service, its dispatcher and handlers, the worker pool and the resync loop, and serves until
// its context is done. cmd/bot only parses flags and environment into a Config.
package serve

import (
	"context"
	"log/slog"
	"net"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// Config is serve's resolved configuration.
type Config struct {
	// Listener is where serve answers (/webhook, /healthz, /readyz, /metrics, /status); the
	// caller binds it, so that it can tell the address before Run.
	Listener net.Listener
	// Control is the control repo "owner/name".
	Control string
	// Secret is the webhook secret.
	Secret []byte
	// App is the application configuration: GitHub API URL, App credentials, write budget,
	// Git URL and snapshot cache, the same as the CLI's and the Action's for the same host, and
	// what its Runner runs with: the per-run concurrency, this replica's share of the target
	// repos (App.Shard, docs/scale-out.md) and fleetbot's version, which salts the baselines.
	App app.Config

	Resync time.Duration
	// DriftDelay is how long a drift job waits for others to batch with (jobqueue.Config).
	DriftDelay time.Duration
	Workers    int
	QueueSize  int
	MaxBody    int64
	Grace      time.Duration
	CheckName  string
	// TenantCheck names the check run serve posts on the pull requests of workspace and
	// cluster repos and requires from its App on their protection; "" turns it off.
	TenantCheck string
	// JobProcess: this is the job process of serve --job-process, which also takes the
	// front's batches (ingress.BatchPath) on its loopback listener.
	JobProcess bool
	// StuckCheck is how long a control pull request's check run may stay in_progress before
	// a resync runs the check again (0: webhook.DefaultStuckCheck).
	StuckCheck time.Duration
	// Redeliver is how often serve reads the App's webhook delivery log and asks GitHub to
	// redeliver the deliveries that failed (0: DefaultRedeliverInterval; negative: never);
	// MaxRedeliveries bounds one pass (0: ghforge.DefaultMaxRedeliveries).
	Redeliver       time.Duration
	MaxRedeliveries int
	// StepRepos bounds the target repos one step of a full apply plans (0:
	// webhook.DefaultStepRepos).
	StepRepos int
	// OnRedeliveryPass, when set, is called after each pass over the delivery log (tests wait
	// on it).
	OnRedeliveryPass func(asked []string, err error)
	// Replicas, when set, makes serve one of several replicas on Kubernetes Leases: membership,
	// a leader for the single jobs, target repos shared among the live replicas, deliveries
	// forwarded to their owner, the content budget divided (docs/scale-out.md). nil: one replica,
	// no Kubernetes access.
	Replicas *Replicas

	// Status configures the /status pages (off unless Status.Enabled).
	Status StatusPages
	// HealthKeys is the directory of the clusters' health keys (a Secret mounted as a volume:
	// one file per cluster, one key a line): with it serve takes health events on
	// HealthPath (spec.rollout.health.provider: generic-hmac); "" turns that off.
	HealthKeys string

	Logger *slog.Logger
	// HTTP bounds the connections and the time of each request (zero values: the defaults).
	HTTP HTTPLimits
	// BeforeJob runs before every job (tests inject faults with it).
	BeforeJob func(ctx context.Context, j webhook.Job) error
	// AfterJob runs after every job, once it is logged, counted in the metrics and no longer
	// running (tests wait on it, not on time).
	AfterJob func(j webhook.Job)
	// OnReady is called once the service is ready (tests wait on it).
	OnReady func()
	// Clock is the rollout gate's time and schedules its wake-ups (nil: the wall clock;
	// tests inject a fake one).
	Clock jobqueue.Clock
}

// StatusPages is the resolved configuration of the /status pages.
type StatusPages struct {
	Enabled  bool
	Token    []byte
	Insecure bool
	GroupBy  app.StatusGrouper
}
