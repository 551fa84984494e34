// Command benchtable runs fleetbot's scale measurements and writes them as
// one markdown table (docs/benchmarks.md): full and naive renders of 100,
// 1,000 and 10,000 generated clusters, an incremental plan, GitHub request
// cost and fan-out time on the fake GitHub, a rollout in five waves (requests
// per wave check), webhook acknowledgement latency, and serve's /status page over the
// largest fleet. Each measurement runs in a child process of this program, so its
// peak memory is an honest process peak. "make bench" runs it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbot-io/fleetbot/internal/bench"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	"github.com/fleetbot-io/fleetbot/internal/heapfloor"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

// config is the parent's flags.
type config struct {
	out     string
	work    string
	sizes   []int
	apps    int
	sample  int
	repos   int
	latency time.Duration
	quick   bool
	// webhookSeconds is how long deliveries are sent.
	webhookSeconds int
	// fleetbot and kustomize are the binaries measured: fleetbot built from this commit, the
	// kustomize CLI of the naive baseline (make bench installs a pinned one).
	fleetbot, kustomize string
	// kustomizeSample is how many clusters the kustomize CLI builds, one process per app.
	kustomizeSample int
	// serveClusters sizes the fleet of the serve row; rate its deliveries per second.
	serveClusters, rate int
	// rolloutClusters sizes the fleet of the rollout row.
	rolloutClusters int
	// serveLogLevel is the log level of the serve the webhook rows drive.
	serveLogLevel string
	// jobProcess runs that serve with --job-process.
	jobProcess bool
	// e2eTools is the e2e tools directory (FLEETBOT_E2E_TOOLS): with it the replicas row runs
	// the end-to-end test TestReplicasSurviveKills, without it the row says it was not
	// measured. goCmd is the go command that runs it.
	e2eTools, goCmd string
}

