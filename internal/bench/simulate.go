package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
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

// SimulateOptions size the rollout simulation (Simulate).
type SimulateOptions struct {
	// Clusters and Apps size the generated fleet.
	Clusters, Apps int
	// Budget is every wave's maxUnavailable ("3%", "0"); every wave rolls back on failure.
	Budget string
	// SilentPercent of each wave's clusters never report, FailingPercent report a failure
	// (rounded down per wave, so a wave never holds more than the fleet's share).
	SilentPercent, FailingPercent int
	// MaxChecks bounds the wave checks (a simulation that does not converge fails).
	MaxChecks int
	Logger    *slog.Logger
}

// SimulateResult is one simulated rollout: a change to every cluster in five waves on the fake
// GitHub with an injected clock, Flux played by the harness (a share of each wave silent, a
// share failing), no human acting on the rollout: no approval, skip or rollback command.
type SimulateResult struct {
	Clusters int
	Budget   string
	// Silent and Failing are the clusters that never reported and that failed, in the waves
	// the rollout reached.
	Silent, Failing int
	// Checks are the wave checks run (full applies, what serve runs on each event and
	// wake-up) from the control change to the end; GateRequests the requests of one gate read
	// (every cluster's newest pull request, merge commit and statuses), the rest of a check
	// being its pull requests.
	Checks, GateRequests int
	// Requests, Writes and ContentCreating of every check.
	Requests, Writes, ContentCreating int
	// Waiting is the injected clock's time from the control change to the end (soaks, health
	// timeouts); Paced the least time GitHub's content-creation limits allow for each check's
	// writes, summed; ToDone their sum: the time from control merge to done at GitHub's limits.
	Waiting, Paced, ToDone time.Duration
	// Done: the rollout completed; RolledBack: it went over budget and rolled back, Restored
	// repos then merged their restore and were reported healthy.
	Done, RolledBack bool
	Restored         int
	// HaltedWave is the wave that went over budget.
	HaltedWave string
}

// RequestsPerCheck is the average requests of a wave check.
func (r *SimulateResult) RequestsPerCheck() float64 {
	if r.Checks == 0 {
		return 0
	}
	return float64(r.Requests) / float64(r.Checks)
}

// simulatedWaves are RolloutWaves with a failure budget, merge: auto and onFailure: rollback.
func simulatedWaves(budget string) string {
	var b strings.Builder
	b.WriteString("  rollout:\n    onFailure: rollback\n    healthTimeout: 30m\n    waves:\n")
	for _, w := range []struct{ name, sel string }{
		{"canary", "{env: dev, region: eu}"}, {"dev", "{env: dev}"}, {"staging", "{env: staging}"},
		{"prod-eu", "{env: prod, region: eu}"}, {"prod", "{env: prod}"},
	} {
		fmt.Fprintf(&b, "      - name: %s\n        clusterSelector: {matchLabels: %s}\n        soak: 10m\n        merge: auto\n        maxUnavailable: %s\n", w.name, w.sel, yamlBudget(budget))
	}
	return b.String()
}

// yamlBudget is a budget as YAML: a percentage quoted, a count as a number.
func yamlBudget(b string) string {
	if strings.HasSuffix(b, "%") {
		return fmt.Sprintf("%q", b)
	}
	return b
}

