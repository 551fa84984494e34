package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/app"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubapi"
	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/metrics"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// connectBackoffMax caps the wait between attempts to reach GitHub at startup.
const connectBackoffMax = 30 * time.Second

// shutdownHTTP bounds how long the HTTP server takes to close its connections on shutdown.
const shutdownHTTP = 10 * time.Second

// Server is one serve process's service, built by New and run by Run.
type Server struct {
	cfg     Config
	log     *slog.Logger
	metrics *metrics.Metrics
	// srv routes /webhook, /healthz, /readyz and /metrics; its dispatcher is set once Run
	// connected to GitHub.
	srv   *ingress.Server
	queue *webhook.Queue
	// rollout remembers the rollout in progress between jobs (its cluster repos, its next
	// wake-up), from the last full apply.
	rollout *webhook.RolloutWatch
	// service is published once built (the /status pages read it).
	service atomic.Pointer[webhook.Service]
	// health serves the clusters' health events (HealthPath) when configured.
	health *healthEvents
	http   *http.Server
	// replicas is the membership on Kubernetes Leases (nil: one replica).
	replicas *replicaSet
	// ready combines what /readyz waits for: GitHub reached and the first resync queued, and,
	// with replicas, this replica's Lease renewed.
	ready readiness
}

// readiness is /readyz's two conditions.
type readiness struct {
	mu              sync.Mutex
	srv             *ingress.Server
	github, members error
}

func (r *readiness) set(github bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if github {
		r.github = err
	} else {
		r.members = err
	}
	if r.github != nil {
		r.srv.SetReady(r.github)
		return
	}
	r.srv.SetReady(r.members)
}

// New builds serve from cfg: the metrics, the HTTP routes (with the /status pages when
// enabled), the job queue and the rollout watch. It starts nothing and talks to no one: Run
// connects to GitHub and builds what needs the App's installations.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Listener == nil:
		return nil, errors.New("serve.New: Config.Listener is nil: bind the address serve answers on first")
	case len(cfg.Secret) == 0:
		return nil, errors.New("serve.New: Config.Secret is empty: GitHub signs every delivery with the webhook secret")
	}
	if owner, name, ok := strings.Cut(cfg.Control, "/"); !ok || owner == "" || name == "" {
		return nil, fmt.Errorf("serve.New: Config.Control %q: want OWNER/NAME of the control repo", cfg.Control)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := metrics.New()
	srv := ingress.NewServer(m)
	if cfg.JobProcess {
		srv.AcceptBatches()
	}
	queue := webhook.NewQueue(jobqueue.Config{Capacity: cfg.QueueSize, BatchDelay: cfg.DriftDelay, Clock: cfg.Clock})
	if err := m.QueueDepth(queue.Len, queue.Deepest, queue.Running); err != nil {
		return nil, err
	}
	var replicas *replicaSet
	routes := srv.Handler()
	if cfg.Replicas != nil {
		cfg.Logger = log
		var err error
		if replicas, err = newReplicaSet(&cfg, srv); err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("/webhook", replicas.router)
		mux.Handle("/", routes)
		routes = mux
	}
	s := &Server{cfg: cfg, log: log, metrics: m, srv: srv, queue: queue, replicas: replicas,
		rollout: &webhook.RolloutWatch{Queue: queue, Control: cfg.Control, Clock: cfg.Clock, Logger: log}}
	s.ready = readiness{srv: srv, github: errors.New("starting: GitHub App not reached yet")}
	if replicas != nil {
		s.ready.members = replicas.members.Ready()
		replicas.ready = func(err error) { s.ready.set(false, err) }
	}
	handler, err := withStatusPages(cfg, routes, &s.service)
	if err != nil {
		return nil, err
	}
	s.health = &healthEvents{keysDir: cfg.HealthKeys, log: log, service: &s.service}
	handler = withHealth(cfg, handler, s.health)
	s.http = NewHTTPServer(handler, log, cfg.HTTP)
	return s, nil
}

