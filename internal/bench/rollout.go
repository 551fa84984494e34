package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing/fstest"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// RolloutOptions size the rollout measurement.
type RolloutOptions struct {
	// Clusters and Apps size the generated fleet.
	Clusters, Apps int
	// Latency is added to every request of the timed gate reads (not to the applies, whose
	// writes would only add latency × writes).
	Latency time.Duration
	// Logger receives progress; nil discards.
	Logger *slog.Logger
}

// RolloutWaves are the five waves of the measurement, over fleetgen's env and region labels:
// a small canary first, the production clusters last. Each has a soak, so the harness moves
// the fake's clock between waves.
const RolloutWaves = `  rollout:
    waves:
      - name: canary
        clusterSelector: {matchLabels: {env: dev, region: eu}}
        soak: 10m
      - name: dev
        clusterSelector: {matchLabels: {env: dev}}
        soak: 10m
      - name: staging
        clusterSelector: {matchLabels: {env: staging}}
        soak: 10m
      - name: prod-eu
        clusterSelector: {matchLabels: {env: prod, region: eu}}
        soak: 10m
      - name: prod
        clusterSelector: {matchLabels: {env: prod}}
`

// RolloutWave is one wave of the measured rollout.
type RolloutWave struct {
	Name string
	// Clusters in the wave; Opened the pull requests its wave check opened.
	Clusters, Opened int
	// Gate is the rollout gate's read alone (every cluster repo's newest fleetbot pull request,
	// merge commit and statuses) at the configured latency: the cost of one wave check.
	GateRequests int
	GateWall     time.Duration
	// Check is the whole apply that started the wave (the gate's read, the batched scan,
	// the wave's pull requests), without added latency.
	Check Cost
}

// RolloutResult is the rollout measurement: a change to every cluster, rolled out in five
// waves on the fake GitHub, one wave check (a full apply, what serve runs on each event) per
// wave, each wave merged and reported healthy by a simulated Flux before the next check.
type RolloutResult struct {
	Clusters, Repos int
	Latency         time.Duration
	// Setup is the wall time to create and converge the fleet.
	Setup time.Duration
	Waves []RolloutWave
	// Idle is a wave check while the canary soaks (its merged branches already deleted):
	// nothing to write.
	Idle Cost
	// Final is the last check, which finds the rollout done.
	Final Cost
	Done  bool
}