// Simulate runs one rollout to its end (done, or rolled back and restored).
func Simulate(ctx context.Context, o SimulateOptions) (*SimulateResult, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.MaxChecks <= 0 {
		o.MaxChecks = 60
	}
	fl := &fleet{fs: fleetgen.Generate(fleetgen.Options{Clusters: o.Clusters, Apps: o.Apps, Seed: 1}), renderer: fanout.NewRenderer(fanout.Options{})}
	var err error
	if fl.repo, err = control.Load(fl.fs); err != nil {
		return nil, err
	}
	if fl.targets, err = fl.renderer.Render(fl.repo); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fleetbot-bench-simulate-")
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
	owner := fl.repo.Platform.Spec.Owner
	human := platformAdmin(srv, fl.repo)
	sim := &simulation{ctx: ctx, srv: srv, f: f, fl: fl, human: human, owner: owner, log: log,
		opts: reconcile.Options{Concurrency: 16, Now: srv.Now, Source: "1111111111111111111111111111111111111111"},
		res:  &SimulateResult{Clusters: o.Clusters, Budget: o.Budget}}

	// Setup: every repo created and merged, Flux reporting it healthy: the last healthy
	// revision a rollback restores.
	log.Info("simulate: setting up the fleet", "repos", len(fl.targets))
	rep, err := reconcile.Apply(ctx, f, fl.repo, fl.targets, sim.opts)
	if err != nil {
		return nil, fmt.Errorf("setup: first apply: %w", err)
	}
	if err := mergeAndReport(ctx, human, owner, withPR(rep.Results)); err != nil {
		return nil, err
	}
	if _, err := reconcile.Apply(ctx, f, fl.repo, fl.targets, sim.opts); err != nil {
		return nil, fmt.Errorf("setup: apply after merges: %w", err)
	}

	// The control change: waves with their budget (and Flux's health objects in every cluster
	// repo), rolled out without a human.
	if err := fl.set("platform.yaml", string(fl.fs["platform.yaml"].Data)+simulatedWaves(o.Budget)); err != nil {
		return nil, err
	}
	sim.opts.Source = "2222222222222222222222222222222222222222"
	sim.fate = fates(fl.repo, o)
	var clusters []string
	for _, t := range fl.targets {
		if t.Kind == fanout.KindCluster {
			clusters = append(clusters, t.Repo)
		}
	}
	start := srv.Now()
	for !sim.over() {
		if sim.res.Checks >= o.MaxChecks {
			return sim.res, fmt.Errorf("the rollout did not end within %d wave checks", o.MaxChecks)
		}
		if err := sim.check(); err != nil {
			return sim.res, err
		}
	}
	if sim.res.GateRequests, _, err = measureGate(ctx, srv, f, owner, clusters, 0); err != nil {
		return nil, err
	}
	sim.res.Done = sim.last.Done
	sim.res.Waiting = srv.Now().Sub(start)
	sim.res.ToDone = sim.res.Waiting + sim.res.Paced
	return sim.res, nil
}

// fate is what the simulated Flux reports for a cluster's merge: "success", "failure", or ""
// (never reports).
type fate map[string]string

// fates gives, in each wave, the last FailingPercent of its clusters a failure and the
// SilentPercent before them silence (rounded down per wave); the others report success.
func fates(repo *control.Repo, o SimulateOptions) fate {
	out := fate{}
	for _, g := range rollout.New(repo, nil).Waves() {
		n := len(g.Clusters)
		failing, silent := n*o.FailingPercent/100, n*o.SilentPercent/100
		for i, c := range g.Clusters {
			switch {
			case i >= n-failing:
				out[repo.ClusterRepo(c)] = "failure"
			case i >= n-failing-silent:
				out[repo.ClusterRepo(c)] = ""
			default:
				out[repo.ClusterRepo(c)] = "success"
			}
		}
	}
	return out
}

// simulation is one Simulate in progress.
type simulation struct {
	ctx   context.Context
	srv   *githubtest.Server
	f     *ghforge.Forge
	fl    *fleet
	human *gh.Client
	owner string
	log   *slog.Logger
	opts  reconcile.Options
	fate  fate
	res   *SimulateResult
	last  *rollout.Status
}

// over reports whether the rollout ended: done, or rolled back with every restore healthy.
func (s *simulation) over() bool {
	if s.last == nil {
		return false
	}
	return s.last.Done || (s.last.Rollback != nil && s.last.Rollback.Restored())
}