func run(args []string) error {
	fs := flag.NewFlagSet("benchtable", flag.ContinueOnError)
	var (
		cfg   config
		sizes string
		child string
		dir   string
	)
	fs.StringVar(&cfg.out, "out", "docs/benchmarks.md", "markdown file to write")
	fs.StringVar(&cfg.work, "work", "", "directory for generated control repos (default: a temporary one)")
	fs.StringVar(&sizes, "sizes", "100,1000,10000", "cluster counts of the render rows")
	fs.IntVar(&cfg.apps, "apps", 20, "catalog apps of every generated control repo")
	fs.IntVar(&cfg.sample, "naive-sample", 100, "clusters built the naive way per render row (all of them when the fleet is smaller)")
	fs.IntVar(&cfg.repos, "repos", 1000, "clusters of the GitHub and incremental rows")
	fs.DurationVar(&cfg.latency, "latency", 50*time.Millisecond, "latency of every request to the fake GitHub in the timed GitHub rows")
	fs.IntVar(&cfg.webhookSeconds, "webhook-seconds", 10, "how long the webhook row sends 200 deliveries/s")
	fs.StringVar(&cfg.fleetbot, "fleetbot", "bin/fleetbot", "the fleetbot binary whose serve command the webhook rows drive")
	fs.StringVar(&cfg.kustomize, "kustomize", "", "the kustomize CLI of the naive baseline (required; make bench installs a pinned one)")
	fs.IntVar(&cfg.kustomizeSample, "kustomize-sample", 5, "clusters built by the kustomize CLI, one process per app")
	fs.IntVar(&cfg.serveClusters, "serve-clusters", 1000, "clusters of the fleet fleetbot serve runs in the webhook rows")
	fs.IntVar(&cfg.rate, "rate", 1000, "deliveries per second sent to fleetbot serve")
	fs.IntVar(&cfg.rolloutClusters, "rollout-clusters", 1000, "clusters of the rollout row (five waves)")
	fs.StringVar(&cfg.serveLogLevel, "serve-log-level", "warn", "--log-level of the fleetbot serve the webhook rows drive (its log: serve.log in the work directory)")
	fs.BoolVar(&cfg.jobProcess, "job-process", true, "run the webhook rows' fleetbot serve with --job-process (jobs in a child process at a lower CPU priority), as docs/serve.md advises at high delivery rates")
	fs.StringVar(&cfg.e2eTools, "e2e-tools", os.Getenv(bench.E2EToolsEnv), "the e2e tools directory (make e2e-tools prints it; default $"+bench.E2EToolsEnv+"): the replicas row runs the end-to-end test TestReplicasSurviveKills with them, and is not measured without them")
	fs.StringVar(&cfg.goCmd, "go", "go", "the go command that runs the replicas end-to-end test")
	fs.BoolVar(&cfg.quick, "quick", false, "smaller run: sizes 100,1000 and 200 repos, for a quick look (the table says so)")
	fs.StringVar(&child, "child", "", "internal: run one scenario and print its JSON result")
	fs.StringVar(&dir, "dir", "", "internal: the control repo of a child scenario")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch child {
	case "":
	case "render":
		heapfloor.Keep(heapfloor.Default) // as fleetbot's one-shot commands do
		res, err := bench.Render(dir)
		if err != nil {
			return err
		}
		return emit(res)
	case "naive":
		heapfloor.Keep(heapfloor.Default) // the same collector as the render it is compared with
		res, err := bench.Naive(dir, cfg.sample)
		if err != nil {
			return err
		}
		return emit(res)
	case "github":
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		res, err := bench.GitHub(context.Background(), bench.GitHubOptions{
			Clusters: cfg.repos, Apps: cfg.apps, Latency: cfg.latency, Logger: log,
		})
		if err != nil {
			return err
		}
		return emit(res)
	case "kustomize":
		res, err := bench.NaiveKustomize(dir, cfg.kustomize, cfg.kustomizeSample)
		if err != nil {
			return err
		}
		return emit(res)
	case "status":
		res, err := bench.StatusPage(dir)
		if err != nil {
			return err
		}
		return emit(res)
	case "rollout":
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		res, err := bench.Rollout(context.Background(), bench.RolloutOptions{
			Clusters: cfg.rolloutClusters, Apps: cfg.apps, Latency: cfg.latency, Logger: log,
		})
		if err != nil {
			return err
		}
		return emit(res)
	case "simulate":
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		var out simulateRun
		for _, budget := range []string{"3%", "0"} {
			res, err := bench.Simulate(context.Background(), bench.SimulateOptions{
				Clusters: cfg.rolloutClusters, Apps: cfg.apps, Budget: budget, SilentPercent: 2, FailingPercent: 1, Logger: log,
			})
			if err != nil {
				return fmt.Errorf("simulated rollout with budget %s: %w", budget, err)
			}
			out = append(out, res)
		}
		return emit(out)
	case "serve":
		res, err := bench.Serve(context.Background(), bench.ServeOptions{
			Binary: cfg.fleetbot, Clusters: cfg.serveClusters, Apps: cfg.apps, Rate: cfg.rate,
			Duration: time.Duration(cfg.webhookSeconds) * time.Second, Work: dir, Sender: senderChild, LogLevel: cfg.serveLogLevel, JobProcess: cfg.jobProcess,
		})
		if err != nil {
			return err
		}
		return emit(res)
	case "replicas":
		// The e2e test's output goes to stderr, as every child's progress does.
		res, err := bench.RunReplicas(context.Background(), bench.ReplicasOptions{Go: cfg.goCmd, Tools: cfg.e2eTools, Work: dir, Log: os.Stderr})
		if res == nil {
			return err
		}
		out := replicasRun{Replicas: *res}
		if err != nil {
			out.Failed = err.Error()
		}
		return emit(out)
	case "sender":
		var spec bench.LoadSpec
		if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
			return fmt.Errorf("sender: reading the load from stdin: %w", err)
		}
		res, err := bench.SendLoad(context.Background(), spec)
		if err != nil {
			return err
		}
		return emit(res)
	default:
		return fmt.Errorf("unknown child scenario %q", child)
	}

	if cfg.quick {
		sizes, cfg.repos, cfg.sample, cfg.webhookSeconds, cfg.kustomizeSample, cfg.serveClusters = "100,1000", 200, 20, 3, 2, 100
		cfg.rolloutClusters = 200
	}
	if cfg.kustomize == "" {
		return errors.New("-kustomize: the kustomize CLI of the naive baseline is required (make bench installs a pinned one into bin/)")
	}
	for _, b := range []*string{&cfg.kustomize, &cfg.fleetbot} {
		abs, err := filepath.Abs(*b)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err != nil {
			return fmt.Errorf("%s: %w (make bench builds fleetbot and installs kustomize)", *b, err)
		}
		*b = abs
	}
	if !cfg.quick {
		// The committed table must say which code it measured: only from a clean tree.
		if dirty := gitDirty(); dirty != "" {
			return fmt.Errorf("refusing to write %s from a tree with uncommitted changes (commit or stash them, or use -quick):\n%s", cfg.out, dirty)
		}
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-sizes %q: want cluster counts like 100,1000", sizes)
		}
		cfg.sizes = append(cfg.sizes, n)
	}
	if cfg.work == "" {
		tmp, err := os.MkdirTemp("", "fleetbot-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		cfg.work = tmp
	}
	return measure(cfg)
}

