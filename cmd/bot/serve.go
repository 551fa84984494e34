package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetbot-io/fleetbot/internal/app"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubapi"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// Defaults of fleetbot serve.
const (
	DefaultListen = ":8080"
	// connectBackoffMax caps the wait between attempts to reach GitHub at startup.
	connectBackoffMax = 30 * time.Second
)

// serveConfig is serve's resolved configuration.
type serveConfig struct {
	// Control is the control repo "owner/name".
	Control string
	// Secret is the webhook secret.
	Secret []byte
	// App is the application configuration: GitHub API URL, App credentials, write budget,
	// Git URL and snapshot cache, the same as the CLI's and the Action's for the same host.
	App app.Config

	Resync time.Duration
	// DriftDelay is how long a drift job waits for others to batch with (webhook.QueueConfig).
	DriftDelay  time.Duration
	Workers     int
	QueueSize   int
	MaxBody     int64
	Grace       time.Duration
	Concurrency int
	CheckName   string
	// TenantCheck names the check run serve posts on the pull requests of workspace and
	// cluster repos and requires from its App on their protection; "" turns it off.
	TenantCheck string
	// JobProcess: this is the job process of serve --job-process, which also takes the
	// front's batches (webhook.BatchPath) on its loopback listener.
	JobProcess bool
	// Shard is this replica's share of the target repos (docs/scale-out.md).
	Shard app.Shard

	// Status configures the /status pages (off unless Status.Enabled).
	Status statusPageConfig

	Logger *slog.Logger
	// HTTP bounds the connections and the time of each request (zero values: the defaults).
	HTTP httpLimits
	// BeforeJob runs before every job (tests inject faults with it).
	BeforeJob func(ctx context.Context, j webhook.Job) error
	// OnReady is called once the service is ready (tests wait on it).
	OnReady func()
	// Clock is the rollout gate's time and schedules its wake-ups (nil: the wall clock;
	// tests inject a fake one).
	Clock webhook.Clock
}

// serveFlags are serve's own flags; each has a FLEETBOT_* variable.
type serveFlags struct {
	listen, control, secretFile, gitURL, checkName, shard, listenFile string
	tenantCheck                                                       string
	resync, grace, driftDelay                                         time.Duration
	workers, queueSize, concurrency                                   int
	maxBody                                                           int64
	// jobProcess: run the jobs in a child process (serve_front.go); jobNice is its priority
	// drop; jobListenerFD > 0 makes this process that child.
	jobProcess             bool
	jobNice, jobListenerFD int
	status                 statusPageFlags
	http                   httpLimits
}