// check runs one wave check (a full apply, as serve does on every event), then plays GitHub's
// auto-merge and Flux on what it opened, and moves the clock to the next wake-up when nothing
// else would happen.
func (s *simulation) check() error {
	s.srv.ResetLog()
	rep, err := reconcile.Apply(s.ctx, s.f, s.fl.repo, s.fl.targets, s.opts)
	if err != nil && !errors.Is(err, reconcile.ErrFailed) {
		return fmt.Errorf("wave check %d: %w", s.res.Checks+1, err)
	}
	cost := counts(s.srv)
	s.res.Checks++
	s.res.Requests += cost.Requests
	s.res.Writes += cost.Writes
	s.res.ContentCreating += cost.ContentCreating
	s.res.Paced += MinimumTime(cost.ContentCreating, ghforge.DefaultPerMinute, ghforge.DefaultPerHour)
	st := rep.Rollout
	if st == nil {
		return errors.New("the check evaluated no rollout")
	}
	s.last = st
	s.log.Info("simulate: wave check", "check", s.res.Checks, "requests", cost.Requests, "halted", st.Halted != nil, "done", st.Done)
	if st.Halted != nil && s.res.HaltedWave == "" {
		s.res.HaltedWave = st.Halted.Wave
	}
	if rb := st.Rollback; rb != nil {
		s.res.RolledBack = true
		return s.restore(rb)
	}
	merged, err := s.mergeOpen(rep)
	if err != nil {
		return err
	}
	if merged == 0 && !s.over() {
		next := rollout.New(s.fl.repo, s.opts.Now).NextWake(st)
		if next.IsZero() {
			return fmt.Errorf("wave check %d: nothing opened, nothing to wait for, and the rollout is not over (halted: %v)", s.res.Checks, st.Halted)
		}
		s.srv.AdvanceClock(next.Sub(s.srv.Now()) + time.Second)
	}
	return nil
}

// mergeOpen merges every pull request the check left open, as GitHub's auto-merge does
// (merge: auto), and reports each merge as the cluster's fate says.
func (s *simulation) mergeOpen(rep *reconcile.Report) (int, error) {
	n := 0
	for _, r := range rep.Results {
		if r.Kind != fanout.KindCluster || r.PR == 0 || r.Merged {
			continue
		}
		_, repo, _ := strings.Cut(r.Repo, "/")
		p, _, err := s.human.PullRequests.Get(s.ctx, s.owner, repo, r.PR)
		if err != nil {
			return n, err
		}
		if p.GetState() != "open" {
			continue
		}
		if err := s.mergeAs(repo, r.PR, s.fate[repo]); err != nil {
			return n, err
		}
		switch s.fate[repo] {
		case "failure":
			s.res.Failing++
		case "":
			s.res.Silent++
		}
		n++
	}
	return n, nil
}

// restore merges the open restore pull requests of a rollback and reports them healthy.
func (s *simulation) restore(rb *rollout.RollbackStatus) error {
	merged := 0
	s.res.Restored = 0
	for _, r := range rb.Restores {
		switch r.State {
		case rollout.RestoreOpen:
			if err := s.mergeAs(r.Repo, r.PR, "success"); err != nil {
				return err
			}
			merged++
		case rollout.RestoreHealthy, rollout.RestoreDone:
			s.res.Restored++
		case rollout.RestoreError:
			return fmt.Errorf("restore of %s: %s", r.Repo, r.Reason)
		}
	}
	if merged == 0 && !rb.Restored() {
		return fmt.Errorf("the rollback is stuck: %+v", rb)
	}
	return nil
}

// mergeAs merges repo's pull request number and posts Flux's verdict state ("" none).
func (s *simulation) mergeAs(repo string, number int, state string) error {
	m, _, err := s.human.PullRequests.Merge(s.ctx, s.owner, repo, number, "", &gh.PullRequestOptions{MergeMethod: "merge"})
	if err != nil {
		return fmt.Errorf("merging %s#%d: %w", repo, number, err)
	}
	if state == "" {
		return nil
	}
	_, _, err = s.human.Repositories.CreateStatus(s.ctx, s.owner, repo, m.GetSHA(), &gh.RepoStatus{
		State: gh.String(state), Context: gh.String("kustomization/flux-system/0c9c2e41")})
	return err
}

// withPR are the results with a pull request.
func withPR(results []reconcile.Result) []reconcile.Result {
	var out []reconcile.Result
	for _, r := range results {
		if r.PR > 0 {
			out = append(out, r)
		}
	}
	return out
}
