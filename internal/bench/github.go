package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing/fstest"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// GitHubOptions size the GitHub measurement.
type GitHubOptions struct {
	// Clusters and Apps size the generated fleet (one repo per cluster, one
	// per 50 clusters for workspaces).
	Clusters, Apps int
	// Latency is added to every request in the timed runs (no-op, one
	// changed cluster, incremental plan).
	Latency time.Duration
	// Concurrency is reconcile's (repos worked on at once).
	Concurrency int
	// Logger receives progress; nil discards.
	Logger *slog.Logger
}

// Cost is what one reconcile (or series of runs) asked of GitHub, from the
// fake's request log.
type Cost struct {
	// Repos is the number of target repos; Changed how many were written.
	Repos, Changed int
	// Reads, Writes and ContentCreating count requests by class (writes
	// include the content-creating ones); NotModified is the reads answered
	// 304 (free on GitHub); Limited the requests refused by a limit (403/429).
	Reads, Writes, ContentCreating, NotModified, Limited int
	// RepoReads are the reads of one repo's resources (/repos/{owner}/{repo}/...);
	// the others (org listings, teams, the login) are per run.
	RepoReads int
	// Requests is every request of the run, App authentication included, and
	// Routes counts them by route ("GET /orgs/{org}/teams": 1), the request log
	// a figure is taken from.
	Requests int
	Routes   map[string]int
	// ContentRoutes counts the content-creating requests GitHub accepted by route.
	ContentRoutes map[string]int
	// Wall is the wall time of the run(s).
	Wall time.Duration
}

// FanOut is the time to fan a change out to every cluster repo under the
// default content-creation budget.
type FanOut struct {
	// Repos changed, in Runs reconciles (a run defers what the budget cannot
	// afford within the client's MaxWait; the next run picks it up).
	Repos, Runs int
	// Elapsed is the simulated time from the first run's start to the last
	// run's end; Wall the real time it took.
	Elapsed, Wall time.Duration
	// ContentWrites is the content-creating requests GitHub accepted;
	// Minimum the least time GitHub's limits allow for that many.
	ContentWrites int
	Minimum       time.Duration
	// Budget is the client's view: total waits, pauses after a 403, writes
	// refused rather than waited for.
	Waited  time.Duration
	Pauses  int64
	Refused int64
}

// Ratio is Elapsed over Minimum.
func (f FanOut) Ratio() float64 {
	if f.Minimum <= 0 {
		return 0
	}
	return float64(f.Elapsed) / float64(f.Minimum)
}

// Incremental is the time from a one-cluster change in the control repo to
// a plan, with a warm Renderer and the previous render at hand.
type Incremental struct {
	// Load is control.Load of the whole repo (from memory), Render the warm
	// render, Diff fanout.Changed, Plan reconcile.Plan of the changed repos
	// only against GitHub (with Latency per request).
	Load, Render, Diff, Plan time.Duration
	// Changed is the number of repos planned; Builds the kustomize builds
	// the render ran (0: every app came from the cache).
	Changed, Builds int
	// Requests is what the plan asked of GitHub.
	Requests int
	// FullPlan is, for comparison, reconcile.Plan of every target.
	FullPlan time.Duration
	// Org is one Forge.Org read (the org's teams and repo listing, which a
	// full plan starts with and a limited one skips), timed on its own after
	// the plan, for comparison.
	Org         time.Duration
	OrgRequests int
}

// Total is the time to a plan.
func (i Incremental) Total() time.Duration { return i.Load + i.Render + i.Diff + i.Plan }

