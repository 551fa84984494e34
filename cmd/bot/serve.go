package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/serve"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// Defaults of fleetbot serve.
const DefaultListen = ":8080"

// serveConfig is serve's resolved configuration (internal/serve builds and runs serve from it).
type serveConfig = serve.Config

// serveFlags are serve's own flags; each has a FLEETBOT_* variable.
type serveFlags struct {
	listen, control, secretFile, gitURL, checkName, shard, listenFile string
	// leases is the namespace of the replicas' Leases (--replicas-from-leases).
	leases                                           string
	tenantCheck, healthKeys                          string
	resync, grace, driftDelay, stuckCheck, redeliver time.Duration
	workers, queueSize, maxRedeliveries, stepRepos   int
	maxBody                                          int64
	// jobProcess: run the jobs in a child process (serve_front.go); jobNice is its priority
	// drop; jobListenerFD > 0 makes this process that child.
	jobProcess             bool
	jobNice, jobListenerFD int
	status                 statusPageFlags
	http                   serve.HTTPLimits
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
    team, branch_protection_rule,
    repository_ruleset
  repository_ruleset of fleetbot's org          full resync (repairs the one
    ruleset (branchRules.organization)            org ruleset)
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
			if err := flagsFromEnv(cmd.Flags(), append(serveEnvFlags(), limitFlags...)...); err != nil {
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
			return listenAndServe(cmd.Context(), &f, cfg)
		},
	}
	f.register(cmd.Flags(), &a.concurrency)
	return cmd
}

// serveEnvFlags are serve's flags that FLEETBOT_<FLAG> sets (limitFlags besides).
func serveEnvFlags() []string {
	return []string{"listen", "listen-file", "control-repo", "webhook-secret-file", "git-url", "check-name",
		"tenant-check", "resync-interval", "shutdown-grace", "drift-delay", "workers", "queue-size", "concurrency", "max-body", "log-level", "shard",
		"status", "status-token-file", "status-insecure-no-auth", "status-group-by", "job-process", "job-nice",
		"stuck-check", "redeliver-interval", "max-redeliveries", "step-repos", "replicas-from-leases", "health-keys"}
}

// listenAndServe binds serve's listener and runs serve on it, as the job process of a --job-process
// front (on the listener it inherited), as that front, or alone.
func listenAndServe(ctx context.Context, f *serveFlags, cfg serveConfig) error {
	log := cfg.Logger
	if f.jobListenerFD > 0 {
		return serve.RunJobProcess(ctx, cfg, f.jobListenerFD, f.jobNice)
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
		cfg.Listener = ln
		return serve.RunFront(ctx, cfg, serve.JobProcess{Args: jobProcessArgs(f.jobNice)})
	}
	return runServe(ctx, cfg, ln)
}