// Run serves on the configured listener until ctx is done, then shuts down: not ready, no new
// deliveries, in-flight jobs finish within the grace period, waiting jobs are handed back to
// the next process's first resync. Until it reaches GitHub, /readyz says why not.
func (s *Server) Run(ctx context.Context) error {
	httpDone := make(chan error, 1)
	go func() { httpDone <- s.http.Serve(s.cfg.HTTP.Listener(s.cfg.Listener)) }()

	var wg sync.WaitGroup
	defer s.rollout.Stop()
	if s.replicas != nil {
		s.replicas.run(ctx, &wg, s.resyncNow)
	}
	runErr := s.start(ctx, &wg)
	if runErr == nil {
		select {
		case <-ctx.Done():
		case err := <-httpDone:
			runErr = fmt.Errorf("serving HTTP: %w", err)
		}
	}
	s.srv.SetReady(errors.New("shutting down"))
	s.log.Info("fleetbot serve shutting down")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownHTTP)
	defer cancel()
	if err := s.http.Shutdown(sctx); err != nil {
		s.log.Warn("HTTP shutdown", "err", err)
	}
	wg.Wait() // the pool returns once in-flight jobs finished or the grace ran out
	if runErr != nil && ctx.Err() != nil && errors.Is(runErr, ctx.Err()) {
		return nil
	}
	return runErr
}

// start connects to GitHub (retrying until ctx is done), builds the service, publishes it (the
// /status pages read it), routes deliveries to it and starts the worker pool and the resync
// loop under wg.
func (s *Server) start(ctx context.Context, wg *sync.WaitGroup) error {
	cfg, log := s.cfg, s.log
	gh, err := connectLoop(ctx, cfg, func(err error) { s.ready.set(true, err) }, log)
	if err != nil {
		return err
	}
	s.metrics.GitHub(metrics.GitHubSource{Client: "app", Stats: func() metrics.GitHubStats { return githubStats(gh.app.Stats()) }})
	forges := cfg.App.Installations(gh.app, gh.self, func(key string, c *ghforge.Client) {
		s.metrics.GitHub(metrics.GitHubSource{Client: key, Stats: func() metrics.GitHubStats { return githubStats(c.Stats().Requests) }})
	})
	svc, err := s.newService(ctx, gh, forges)
	if err != nil {
		return err
	}
	s.service.Store(svc)
	var poster StatusPoster = githubapi.NewCommitStatuses(forges.API)
	s.health.poster.Store(&poster)
	disp, err := ingress.NewDispatcher(ingress.DispatcherConfig{Secret: cfg.Secret, MaxBody: cfg.MaxBody, Logger: log, Metrics: s.metrics},
		ingress.Handlers(ingress.HandlerConfig{Control: cfg.Control, Self: gh.self, AppID: cfg.App.GitHub.AppID, Queue: s.queue,
			TenantChecks: cfg.TenantCheck != "", Rollout: s.rollout, Live: svc, Logger: log})...)
	if err != nil {
		return err
	}
	s.srv.SetDispatcher(disp)
	pool := &webhook.Pool{Queue: s.queue, Exec: svc, Workers: cfg.Workers, Grace: cfg.Grace, Logger: log, Metrics: s.metrics}
	resync := &webhook.Resync{Queue: s.queue, Control: cfg.Control, Interval: cfg.Resync, Logger: log,
		Recover: func(ctx context.Context) ([]webhook.Job, error) { return svc.Recover(ctx, cfg.Control) }}
	if in := s.inbox(gh.app, disp); in != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in.run(ctx)
		}()
	}
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
			s.ready.set(true, nil)
			log.Info("fleetbot serve ready", "app", gh.self)
			if cfg.OnReady != nil {
				cfg.OnReady()
			}
		})
	}()
	return nil
}