// GitHubResult is the whole GitHub measurement.
type GitHubResult struct {
	Clusters, Repos int
	Latency         time.Duration
	Concurrency     int
	// Setup is the wall time to create and converge the fleet (no limits).
	Setup time.Duration
	// FirstRollout is the setup's first apply, which creates every repo and opens its first
	// pull request (no limits); Created the repos it created, and FirstRolloutMinimum the
	// least time GitHub's content limits allow for its content-creating requests.
	FirstRollout        Cost
	Created             int
	FirstRolloutMinimum time.Duration
	// Noop is a full reconcile with nothing to do.
	Noop Cost
	// OneCluster is a full reconcile after one cluster's value changed;
	// OneClusterOnly the same kind of change reconciled with Options.Only
	// set to fanout.Changed's list.
	OneCluster, OneClusterOnly Cost
	// Component is every run of the fan-out of one platform component
	// changed on every cluster.
	Component Cost
	FanOut    FanOut
	// OpenPRs is the fan-out of a second change to that component while the first one's pull
	// requests are still open: every changed repo's pull request is updated, none opened.
	OpenPRs       Cost
	OpenPRsFanOut FanOut
	Incremental   Incremental
	// Client is the measuring client's counters after everything.
	Client ghforge.Stats
}

// fleet is the control repo under measurement and its latest render.
type fleet struct {
	fs       fstest.MapFS
	repo     *control.Repo
	targets  []*fanout.Target
	renderer *fanout.Renderer
}

// edit changes one file of the control repo and loads and renders it again,
// returning the previous targets.
func (fl *fleet) edit(file, old, new string) error {
	f, ok := fl.fs[file]
	if !ok || !strings.Contains(string(f.Data), old) {
		return fmt.Errorf("editing %s: %q not found", file, old)
	}
	next := make(fstest.MapFS, len(fl.fs))
	for p, f := range fl.fs {
		next[p] = f
	}
	next[file] = &fstest.MapFile{Data: []byte(strings.Replace(string(f.Data), old, new, 1)), Mode: f.Mode}
	repo, err := control.Load(next)
	if err != nil {
		return fmt.Errorf("loading edited control repo: %w", err)
	}
	targets, err := fl.renderer.Render(repo)
	if err != nil {
		return fmt.Errorf("rendering edited control repo: %w", err)
	}
	fl.fs, fl.repo, fl.targets = next, repo, targets
	return nil
}

// metalClusters returns the files of clusters with an address range value,
// whose edit changes exactly one cluster repo.
func (fl *fleet) metalClusters() []string {
	var out []string
	for p, f := range fl.fs {
		if strings.HasPrefix(p, "clusters/") && strings.Contains(string(f.Data), "_range: ") {
			out = append(out, p)
		}
	}
	return out
}