// register defines serve's own flags on fs; --concurrency sets concurrency, the frontend's
// (see frontend.base).
func (f *serveFlags) register(fs *pflag.FlagSet, concurrency *int) {
	fs.StringVar(&f.listen, "listen", DefaultListen, "address to serve /webhook, /healthz, /readyz and /metrics on")
	fs.StringVar(&f.listenFile, "listen-file", "", "once listening, write the address (HOST:PORT) to this file; with --listen 127.0.0.1:0 the port is a free one")
	fs.StringVar(&f.control, "control-repo", "", "the control repo on GitHub, OWNER/NAME")
	fs.StringVar(&f.secretFile, "webhook-secret-file", "", "file holding the GitHub App's webhook secret")
	fs.StringVar(&f.gitURL, "git-url", "", "web root of the GitHub host, for Flux GitRepository URLs (default: from GITHUB_API_URL, else https://github.com)")
	fs.StringVar(&f.checkName, "check-name", checkrun.DefaultCheckName, "name of the check run on control-repo pull requests")
	fs.StringVar(&f.tenantCheck, "tenant-check", checkrun.DefaultTenantCheckName, "name of the check run on every pull request of a workspace or cluster repo (check workspace / check cluster on its head), which their branch protection requires from this App; '' turns the check and the requirement off")
	positiveDurationVar(fs, &f.resync, "resync-interval", webhook.DefaultResyncInterval, "how often to reconcile every target repo without a webhook")
	positiveDurationVar(fs, &f.stuckCheck, "stuck-check", webhook.DefaultStuckCheck, "how long a control pull request's check run, or a tenant check run, may stay in_progress before a resync takes it for abandoned and runs the check again")
	positiveDurationVar(fs, &f.redeliver, "redeliver-interval", serve.DefaultRedeliverInterval, "how often to read the App's webhook delivery log and ask GitHub to redeliver the deliveries that failed (also at start)")
	minIntVar(fs, &f.maxRedeliveries, "max-redeliveries", ghforge.DefaultMaxRedeliveries, 1, "deliveries one pass over the delivery log asks GitHub to redeliver at most")
	minIntVar(fs, &f.stepRepos, "step-repos", webhook.DefaultStepRepos, 1, "target repos one step of a full apply plans, when more changed: the apply converges them in steps, each recorded as done")
	positiveDurationVar(fs, &f.grace, "shutdown-grace", jobqueue.DefaultGrace, "how long in-flight jobs may finish on shutdown")
	delayVar(fs, &f.driftDelay, "drift-delay", webhook.DefaultDriftDelay, "how long a drift reconcile waits after its first event for the drifts of other repos to join its batch (one GraphQL read per 100 repos instead of requests per repo); 0 starts each at once")
	minIntVar(fs, &f.workers, "workers", jobqueue.DefaultWorkers, 1, "jobs worked on at once")
	minIntVar(fs, &f.queueSize, "queue-size", jobqueue.DefaultQueueSize, 1, "distinct jobs that may wait; deliveries beyond are refused with 503")
	minIntVar(fs, concurrency, "concurrency", app.DefaultConcurrency, 1, "target repos one job works on at once")
	minInt64Var(fs, &f.maxBody, "max-body", ingress.DefaultMaxBody, 1, "largest webhook body accepted, in bytes (413 beyond)")
	fs.BoolVar(&f.jobProcess, "job-process", false, "run the jobs in a child process at a lower CPU priority, this process only acknowledging deliveries: answers to GitHub never wait behind a job's CPU (see docs/serve.md)")
	minIntVar(fs, &f.jobNice, "job-nice", serve.DefaultJobNice, 0, "with --job-process: how much lower the job process's CPU priority (niceness) is than this process's")
	fs.IntVar(&f.jobListenerFD, "job-listener-fd", 0, "internal: the descriptor of the loopback listener a --job-process front hands its job process")
	_ = fs.MarkHidden("job-listener-fd")
	fs.StringVar(&f.healthKeys, "health-keys", "", "directory of the clusters' health keys (a Secret mounted as a volume: one file per cluster, one key a line, several while rotating): serve then takes notification-controller's signed events on POST /health/CLUSTER[/NAMESPACE] and records them as commit statuses (spec.rollout.health.provider: generic-hmac)")
	f.status.register(fs)
	registerLimits(fs, &f.http)
	fs.StringVar(&f.shard, "shard", "", "INDEX/COUNT: reconcile only the target repos this replica owns (replica INDEX of COUNT, e.g. the StatefulSet ordinal); see docs/scale-out.md")
	fs.StringVar(&f.leases, "replicas-from-leases", "", "NAMESPACE: run as one of several replicas coordinated on Kubernetes Leases there (membership, a leader, target repos shared, deliveries forwarded to their owner; identity and address from POD_NAME and POD_IP); see docs/scale-out.md")
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
	replicas, err := replicasFromEnv(f.leases)
	if err != nil {
		return serveConfig{}, err
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
	acfg.Shard = shard
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
	if f.healthKeys != "" {
		if st, err := os.Stat(f.healthKeys); err != nil {
			return serveConfig{}, fmt.Errorf("--health-keys: %w", err)
		} else if !st.IsDir() {
			return serveConfig{}, fmt.Errorf("--health-keys %s is a file: want the directory of the clusters' health keys (one file per cluster, named after it)", f.healthKeys)
		}
	}
	return serveConfig{
		Status: status, HealthKeys: f.healthKeys,
		Control: f.control, Secret: secret, App: acfg, Resync: f.resync, DriftDelay: f.driftDelay, Workers: f.workers, QueueSize: f.queueSize, MaxBody: f.maxBody,
		Grace: f.grace, CheckName: f.checkName, TenantCheck: f.tenantCheck, Replicas: replicas, Logger: log, HTTP: f.http,
		StuckCheck: f.stuckCheck, Redeliver: f.redeliver, MaxRedeliveries: f.maxRedeliveries, StepRepos: f.stepRepos,
	}, nil
}

// replicasFromEnv is --replicas-from-leases NAMESPACE with the pod's identity and address from
// the downward API (POD_NAME, POD_IP, POD_UID) and, outside a pod, KUBECONFIG; "" is one
// replica without Kubernetes.
func replicasFromEnv(namespace string) (*serve.Replicas, error) {
	if namespace == "" {
		return nil, nil
	}
	name, ip := os.Getenv("POD_NAME"), os.Getenv("POD_IP")
	if name == "" {
		return nil, fmt.Errorf("--replicas-from-leases %s: POD_NAME is not set: give the pod's name from the downward API (fieldRef metadata.name), as deploy/base does", namespace)
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return nil, fmt.Errorf("--replicas-from-leases %s: POD_IP %q: want the pod's IP from the downward API (fieldRef status.podIP), as deploy/base does", namespace, ip)
	}
	return &serve.Replicas{Namespace: namespace, Identity: name, IP: addr, PodUID: os.Getenv("POD_UID"), Kubeconfig: os.Getenv("KUBECONFIG")}, nil
}

// jobProcessArgs are the arguments of serve --job-process's job process: this process's own,
// made the job process on the listener the front hands it (serve.JobListenerFD), nice lower.
func jobProcessArgs(nice int) []string {
	return append(append([]string(nil), os.Args[1:]...), "--job-listener-fd", strconv.Itoa(serve.JobListenerFD), "--job-nice", strconv.Itoa(nice))
}

// runServe runs the webhook service on ln until ctx is done (serve.New, Server.Run), then
// shuts down: not ready, no new deliveries, in-flight jobs finish within the grace period,
// waiting jobs are handed back to the next process's first resync.
func runServe(ctx context.Context, cfg serveConfig, ln net.Listener) error {
	cfg.Listener = ln
	srv, err := serve.New(cfg)
	if err != nil {
		return err
	}
	return srv.Run(ctx)
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