// replicasRun is the replicas child's result: the e2e test's figures, and its failure when it
// failed after writing them (a run that lost work fails its assertions; the row says so).
type replicasRun struct {
	bench.Replicas
	Failed string `json:"failed,omitempty"`
}

// measureReplicas runs the replicas row's end-to-end test when the e2e tools are there, and
// records why not otherwise: the tools are absent, or the test failed before writing its
// figures (the row then says not measured, with the error; its log is on stderr).
func (r *results) measureReplicas(cfg config) error {
	if cfg.e2eTools == "" {
		r.replicasSkipped = "e2e tools absent"
		fmt.Fprintf(os.Stderr, "replicas: not measured: e2e tools absent (set %s=$(make e2e-tools))\n", bench.E2EToolsEnv)
		return nil
	}
	fmt.Fprintf(os.Stderr, "replicas: TestReplicasSurviveKills (three serve replicas on a real kube-apiserver's Leases, one killed every 4 s)\n")
	dir, err := os.MkdirTemp(cfg.work, "replicas-")
	if err != nil {
		return err
	}
	rs := &replicasRun{}
	if _, err := runChild(rs, "-child", "replicas", "-dir", dir, "-e2e-tools", cfg.e2eTools, "-go", cfg.goCmd); err != nil {
		r.replicasSkipped = "the end-to-end test failed before writing its figures (its log is in make bench's output): " + err.Error()
		fmt.Fprintf(os.Stderr, "replicas: not measured: %v\n", err)
		return nil
	}
	r.replicas = rs
	fmt.Fprintf(os.Stderr, "  %d kills (%d of the leader); share takeover max %.1f s, lead takeover max %.1f s; lost work %d\n",
		r.replicas.Kills, r.replicas.LeaderKills, r.replicas.Share.Max, r.replicas.Lead.Max, r.replicas.LostWork())
	return nil
}

// senderChild sends the webhook load from a process of its own (this program, -child sender):
// in the serve child it would share a Go scheduler with the fake GitHub answering serve's
// jobs, and its timestamps would wait behind the fake's goroutines.
//
// It stands in for GitHub, whose delivery workers do not share serve's CPUs: it runs at a raised
// scheduling priority (niceness senderNice) when this process may raise one (root), so that its
// own wake-ups (reading serve's answer, starting the next request on time) are not counted as
// serve's latency. It gets no more CPU than it uses, only sooner; serve's figure is the same
// either way when the machine has CPUs to spare. LoadResult.Nice says which way it ran.
func senderChild(_ context.Context, spec bench.LoadSpec) (*bench.LoadResult, error) {
	in, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	nice := 0
	if os.Geteuid() == 0 {
		nice = senderNice
	}
	var res bench.LoadResult
	if _, err := runChildNice(in, &res, nice, "-child", "sender"); err != nil {
		return nil, err
	}
	res.Nice = nice
	return &res, nil
}

// senderNice is the sender's scheduling niceness when it may be raised.
const senderNice = -10

// generate writes the control repo of n clusters under the work directory
// once and returns its path.
func generate(cfg config, n int) (string, error) {
	dir := filepath.Join(cfg.work, fmt.Sprintf("fleet-%d", n))
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	if err := fleetgen.WriteDir(dir, fleetgen.Options{Clusters: n, Apps: cfg.apps, Seed: 1}); err != nil {
		return "", err
	}
	return dir, nil
}

// renderRow is one line of the render table.
type renderRow struct {
	Render     bench.RenderResult
	RenderProc childResult
	Naive      bench.NaiveResult
	Kustomize  bench.KustomizeResult
}