// GitHub measures reconcile's cost on the fake GitHub for a fleet of
// o.Clusters clusters: it creates and converges the fleet with no limits,
// then, through a client with the default write budget, runs a no-op, a
// one-cluster change (full and targeted), an incremental plan, and the
// fan-out of a platform component to every cluster with GitHub's content
// limits on (80/min, 500/h) and the fake's clock skipped forward over every
// budget wait.
func GitHub(ctx context.Context, o GitHubOptions) (*GitHubResult, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.Concurrency <= 0 {
		o.Concurrency = ghforge.DefaultReadConcurrency
	}
	fl := &fleet{fs: fleetgen.Generate(fleetgen.Options{Clusters: o.Clusters, Apps: o.Apps, Seed: 1}), renderer: fanout.NewRenderer(fanout.Options{})}
	var err error
	if fl.repo, err = control.Load(fl.fs); err != nil {
		return nil, err
	}
	if fl.targets, err = fl.renderer.Render(fl.repo); err != nil {
		return nil, err
	}
	res := &GitHubResult{Clusters: o.Clusters, Repos: len(fl.targets), Latency: o.Latency, Concurrency: o.Concurrency}
	owner := fl.repo.Platform.Spec.Owner

	dir, err := os.MkdirTemp("", "fleetbot-bench-github-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	// Installation tokens outlive the run: the virtual clock skips hours of
	// budget waits that the token source (ghinstallation, on real time) never
	// sees, so it would not know to mint a new one.
	srv, stop, err := fakeGitHub(dir, fl.repo, githubtest.WithStartTime(start))
	if err != nil {
		return nil, err
	}
	defer stop()
	// Created after the server's clock, so it never reads ahead of it.
	clock := NewVirtualClock(start, srv.AdvanceClock)
	cacheDir := filepath.Join(dir, "snapshots")

	// Setup: create, merge and converge every repo, with no limits.
	log.Info("github: setting up the fleet", "repos", res.Repos)
	setupStart := time.Now()
	sc, err := ghforge.New(ctx, ghforge.Config{APIURL: srv.APIURL(), Token: githubtest.DefaultToken,
		Budget: ghforge.BudgetConfig{PerMinute: 1 << 30, PerHour: 1 << 30, Clock: clock}})
	if err != nil {
		return nil, err
	}
	sf := ghforge.NewForge(sc, ghforge.ForgeOptions{CacheDir: cacheDir, ContentTransport: ghforge.DefaultContentTransport})
	srv.ResetLog()
	firstStart := time.Now()
	rep, err := reconcile.Apply(ctx, sf, fl.repo, fl.targets, reconcile.Options{Concurrency: 16})
	if err != nil {
		return nil, fmt.Errorf("setup: first apply: %w", err)
	}
	res.FirstRollout = counts(srv)
	res.FirstRollout.Wall, res.FirstRollout.Repos = time.Since(firstStart), len(rep.Results)
	for _, r := range rep.Results {
		if r.Changed() {
			res.FirstRollout.Changed++
		}
		if r.Action == pr.ActionCreate {
			res.Created++
		}
	}
	res.FirstRolloutMinimum = MinimumTime(res.FirstRollout.ContentCreating, ghforge.DefaultPerMinute, ghforge.DefaultPerHour)
	human := platformAdmin(srv, fl.repo)
	if err := mergeAll(ctx, human, rep); err != nil {
		return nil, err
	}
	if _, err := reconcile.Apply(ctx, sf, fl.repo, fl.targets, reconcile.Options{Concurrency: 16}); err != nil {
		return nil, fmt.Errorf("setup: apply after merges: %w", err)
	}
	res.Setup = time.Since(setupStart)

	// The measuring client: the App with a fresh installation token (GitHub's
	// ETags vary by token, so nothing the setup's token cached is valid), the
	// default budget, and a new forge on the snapshot cache the setup left on
	// disk (as a restarted service would find it).
	mc, err := ghforge.New(ctx, ghforge.Config{APIURL: srv.APIURL(), AppID: srv.AppID(), PrivateKey: srv.AppPrivateKeyPEM(),
		Owner: owner, Budget: ghforge.BudgetConfig{Clock: clock}})
	if err != nil {
		return nil, err
	}
	mf := ghforge.NewForge(mc, ghforge.ForgeOptions{CacheDir: cacheDir, ContentTransport: ghforge.DefaultContentTransport})
	opts := reconcile.Options{Concurrency: o.Concurrency}
	if o.Latency > 0 {
		srv.Fault("*", githubtest.FaultSpec{Latency: o.Latency})
	}
	srv.SetContentCreationLimit(ghforge.DefaultPerMinute, ghforge.DefaultPerHour, true)

	// A no-op.
	log.Info("github: no-op")
	if res.Noop, err = measureApply(ctx, srv, mf, fl, opts); err != nil {
		return nil, fmt.Errorf("no-op: %w", err)
	}

	if res.Noop.Changed > 0 {
		return nil, fmt.Errorf("no-op: %d repos changed; the setup did not converge", res.Noop.Changed)
	}

	// One cluster's value, reconciled in full (what a push triggers).
	metal := fl.metalClusters()
	if len(metal) < 3 {
		return nil, errors.New("the generated fleet has fewer than 3 clusters with an address range")
	}
	log.Info("github: one changed cluster", "file", metal[0])
	if err := fl.edit(metal[0], ".0/24", ".0/25"); err != nil {
		return nil, err
	}
	if res.OneCluster, err = measureApply(ctx, srv, mf, fl, opts); err != nil {
		return nil, fmt.Errorf("one changed cluster: %w", err)
	}

	// Another cluster's value: the incremental plan, then a targeted apply.
	log.Info("github: incremental plan", "file", metal[1])

	if res.Incremental, err = measureIncremental(ctx, srv, mf, fl, metal[1], opts); err != nil {
		return nil, fmt.Errorf("incremental plan: %w", err)
	}
	prev := fl.targets
	if err := fl.edit(metal[2], ".0/24", ".0/25"); err != nil {
		return nil, err
	}
	changed, _ := fanout.Changed(prev, fl.targets)
	only := opts
	only.Only = changed
	if res.OneClusterOnly, err = measureApply(ctx, srv, mf, fl, only); err != nil {
		return nil, fmt.Errorf("one changed cluster, targeted: %w", err)
	}
	// Bring the incremental cluster's repo along too, so the fan-out
	// below starts from a converged fleet.
	if _, err := reconcile.Apply(ctx, mf, fl.repo, fl.targets, opts); err != nil {
		return nil, fmt.Errorf("converging before the fan-out: %w", err)
	}

	// One platform component on every cluster: fan out under the budget.
	srv.ClearFaults()
	// An idle hour first, so the fan-out starts with both windows empty
	// and its minimum is a function of its own writes only.
	if err := clock.Sleep(ctx, time.Hour); err != nil {
		return nil, err
	}
	log.Info("github: fan-out of one component to every cluster")
	if err := fl.edit("catalog/monitoring/app.yaml", "v1.0.0", "v1.1.0"); err != nil {
		return nil, err
	}
	if res.Component, res.FanOut, err = measureFanOut(ctx, srv, mc, mf, fl, clock, opts, log); err != nil {
		return nil, fmt.Errorf("fan-out: %w", err)
	}

	// The same component changed again before anyone merged: every pull request is updated.
	if err := clock.Sleep(ctx, time.Hour); err != nil {
		return nil, err
	}
	log.Info("github: fan-out of a second change to the open pull requests")
	if err := fl.edit("catalog/monitoring/app.yaml", "v1.1.0", "v1.2.0"); err != nil {
		return nil, err
	}
	if res.OpenPRs, res.OpenPRsFanOut, err = measureFanOut(ctx, srv, mc, mf, fl, clock, opts, log); err != nil {
		return nil, fmt.Errorf("fan-out to open pull requests: %w", err)
	}
	res.Client = mc.Stats()
	return res, nil
}

// platformAdmin is a client of alice, a member of the platform's admin teams: an administrator
// of every target repo, who merges fleetbot's pull requests past their protection (its
// required code-owner review), as GitHub lets an administrator unless the protection is
// enforced for administrators too.
func platformAdmin(srv *githubtest.Server, repo *control.Repo) *gh.Client {
	token := srv.CreateUser("alice")
	for _, team := range repo.Platform.Spec.Admins {
		srv.AddTeamMember(repo.Platform.Spec.Owner, team, "alice", "member")
	}
	return srv.ClientWithToken(token)
}

// mergeAll merges, as a human, every pull request a report opened.
func mergeAll(ctx context.Context, c *gh.Client, rep *reconcile.Report) error {
	work := make(chan reconcile.Result)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range work {
				owner, repo, _ := strings.Cut(r.Repo, "/")
				if _, _, err := c.PullRequests.Merge(ctx, owner, repo, r.PR, "", &gh.PullRequestOptions{MergeMethod: "merge"}); err != nil {
					select {
					case errs <- fmt.Errorf("merging %s#%d: %w", r.Repo, r.PR, err):
					default:
					}
				}
			}
		}()
	}
	for _, r := range rep.Results {
		if r.PR > 0 {
			work <- r
		}
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// counts sums the fake's request log since its last reset.
func counts(srv *githubtest.Server) Cost {
	c := Cost{Routes: map[string]int{}, ContentRoutes: map[string]int{}}
	for _, r := range srv.Requests() {
		c.Requests++
		c.Routes[r.Route]++
		if strings.HasPrefix(r.Route, "POST /app/") {
			continue // minting an installation token: authentication, not a write to the fleet
		}
		switch {
		case r.Status == http.StatusForbidden || r.Status == http.StatusTooManyRequests:
			c.Limited++
		case r.Status == http.StatusNotModified:
			c.NotModified++
		}
		switch r.Class {
		case githubtest.Read:
			c.Reads++
			if strings.HasPrefix(r.Route, "GET /repos/{owner}/{repo}") {
				c.RepoReads++
			}
		case githubtest.Write:
			c.Writes++
		case githubtest.ContentCreating:
			c.Writes++
			if r.Status < 400 {
				c.ContentCreating++
				c.ContentRoutes[r.Route]++
			}
		}
	}
	return c
}

// measureApply runs one reconcile.Apply from a clean request log.
func measureApply(ctx context.Context, srv *githubtest.Server, f reconcile.Forge, fl *fleet, opts reconcile.Options) (Cost, error) {
	srv.ResetLog()
	start := time.Now()
	rep, err := reconcile.Apply(ctx, f, fl.repo, fl.targets, opts)
	wall := time.Since(start)
	if err != nil {
		return Cost{}, err
	}
	c := counts(srv)
	c.Wall, c.Repos = wall, len(rep.Results)
	for _, r := range rep.Results {
		if r.Changed() {
			c.Changed++
		}
	}
	return c, nil
}

// measureIncremental times a one-cluster change to a plan: load, warm
// render, desired-state diff and a plan of the changed repos only; and, for
// comparison, a plan of every repo.
func measureIncremental(ctx context.Context, srv *githubtest.Server, f *ghforge.Forge, fl *fleet, file string, opts reconcile.Options) (Incremental, error) {
	var inc Incremental
	prev := fl.targets
	before := fl.renderer.Stats().Builds
	t0 := time.Now()
	next := make(fstest.MapFS, len(fl.fs))
	for p, f := range fl.fs {
		next[p] = f
	}
	old := next[file]
	next[file] = &fstest.MapFile{Data: []byte(strings.Replace(string(old.Data), ".0/24", ".0/25", 1)), Mode: old.Mode}
	repo, err := control.Load(next)
	if err != nil {
		return inc, err
	}
	t1 := time.Now()
	targets, err := fl.renderer.Render(repo)
	if err != nil {
		return inc, err
	}
	t2 := time.Now()
	changed, removed := fanout.Changed(prev, targets)
	t3 := time.Now()
	if len(removed) > 0 {
		return inc, fmt.Errorf("a value change removed targets %v", removed)
	}
	srv.ResetLog()
	only := opts
	only.Only = changed
	rep, err := reconcile.Plan(ctx, f, repo, targets, only)
	if err != nil {
		return inc, err
	}
	t4 := time.Now()
	if !rep.Changed() {
		return inc, errors.New("the incremental plan found nothing to do")
	}
	inc = Incremental{Load: t1.Sub(t0), Render: t2.Sub(t1), Diff: t3.Sub(t2), Plan: t4.Sub(t3),
		Changed: len(changed), Builds: fl.renderer.Stats().Builds - before, Requests: len(srv.Requests())}
	fl.fs, fl.repo, fl.targets = next, repo, targets

	srv.ResetLog()
	start := time.Now()
	if _, err := f.Org(ctx, repo.Platform.Spec.Owner); err != nil {
		return inc, err
	}
	inc.Org, inc.OrgRequests = time.Since(start), len(srv.Requests())

	start = time.Now()
	if _, err := reconcile.Plan(ctx, f, repo, targets, opts); err != nil {
		return inc, err
	}
	inc.FullPlan = time.Since(start)
	return inc, nil
}

// measureFanOut applies the fleet, then again the repos each run left
// deferred, until none is left, skipping the clock over budget waits and,
// between runs, to when the budget can afford the next repo within the
// client's MaxWait (what a service's scheduler would do).
func measureFanOut(ctx context.Context, srv *githubtest.Server, c *ghforge.Client, f *ghforge.Forge, fl *fleet, clock *VirtualClock, opts reconcile.Options, log *slog.Logger) (Cost, FanOut, error) {
	srv.ResetLog()
	budget0 := c.Stats().Budget
	var fo FanOut
	wall, start := time.Now(), clock.Now()
	changed := map[string]bool{}
	run := opts
	for {
		fo.Runs++
		rep, err := reconcile.Apply(ctx, f, fl.repo, fl.targets, run)
		if err != nil && !errors.Is(err, reconcile.ErrFailed) {
			return Cost{}, fo, err
		}
		var left []string
		for _, r := range rep.Results {
			switch {
			case r.Err != nil:
				left = append(left, strings.TrimPrefix(r.Repo, fl.repo.Platform.Spec.Owner+"/"))
			case r.Changed():
				changed[r.Repo] = true
			}
		}
		log.Info("github: fan-out run", "run", fo.Runs, "done", len(changed), "left", len(left), "simulated", clock.Now().Sub(start).Round(time.Second))
		if len(left) == 0 {
			break
		}
		if fo.Runs >= 100 {
			return Cost{}, fo, fmt.Errorf("%d repos still not done after %d runs: %v", len(left), fo.Runs, err)
		}
		// The next run takes only what this one left (deferred or failed).
		run.Only = left
		// A commit, its branch move and a pull request: what the forge prices a changed repo at.
		_, perRepo := f.Requests(pr.Cost{Commits: 1, BranchMoves: 1, PROpens: 1})
		if _, wait := c.Budget().Afford(perRepo); wait > c.Budget().Config().MaxWait {
			if err := clock.Sleep(ctx, wait-c.Budget().Config().MaxWait); err != nil {
				return Cost{}, fo, err
			}
		}
	}
	fo.Elapsed, fo.Wall = clock.Now().Sub(start), time.Since(wall)
	cost := counts(srv)
	cost.Wall, cost.Repos, cost.Changed = fo.Wall, len(fl.targets), len(changed)
	fo.Repos, fo.ContentWrites = len(changed), cost.ContentCreating
	fo.Minimum = MinimumTime(fo.ContentWrites, ghforge.DefaultPerMinute, ghforge.DefaultPerHour)
	b := c.Stats().Budget
	fo.Waited, fo.Pauses, fo.Refused = b.Waited-budget0.Waited, b.Pauses-budget0.Pauses, b.Refused-budget0.Refused
	return cost, fo, nil
}

// fakeGitHub starts the fake GitHub of a measurement under dir/github: in memory, without a
// primary rate limit, its installation tokens outliving the run (a virtual clock may skip hours
// the token source never sees), serving HTTP on 127.0.0.1, and holding the teams repo names.
// stop closes it.
func fakeGitHub(dir string, repo *control.Repo, opts ...githubtest.Option) (srv *githubtest.Server, stop func(), err error) {
	opts = append([]githubtest.Option{githubtest.WithPrimaryLimit(0), githubtest.WithTokenLifetime(1000 * time.Hour)}, opts...)
	gitDir, cleanup := ramDir(filepath.Join(dir, "github"))
	srv, err = githubtest.New(gitDir, opts...)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	srv.DisablePersistence()
	hs := httptest.NewServer(srv)
	srv.URL = hs.URL
	for _, ref := range repo.TeamRefs() {
		srv.CreateTeam(repo.Platform.Spec.Owner, ref.Slug)
	}
	return srv, func() {
		srv.Close()
		hs.Close()
		cleanup()
	}, nil
}

// ramDir returns a new directory on /dev/shm when that RAM file system has 2 GiB free, else
// fallback; and a func that removes the /dev/shm one. The fake GitHub keeps its repositories
// there: it stands in for a service on other machines, and on this machine's disk each of its
// git objects is an inode to create, CPU the measured process would not compete with for real.
func ramDir(fallback string) (string, func()) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Bavail*uint64(st.Bsize) >= 2<<30 {
		if d, err := os.MkdirTemp("/dev/shm", "fleetbot-bench-github-"); err == nil {
			return d, func() { _ = os.RemoveAll(d) }
		}
	}
	return fallback, func() {}
}