func (a *frontend) serveCommand() *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --control-repo OWNER/NAME --webhook-secret-file FILE",
		Short: "Run the GitHub App webhook service: apply on push, plan check runs on control pull requests, fix drift",
		Long: `serve runs fleetbot as a GitHub App webhook service. It answers
POST /webhook within milliseconds and queues the work:

  push to the control repo's default branch     apply every target repo
  control pull request opened/synchronize/      a "fleetbot plan" check run
    reopened, or its check run re-run             (read-only for target repos)
  workspace or cluster repo pull request        a "fleetbot tenant" check run
    opened/synchronize/reopened (fleetbot's       (check workspace / check cluster
    own too), or its check run re-run             on the head; their protection
                                                  requires it from this App)
  installation, installation_repositories       full resync
  on a target repo: pull_request closed, push   reconcile that repo (drift)
    to the default branch, repository, member,
    team, branch_protection_rule
  rollout waves: Flux status, pull_request      apply every target repo (next
    closed on a cluster repo, a soak's end        wave; "fleetbot rollout" check)

Jobs coalesce per target (a burst of pushes is one apply, on the newest
commit), duplicate deliveries are done once, and a full resync runs every
--resync-interval to catch missed deliveries. GET /healthz, GET /readyz and
GET /metrics (Prometheus) serve operations. Logs are JSON lines. With
--status, GET /status shows the fleet (built from the service's own last
applies, no GitHub request), behind a bearer token (--status-token-file) or,
behind an authenticating ingress only, --status-insecure-no-auth.

Every flag can come from the environment as FLEETBOT_<FLAG> (for example
FLEETBOT_CONTROL_REPO, FLEETBOT_WEBHOOK_SECRET_FILE); the App credentials
from FLEETBOT_APP_ID and FLEETBOT_APP_KEY_FILE, GitHub Enterprise from
GITHUB_API_URL. The webhook secret may also be given as FLEETBOT_WEBHOOK_SECRET.`,
		Example: `  fleetbot serve --control-repo acme/fleet-control --app-id 123456 --app-key private-key.pem \
      --webhook-secret-file webhook-secret --listen :8080
  # with the status page at /status behind a bearer token
  fleetbot serve --control-repo acme/fleet-control --webhook-secret-file webhook-secret --status --status-token-file status-token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagsFromEnv(cmd.Flags(), append([]string{"listen", "listen-file", "control-repo", "webhook-secret-file", "git-url", "check-name",
				"tenant-check", "resync-interval", "shutdown-grace", "drift-delay", "workers", "queue-size", "concurrency", "max-body", "log-level", "shard",
				"status", "status-token-file", "status-insecure-no-auth", "status-group-by", "job-process", "job-nice"}, limitFlags...)...); err != nil {
				return err
			}
			if !cmd.Flags().Changed("log-level") {
				a.logLevel = "info"
			}
			a.logJSON = true
			log, err := a.logger()
			if err != nil {
				return err
			}
			cfg, err := a.serveConfig(&f, log)
			if err != nil {
				return err
			}
			if f.jobListenerFD > 0 {
				return serveJobProcess(cmd.Context(), cfg, f.jobListenerFD, f.jobNice)
			}
			ln, err := net.Listen("tcp", f.listen)
			if err != nil {
				return fmt.Errorf("--listen %s: %w", f.listen, err)
			}
			log.Info("fleetbot serve listening", "addr", ln.Addr().String(), "control", cfg.Control, "version", version, "limits", cfg.HTTP.String())
			if f.listenFile != "" {
				if err := writeFileAtomic(f.listenFile, ln.Addr().String()+"\n"); err != nil {
					_ = ln.Close()
					return fmt.Errorf("--listen-file: %w", err)
				}
			}
			if f.jobProcess {
				return serveFront(cmd.Context(), cfg, f.jobNice, ln)
			}
			return serve(cmd.Context(), cfg, ln)
		},
	}
	f.register(cmd.Flags())
	return cmd
}

// register defines serve's own flags on fs.
func (f *serveFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.listen, "listen", DefaultListen, "address to serve /webhook, /healthz, /readyz and /metrics on")
	fs.StringVar(&f.listenFile, "listen-file", "", "once listening, write the address (HOST:PORT) to this file; with --listen 127.0.0.1:0 the port is a free one")
	fs.StringVar(&f.control, "control-repo", "", "the control repo on GitHub, OWNER/NAME")
	fs.StringVar(&f.secretFile, "webhook-secret-file", "", "file holding the GitHub App's webhook secret")
	fs.StringVar(&f.gitURL, "git-url", "", "web root of the GitHub host, for Flux GitRepository URLs (default: from GITHUB_API_URL, else https://github.com)")
	fs.StringVar(&f.checkName, "check-name", webhook.DefaultCheckName, "name of the check run on control-repo pull requests")
	fs.StringVar(&f.tenantCheck, "tenant-check", webhook.DefaultTenantCheckName, "name of the check run on every pull request of a workspace or cluster repo (check workspace / check cluster on its head), which their branch protection requires from this App; '' turns the check and the requirement off")
	positiveDurationVar(fs, &f.resync, "resync-interval", webhook.DefaultResyncInterval, "how often to reconcile every target repo without a webhook")
	positiveDurationVar(fs, &f.grace, "shutdown-grace", webhook.DefaultGrace, "how long in-flight jobs may finish on shutdown")
	delayVar(fs, &f.driftDelay, "drift-delay", webhook.DefaultDriftDelay, "how long a drift reconcile waits after its first event for the drifts of other repos to join its batch (one GraphQL read per 100 repos instead of requests per repo); 0 starts each at once")
	minIntVar(fs, &f.workers, "workers", webhook.DefaultWorkers, 1, "jobs worked on at once")
	minIntVar(fs, &f.queueSize, "queue-size", webhook.DefaultQueueSize, 1, "distinct jobs that may wait; deliveries beyond are refused with 503")
	minIntVar(fs, &f.concurrency, "concurrency", app.DefaultConcurrency, 1, "target repos one job works on at once")
	minInt64Var(fs, &f.maxBody, "max-body", webhook.DefaultMaxBody, 1, "largest webhook body accepted, in bytes (413 beyond)")
	fs.BoolVar(&f.jobProcess, "job-process", false, "run the jobs in a child process at a lower CPU priority, this process only acknowledging deliveries: answers to GitHub never wait behind a job's CPU (see docs/serve.md)")
	minIntVar(fs, &f.jobNice, "job-nice", DefaultJobNice, 0, "with --job-process: how much lower the job process's CPU priority (niceness) is than this process's")
	fs.IntVar(&f.jobListenerFD, "job-listener-fd", 0, "internal: the descriptor of the loopback listener a --job-process front hands its job process")
	_ = fs.MarkHidden("job-listener-fd")
	f.status.register(fs)
	f.http.register(fs)
	fs.StringVar(&f.shard, "shard", "", "INDEX/COUNT: reconcile only the target repos this replica owns (replica INDEX of COUNT, e.g. the StatefulSet ordinal); see docs/scale-out.md")
}

// flagsFromEnv sets every named flag that was not given on the command
// line from FLEETBOT_<NAME> (upper case, dashes as underscores).
func flagsFromEnv(fs *pflag.FlagSet, names ...string) error {
	for _, name := range names {
		env := "FLEETBOT_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		v, ok := os.LookupEnv(env)
		if !ok || fs.Changed(name) {
			continue
		}
		if err := fs.Set(name, v); err != nil {
			return fmt.Errorf("%s=%q: %w", env, v, err)
		}
	}
	return nil
}

// serveConfig resolves flags and environment; it never logs a secret.
func (a *frontend) serveConfig(f *serveFlags, log *slog.Logger) (serveConfig, error) {
	owner, name, ok := strings.Cut(f.control, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return serveConfig{}, fmt.Errorf("--control-repo %q: want OWNER/NAME of the control repo on GitHub (or FLEETBOT_CONTROL_REPO)", f.control)
	}
	shard, err := app.ParseShard(f.shard)
	if err != nil {
		return serveConfig{}, fmt.Errorf("--shard: %w", err)
	}
	var secret []byte
	switch {
	case f.secretFile != "":
		b, err := os.ReadFile(f.secretFile)
		if err != nil {
			return serveConfig{}, fmt.Errorf("reading the webhook secret: %w", err)
		}
		secret = []byte(strings.TrimRight(string(b), "\r\n"))
	default:
		secret = []byte(os.Getenv("FLEETBOT_WEBHOOK_SECRET"))
	}
	if len(secret) == 0 {
		return serveConfig{}, errors.New("no webhook secret: --webhook-secret-file FILE, FLEETBOT_WEBHOOK_SECRET_FILE or FLEETBOT_WEBHOOK_SECRET; GitHub signs every delivery with it")
	}
	acfg, err := a.config(app.ForgeGitHub, log)
	if err != nil {
		return serveConfig{}, err
	}
	acfg.GitURL = app.ResolveGitURL(f.gitURL, app.ForgeGitHub, acfg.GitHub.APIURL)
	if acfg.GitHub.AppID == 0 {
		return serveConfig{}, errors.New("serve needs a GitHub App: --app-id and --app-key (or FLEETBOT_APP_ID and FLEETBOT_APP_KEY_FILE); a token cannot receive App webhooks")
	}
	if f.resync <= 0 {
		return serveConfig{}, fmt.Errorf("--resync-interval %s: must be positive", f.resync)
	}
	// The snapshot cache persists across restarts by default, as for the CLI: with the
	// batched scan, a restart then costs one GraphQL query per 100 repos, not a full read
	// of every repo.
	if acfg.CacheDir != "" {
		if err := ghforge.PrepareCacheDir(acfg.CacheDir); err != nil {
			return serveConfig{}, fmt.Errorf("--github-cache: %w", err)
		}
	}
	status, err := f.status.config()
	if err != nil {
		return serveConfig{}, err
	}
	return serveConfig{
		Status:  status,
		Control: f.control, Secret: secret, App: acfg, Resync: f.resync, DriftDelay: f.driftDelay, Workers: f.workers, QueueSize: f.queueSize, MaxBody: f.maxBody,
		Grace: f.grace, Concurrency: f.concurrency, CheckName: f.checkName, TenantCheck: f.tenantCheck, Shard: shard, Logger: log, HTTP: f.http,
	}, nil
}

// serve runs the webhook service on ln until ctx is done, then shuts down:
// not ready, no new deliveries, in-flight jobs finish within the grace
// period, waiting jobs are handed back to the next process's first resync.
func serve(ctx context.Context, cfg serveConfig, ln net.Listener) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := metrics.New()
	srv := webhook.NewServer(m)
	if cfg.JobProcess {
		srv.AcceptBatches()
	}
	queue := webhook.NewQueueWith(webhook.QueueConfig{Capacity: cfg.QueueSize, DriftDelay: cfg.DriftDelay, Clock: cfg.Clock})
	if err := m.QueueDepth(queue.Len, queue.Deepest, queue.Running); err != nil {
		return err
	}
	var service atomic.Pointer[webhook.Service]
	handler, err := withStatusPages(cfg, srv.Handler(), &service)
	if err != nil {
		return err
	}
	hs := newHTTPServer(handler, log, cfg.HTTP)
	httpDone := make(chan error, 1)
	go func() { httpDone <- hs.Serve(cfg.HTTP.listener(ln)) }()

	var wg sync.WaitGroup
	run := &serveRun{cfg: cfg, log: log, metrics: m, srv: srv, queue: queue,
		rollout: &webhook.RolloutWatch{Queue: queue, Control: cfg.Control, Clock: cfg.Clock, Logger: log}}
	defer run.rollout.Stop()
	runErr := run.start(ctx, &wg, &service)
	if runErr == nil {
		select {
		case <-ctx.Done():
		case err := <-httpDone:
			runErr = fmt.Errorf("serving HTTP: %w", err)
		}
	}
	srv.SetReady(errors.New("shutting down"))
	log.Info("fleetbot serve shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("HTTP shutdown", "err", err)
	}
	wg.Wait() // the pool returns once in-flight jobs finished or the grace ran out
	if runErr != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err()) {
		return nil
	}
	return runErr
}

// serveRun is what one serve process shares between connecting to GitHub, building the
// service and running its workers.
type serveRun struct {
	cfg     serveConfig
	log     *slog.Logger
	metrics *metrics.Metrics
	srv     *webhook.Server
	queue   *webhook.Queue
	// rollout remembers the rollout in progress between jobs (its cluster repos, its next
	// wake-up), from the last full apply.
	rollout *webhook.RolloutWatch
}

// start connects to GitHub (retrying until ctx is done), builds the service, publishes it in
// service (the /status pages read it), routes deliveries to it and starts the worker pool and
// the resync loop under wg.
func (r *serveRun) start(ctx context.Context, wg *sync.WaitGroup, service *atomic.Pointer[webhook.Service]) error {
	cfg, log := r.cfg, r.log
	gh, err := connectLoop(ctx, cfg, r.srv, log)
	if err != nil {
		return err
	}
	r.metrics.GitHub(metrics.GitHubSource{Client: "app", Stats: func() metrics.GitHubStats { return githubStats(gh.app.Stats()) }})
	forges := cfg.App.Installations(gh.app, gh.self, func(key string, c *ghforge.Client) {
		r.metrics.GitHub(metrics.GitHubSource{Client: key, Stats: func() metrics.GitHubStats { return githubStats(c.Stats().Requests) }})
	})
	svc, err := r.service(ctx, gh, forges)
	if err != nil {
		return err
	}
	service.Store(svc)
	disp, err := webhook.NewDispatcher(webhook.DispatcherConfig{Secret: cfg.Secret, MaxBody: cfg.MaxBody, Logger: log, Metrics: r.metrics},
		webhook.Handlers(webhook.HandlerConfig{Control: cfg.Control, Self: gh.self, AppID: cfg.App.GitHub.AppID, Queue: r.queue,
			TenantChecks: cfg.TenantCheck != "", Rollout: r.rollout, Logger: log})...)
	if err != nil {
		return err
	}
	r.srv.SetDispatcher(disp)
	pool := &webhook.Pool{Queue: r.queue, Exec: svc, Workers: cfg.Workers, Grace: cfg.Grace, Logger: log, Metrics: r.metrics}
	resync := &webhook.Resync{Queue: r.queue, Control: cfg.Control, Interval: cfg.Resync, Logger: log}
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := pool.Run(ctx); err != nil {
			log.Error("webhook worker pool stopped", "err", err)
		}
	}()
	go func() {
		defer wg.Done()
		resync.Run(ctx, func() {
			r.srv.SetReady(nil)
			log.Info("fleetbot serve ready", "app", gh.self)
			if cfg.OnReady != nil {
				cfg.OnReady()
			}
		})
	}()
	return nil
}

// service builds the webhook service over the App's installations: the control repo read
// and checked through the installation on its owner, target repos through forges, rendering
// with the one renderer of the application configuration.
func (r *serveRun) service(ctx context.Context, gh *githubConn, forges *app.Installations) (*webhook.Service, error) {
	cfg := r.cfg
	control, err := forges.Client(ctx, gh.controlOwner, true)
	if err != nil {
		return nil, err
	}
	checker, err := forges.Client(ctx, gh.controlOwner, false)
	if err != nil {
		return nil, err
	}
	src, err := githubapi.NewGitHubControl(control.API(), cfg.Control)
	if err != nil {
		return nil, err
	}
	checks, err := githubapi.NewGitHubChecks(checker.API(), cfg.Control, cfg.CheckName)
	if err != nil {
		return nil, err
	}
	renderer := cfg.App.Renderer()
	verdict := &webhook.ReviewVerdict{Renderer: renderer, Member: func(ctx context.Context, org, slug, login string) (bool, error) {
		c, err := forges.Client(ctx, org, true)
		if err != nil {
			return false, err
		}
		return c.TeamMember(ctx, org, slug, login)
	}}
	return webhook.NewService(webhook.ServiceConfig{
		Control: src, Renderer: renderer, Verdict: verdict,
		Forges: forges.Forge, Checks: checks, RolloutChecks: checks, Rollout: r.rollout, Clock: cfg.Clock,
		Concurrency: cfg.Concurrency, Shard: cfg.Shard,
		Logger: r.log, Metrics: r.metrics, BeforeJob: cfg.BeforeJob,
		Baselines: app.NewBaselines(app.ServeBaselineFile(cfg.App.CacheDir, cfg.Control, cfg.Shard), r.log), Salt: version, Requeue: r.queue.RetryAt,
		TenantCheck: app.RequiredCheck{Context: cfg.TenantCheck, AppID: cfg.App.GitHub.AppID},
		Tenants:     githubapi.NewTenantRepos(forges.API, cfg.TenantCheck),
		CanCheck: func(ctx context.Context, owner string) (bool, error) {
			level, err := gh.app.Permission(ctx, owner, "checks")
			return level == "write" || level == "admin", err
		},
	})
}

// githubConn is what connecting to GitHub established.
type githubConn struct {
	app          *ghforge.App
	self         string // "<slug>[bot]"
	controlOwner string
}

// connectLoop connects to GitHub, retrying with backoff while /readyz says
// why not; it returns only on success or when ctx is done.
func connectLoop(ctx context.Context, cfg serveConfig, srv *webhook.Server, log *slog.Logger) (*githubConn, error) {
	wait := time.Second
	for {
		c, err := connect(ctx, cfg)
		if err == nil {
			return c, nil
		}
		srv.SetReady(fmt.Errorf("not connected to GitHub: %w", err))
		log.Warn("cannot reach the GitHub App installation; retrying", "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, connectBackoffMax)
	}
}

// connect checks the App's credentials and finds its installation on the control repo's
// owner (app.Config.ConnectApp).
func connect(ctx context.Context, cfg serveConfig) (*githubConn, error) {
	owner, _, _ := strings.Cut(cfg.Control, "/")
	ghApp, self, err := cfg.App.ConnectApp(ctx, owner)
	if err != nil {
		return nil, err
	}
	return &githubConn{app: ghApp, self: self, controlOwner: owner}, nil
}

func githubStats(s ghforge.RequestStats) metrics.GitHubStats {
	return metrics.GitHubStats{Reads: s.Reads, Writes: s.Writes, ContentWrites: s.ContentWrites,
		NotModified: s.NotModified, Errors: s.Errors, RateRemaining: s.RateRemaining}
}

// writeFileAtomic writes content to name through a temporary file and a rename, so a reader
// polling for the file never sees it half-written.
func writeFileAtomic(name, content string) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, name); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