func measure(cfg config) error {
	r := &results{cfg: cfg, started: time.Now(), loadBefore: loadAvg()}
	for _, n := range cfg.sizes {
		dir, err := generate(cfg, n)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "render: %d clusters x %d apps\n", n, cfg.apps)
		var row renderRow
		proc, err := runChild(&row.Render, "-child", "render", "-dir", dir)
		if err != nil {
			return err
		}
		row.RenderProc = *proc
		fmt.Fprintf(os.Stderr, "  %s load+render, %d MiB peak RSS, %d builds\n", row.Render.Total().Round(time.Millisecond), proc.MaxRSS>>20, row.Render.Builds)
		if _, err := runChild(&row.Naive, "-child", "naive", "-dir", dir, "-naive-sample", strconv.Itoa(cfg.sample)); err != nil {
			return err
		}
		if _, err := runChild(&row.Kustomize, "-child", "kustomize", "-dir", dir, "-kustomize", cfg.kustomize, "-kustomize-sample", strconv.Itoa(cfg.kustomizeSample)); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "  kustomize CLI: %s per build\n", row.Kustomize.PerBuild().Round(time.Microsecond))
		fmt.Fprintf(os.Stderr, "  naive: %s per build, %s for %d builds\n", row.Naive.PerBuild().Round(time.Microsecond), row.Naive.Estimate().Round(time.Second), row.Naive.Deployments)
		r.renders = append(r.renders, row)
	}

	// The /status page over the largest generated fleet (10,000 clusters in make bench).
	largest, err := generate(cfg, slices.Max(cfg.sizes))
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "status: /status of %d clusters\n", slices.Max(cfg.sizes))
	r.status = &bench.StatusResult{}
	if r.statusProc, err = runChild(r.status, "-child", "status", "-dir", largest); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "  slowest page %s (median of %d)\n", r.status.Slowest().Round(time.Millisecond), bench.StatusPageRuns)

	fmt.Fprintf(os.Stderr, "github: %d clusters on the fake GitHub\n", cfg.repos)
	r.github = &bench.GitHubResult{}
	proc, err := runChild(r.github, "-child", "github", "-repos", strconv.Itoa(cfg.repos), "-apps", strconv.Itoa(cfg.apps), "-latency", cfg.latency.String())
	if err != nil {
		return err
	}
	r.githubProc = proc

	fmt.Fprintf(os.Stderr, "rollout: %d clusters in five waves on the fake GitHub\n", cfg.rolloutClusters)
	r.rollout = &bench.RolloutResult{}
	if r.rolloutProc, err = runChild(r.rollout, "-child", "rollout", "-rollout-clusters", strconv.Itoa(cfg.rolloutClusters),
		"-apps", strconv.Itoa(cfg.apps), "-latency", cfg.latency.String()); err != nil {
		return err
	}
	for _, w := range r.rollout.Waves {
		fmt.Fprintf(os.Stderr, "  wave %s: %d clusters; wave check: gate read %d requests in %s, whole check %d requests (%d writes) in %s\n",
			w.Name, w.Clusters, w.GateRequests, w.GateWall.Round(time.Millisecond), w.Check.Requests, w.Check.Writes, w.Check.Wall.Round(time.Millisecond))
	}

	fmt.Fprintf(os.Stderr, "simulate: %d clusters in five waves, 2 %% silent and 1 %% failing, budgets 3 %% and 0\n", cfg.rolloutClusters)
	if r.simulateProc, err = runChild(&r.simulate, "-child", "simulate", "-rollout-clusters", strconv.Itoa(cfg.rolloutClusters), "-apps", strconv.Itoa(cfg.apps)); err != nil {
		return err
	}
	for _, s := range r.simulate {
		fmt.Fprintf(os.Stderr, "  budget %s: done %v, rolled back %v, %d checks, %.0f requests per check, %s to done at GitHub's limits\n",
			s.Budget, s.Done, s.RolledBack, s.Checks, s.RequestsPerCheck(), s.ToDone.Round(time.Second))
	}

	fmt.Fprintf(os.Stderr, "serve: the fleetbot binary, %d clusters, %d deliveries/s\n", cfg.serveClusters, cfg.rate)
	serveDir, err := os.MkdirTemp(cfg.work, "serve-")
	if err != nil {
		return err
	}
	r.serve = &bench.ServeResult{}
	if r.serveProc, err = runChild(r.serve, "-child", "serve", "-dir", serveDir, "-fleetbot", cfg.fleetbot, "-serve-clusters", strconv.Itoa(cfg.serveClusters),
		"-apps", strconv.Itoa(cfg.apps), "-rate", strconv.Itoa(cfg.rate), "-webhook-seconds", strconv.Itoa(cfg.webhookSeconds), "-serve-log-level", cfg.serveLogLevel,
		"-job-process="+strconv.FormatBool(cfg.jobProcess)); err != nil {
		return err
	}

	if err := r.measureReplicas(cfg); err != nil {
		return err
	}

	r.took, r.loadAfter = time.Since(r.started), loadAvg()
	if err := os.MkdirAll(filepath.Dir(cfg.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(cfg.out, r.markdown(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", cfg.out, err)
	}
	fmt.Fprintf(os.Stderr, "wrote %s in %s\n", cfg.out, r.took.Round(time.Second))
	return nil
}