// newService builds the webhook service over the App's installations: the control repo read
// and checked through the installation on its owner, target repos through forges, rendering
// with the one renderer of the application configuration.
func (s *Server) newService(ctx context.Context, gh *githubConn, forges *app.Installations) (*webhook.Service, error) {
	cfg := s.cfg
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
	pending, err := githubapi.NewPendingChecks(control.API(), cfg.Control, cfg.CheckName, cfg.App.GitHub.AppID)
	if err != nil {
		return nil, err
	}
	runner := s.runner(cfg.App, forges)
	verdict := &webhook.ReviewVerdict{Renderer: runner.Renderer(), Member: func(ctx context.Context, org, slug, login string) (bool, error) {
		c, err := forges.Client(ctx, org, true)
		if err != nil {
			return false, err
		}
		return c.TeamMember(ctx, org, slug, login)
	}}
	return webhook.NewService(webhook.ServiceConfig{
		Control: src, Runner: runner, Verdict: verdict,
		Checks: checks, RolloutChecks: s.replicas.rolloutChecks(checks), Rollout: s.rollout,
		Logger: s.log, Metrics: s.metrics, BeforeJob: cfg.BeforeJob, Requeue: s.queue.RetryAt,
		Pending: pending, StuckCheck: cfg.StuckCheck, StepRepos: cfg.StepRepos,
		StepsFile:   app.ServeStepsFile(cfg.App.CacheDir, cfg.Control, cfg.App.Shard),
		TenantCheck: app.RequiredCheck{Context: cfg.TenantCheck, AppID: cfg.App.GitHub.AppID},
		Tenants:     githubapi.NewTenantRepos(forges.API, cfg.TenantCheck),
		TenantPulls: tenantPulls{forges: forges, check: cfg.TenantCheck, appID: cfg.App.GitHub.AppID},
		CanCheck: func(ctx context.Context, owner string) (bool, error) {
			level, err := gh.app.Permission(ctx, owner, "checks")
			return level == "write" || level == "admin", err
		},
	})
}

// resyncNow queues a full apply of this replica's share (a change of the replicas' membership:
// the repos it gained are reconciled now, not at the next resync).
func (s *Server) resyncNow(reason string) {
	if _, err := s.queue.Push(webhook.Job{Kind: webhook.KindApply, Repo: s.cfg.Control, Reason: reason, Queued: time.Now()}); err != nil {
		s.log.Warn("resync after a membership change not queued; the periodic resync covers it", "err", err)
	}
}

// runner builds the application's Runner of plan and apply for the service, once: the forges of
// the App's installations, the rollout gate on the service's clock, each applied repo counted in
// the reconcile metric, baselines per control repo and shard.
func (s *Server) runner(acfg app.Config, forges *app.Installations) *app.Runner {
	acfg.Logger = s.log
	if s.cfg.Clock != nil {
		acfg.Now = s.cfg.Clock.Now
	}
	acfg.OnApplied = func(r app.RepoResult) { s.metrics.Reconciled(outcomeOf(r)) }
	return acfg.ServiceRunner(s.cfg.Control, forges.Forge)
}

// outcomeOf names a result for the reconcile outcome metric.
func outcomeOf(r app.RepoResult) string {
	if w := r.Word(); w != "-" {
		return w
	}
	return "unknown"
}

// githubConn is what connecting to GitHub established.
type githubConn struct {
	app          *ghforge.App
	self         string // "<slug>[bot]"
	controlOwner string
}

// connectLoop connects to GitHub, retrying with backoff while /readyz says
// why not; it returns only on success or when ctx is done.
func connectLoop(ctx context.Context, cfg Config, notReady func(error), log *slog.Logger) (*githubConn, error) {
	wait := time.Second
	for {
		c, err := connect(ctx, cfg)
		if err == nil {
			return c, nil
		}
		notReady(fmt.Errorf("not connected to GitHub: %w", err))
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
func connect(ctx context.Context, cfg Config) (*githubConn, error) {
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

// inbox is the pass over the App's delivery log (nil when Config.Redeliver is negative):
// handled are the deliveries disp acknowledged.
func (s *Server) inbox(ghApp *ghforge.App, disp *ingress.Dispatcher) *inbox {
	cfg := s.cfg
	if cfg.Redeliver < 0 {
		return nil
	}
	interval := cfg.Redeliver
	if interval == 0 {
		interval = DefaultRedeliverInterval
	}
	clock := cfg.Clock
	if clock == nil {
		clock = jobqueue.WallClock{}
	}
	in := &inbox{log: ghApp, handled: disp.Handled, now: clock.Now, interval: interval, max: cfg.MaxRedeliveries, logger: s.log}
	if cfg.OnRedeliveryPass != nil {
		in.passed = func(p ghforge.RedeliveryPass, err error) {
			guids := make([]string, len(p.Asked))
			for i, d := range p.Asked {
				guids[i] = d.GUID
			}
			cfg.OnRedeliveryPass(guids, err)
		}
	}
	return in
}