// Rollout measures a rollout in waves over o.Clusters clusters on the fake GitHub.
func Rollout(ctx context.Context, o RolloutOptions) (*RolloutResult, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fl := &fleet{fs: fleetgen.Generate(fleetgen.Options{Clusters: o.Clusters, Apps: o.Apps, Seed: 1}), renderer: fanout.NewRenderer(fanout.Options{})}
	var err error
	if fl.repo, err = control.Load(fl.fs); err != nil {
		return nil, err
	}
	if fl.targets, err = fl.renderer.Render(fl.repo); err != nil {
		return nil, err
	}
	res := &RolloutResult{Clusters: o.Clusters, Repos: len(fl.targets), Latency: o.Latency}
	owner := fl.repo.Platform.Spec.Owner
	dir, err := os.MkdirTemp("", "fleetbot-bench-rollout-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, stop, err := fakeGitHub(dir, fl.repo, githubtest.WithStartTime(time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)))
	if err != nil {
		return nil, err
	}
	defer stop()
	c, err := ghforge.New(ctx, ghforge.Config{APIURL: srv.APIURL(), Token: githubtest.DefaultToken,
		Budget: ghforge.BudgetConfig{PerMinute: 1 << 30, PerHour: 1 << 30, MinInterval: -1}})
	if err != nil {
		return nil, err
	}
	f := ghforge.NewForge(c, ghforge.ForgeOptions{CacheDir: filepath.Join(dir, "snapshots")})
	// Sources name the control-repo revisions, as a commit would (the rollout's marker).
	opts := reconcile.Options{Concurrency: 16, Now: srv.Now, Source: "1111111111111111111111111111111111111111"}

	log.Info("rollout: setting up the fleet", "repos", res.Repos)
	start := time.Now()
	rep, err := reconcile.Apply(ctx, f, fl.repo, fl.targets, opts)
	if err != nil {
		return nil, fmt.Errorf("setup: first apply: %w", err)
	}
	human := platformAdmin(srv, fl.repo)
	if err := mergeAll(ctx, human, rep); err != nil {
		return nil, err
	}
	if _, err := reconcile.Apply(ctx, f, fl.repo, fl.targets, opts); err != nil {
		return nil, fmt.Errorf("setup: apply after merges: %w", err)
	}
	res.Setup = time.Since(start)

	// The change: declaring the waves, which adds Flux's health Provider and Alert to every
	// cluster repo.
	if err := fl.set("platform.yaml", string(fl.fs["platform.yaml"].Data)+RolloutWaves); err != nil {
		return nil, err
	}
	opts.Source = "2222222222222222222222222222222222222222"
	var clusters []string
	for _, t := range fl.targets {
		if t.Kind == fanout.KindCluster {
			clusters = append(clusters, t.Repo)
		}
	}
	for i, g := range rollout.New(fl.repo, srv.Now).Waves() {
		w := RolloutWave{Name: g.Name, Clusters: len(g.Clusters)}
		log.Info("rollout: wave check", "wave", g.Name, "clusters", w.Clusters)
		if w.GateRequests, w.GateWall, err = measureGate(ctx, srv, f, owner, clusters, o.Latency); err != nil {
			return nil, err
		}
		srv.ResetLog()
		t0 := time.Now()
		rep, err := reconcile.Apply(ctx, f, fl.repo, fl.targets, opts)
		if err != nil {
			return nil, fmt.Errorf("wave %s: %w", g.Name, err)
		}
		w.Check = counts(srv)
		w.Check.Wall, w.Check.Repos = time.Since(t0), len(rep.Results)
		opened := opened(rep)
		w.Opened, w.Check.Changed = len(opened), len(opened)
		if w.Opened != w.Clusters {
			return nil, fmt.Errorf("wave %s: the check opened %d pull requests for its %d clusters", g.Name, w.Opened, w.Clusters)
		}
		if err := mergeAndReport(ctx, human, owner, opened); err != nil {
			return nil, err
		}
		if i == 0 {
			// The canary merged and healthy, soaking: the first check after the merges
			// deletes the merged bot branches; the next has nothing to do.
			if _, err := reconcile.Apply(ctx, f, fl.repo, fl.targets, opts); err != nil {
				return nil, fmt.Errorf("check after the canary's merges: %w", err)
			}
			srv.ResetLog()
			t0 := time.Now()
			if _, err := reconcile.Apply(ctx, f, fl.repo, fl.targets, opts); err != nil {
				return nil, fmt.Errorf("idle check: %w", err)
			}
			res.Idle = counts(srv)
			res.Idle.Wall = time.Since(t0)
		}
		srv.AdvanceClock(11 * time.Minute) // past the soak
		res.Waves = append(res.Waves, w)
	}
	srv.ResetLog()
	t0 := time.Now()
	rep, err = reconcile.Apply(ctx, f, fl.repo, fl.targets, opts)
	if err != nil {
		return nil, fmt.Errorf("final check: %w", err)
	}
	res.Final = counts(srv)
	res.Final.Wall = time.Since(t0)
	res.Done = rep.Rollout != nil && rep.Rollout.Done
	if !res.Done {
		return nil, errors.New("the rollout is not done after its last wave merged and was reported healthy")
	}
	return res, nil
}

// set replaces one file of the control repo and loads and renders it again.
func (fl *fleet) set(file, content string) error {
	next := make(fstest.MapFS, len(fl.fs))
	for p, f := range fl.fs {
		next[p] = f
	}
	next[file] = &fstest.MapFile{Data: []byte(content), Mode: 0o644}
	repo, err := control.Load(next)
	if err != nil {
		return fmt.Errorf("loading the control repo with %s replaced: %w", file, err)
	}
	targets, err := fl.renderer.Render(repo)
	if err != nil {
		return fmt.Errorf("rendering the control repo with %s replaced: %w", file, err)
	}
	fl.fs, fl.repo, fl.targets = next, repo, targets
	return nil
}

// measureGate reads the rollout state of every cluster repo as the gate does, with latency
// added to each request, and returns the requests and the time it took.
func measureGate(ctx context.Context, srv *githubtest.Server, f *ghforge.Forge, owner string, repos []string, latency time.Duration) (int, time.Duration, error) {
	if latency > 0 {
		srv.Fault("*", githubtest.FaultSpec{Latency: latency})
		defer srv.ClearFaults()
	}
	srv.ResetLog()
	t0 := time.Now()
	prs, err := f.RolloutPRs(ctx, owner, repos, "main", "fleetbot/sync")
	wall := time.Since(t0)
	if err != nil {
		return 0, 0, fmt.Errorf("the gate's read: %w", err)
	}
	if len(prs) == 0 {
		return 0, 0, errors.New("the gate's read found no fleetbot pull request")
	}
	return len(srv.Requests()), wall, nil
}

// opened lists the cluster repos whose pull request a wave check opened.
func opened(rep *reconcile.Report) []reconcile.Result {
	var out []reconcile.Result
	for _, r := range rep.Results {
		if r.Kind == fanout.KindCluster && r.PR > 0 && r.Word() == "open" {
			out = append(out, r)
		}
	}
	return out
}

// mergeAndReport merges each pull request as a human and posts Flux's healthy verdict on its
// merge commit (one Kustomization status), 8 at a time.
func mergeAndReport(ctx context.Context, c *gh.Client, owner string, results []reconcile.Result) error {
	work := make(chan reconcile.Result)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				_, repo, _ := strings.Cut(r.Repo, "/")
				m, _, err := c.PullRequests.Merge(ctx, owner, repo, r.PR, "", &gh.PullRequestOptions{MergeMethod: "merge"})
				if err == nil {
					_, _, err = c.Repositories.CreateStatus(ctx, owner, repo, m.GetSHA(), &gh.RepoStatus{
						State: gh.String("success"), Context: gh.String("kustomization/flux-system/0c9c2e41")})
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("merging %s#%d and reporting it healthy: %w", r.Repo, r.PR, err))
					mu.Unlock()
				}
			}
		}()
	}
	for _, r := range results {
		work <- r
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}
