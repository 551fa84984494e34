package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// ErrHeld marks a repo whose change waits for its rollout wave (platform spec.rollout.waves):
// the repo is reported deferred, nothing is written to its pull request, and a later run
// (a webhook, the Action's schedule) opens it once the gate admits it.
var ErrHeld = report.Classify(errors.New("held by the rollout"), report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonHeldByRollout})

// rolloutVerdict is the gate phase's output: the rollout slice's verdict for the run's
// revision (its status nil without waves), and the repos it holds and why.
type rolloutVerdict struct {
	rollout.Verdict
	// held is, by repo name, why the gate holds the repo's new pull request (an error wrapping
	// ErrHeld, deferred until the rollout's next check); the repo's access still converges.
	held map[string]error
}

// gate asks the rollout slice (rollout.Rollouts.Gate) for its verdict on the run's revision over every
// cluster repo (the run's and its observers), from what the forge shows of their pull
// requests, and holds the repos it does not admit (holds). An open pull request is always
// updated in place. Without declared waves it holds nothing.
func gate(ctx context.Context, f Forge, in runInput, repos, observers []*repoPlan) (*rolloutVerdict, error) {
	if !in.rollouts.Enabled() {
		return &rolloutVerdict{}, nil
	}
	rd := f.Capabilities().Rollout
	if rd == nil {
		return nil, fmt.Errorf("platform spec.rollout.waves: this forge cannot read pull request merges and commit statuses " +
			"(it declares no rollout reader), which a rollout in waves is gated on; use the github or local forge, or remove spec.rollout")
	}
	clusters := gateRepos(repos, observers, fanout.KindCluster)
	workspaces := gateRepos(repos, observers, fanout.KindWorkspace)
	fl := in.repo.Fleet()
	names := make([]string, 0, len(clusters)+len(workspaces))
	for _, c := range slices.Concat(clusters, workspaces) {
		names = append(names, c.target().Repo)
	}
	prs, err := rd.RolloutPRs(ctx, fl.Owner, names, fl.DefaultBranch, fl.PRBranch)
	if err != nil {
		return nil, fmt.Errorf("reading the rollout state of %d cluster and workspace repos: %w", len(names), err)
	}
	gin := make([]rollout.Cluster, 0, len(clusters))
	for _, c := range clusters {
		p, ok := prs[c.target().Repo]
		gin = append(gin, rollout.Cluster{Name: c.target().Name, Repo: c.target().Repo, Decision: c.content, PR: p, Found: ok})
	}
	var gws []rollout.Workspace
	for _, w := range workspaces {
		p, ok := prs[w.target().Repo]
		gws = append(gws, rollout.Workspace{Name: w.target().Name, Repo: w.target().Repo, Decision: w.content, PR: p, Found: ok})
	}
	v := in.rollouts.Gate(in.opts.Source, gin, gws)
	return &rolloutVerdict{Verdict: v, held: holds(in.rollouts, &v, repos)}, nil
}

// gateRepos are the repos of kind (cluster or workspace) the gate weighs: the run's own
// (content targets; a tombstone is removed and in no wave) and its observers, by repo name.
func gateRepos(repos, observers []*repoPlan, kind fanout.Kind) []*repoPlan {
	var out []*repoPlan
	for _, p := range slices.Concat(repos, observers) {
		if _, ok := p.role.(accessEntry); ok || p.target().Kind != kind || p.target().Removed {
			continue
		}
		out = append(out, p)
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].target().Repo < out[b].target().Repo })
	return out
}

// holds is, by repo name, why the gate holds each of the run's repos whose decision would open
// a new pull request (rollout.Verdict.Holds: a cluster the rollout holds, a workspace while one
// of its clusters is held). A repo that failed, or whose decision writes nothing, is not held.
// The hold is deferred until the rollout's next check, when time alone can change the verdict.
func holds(ro *rollout.Rollouts, v *rollout.Verdict, repos []*repoPlan) map[string]error {
	held := map[string]error{}
	for _, p := range repos {
		why, ok := v.Holds(p.target())
		if !ok || p.content == nil || !p.content.Writes() || p.res.Err != nil || !opensPR(p.content) {
			continue
		}
		err := fmt.Errorf("%s: %w: %s", p.target().FullName(), ErrHeld, why)
		held[p.target().Repo] = report.Classify(err, report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonHeldByRollout, RetryAt: ro.NextWake(v.Status)})
	}
	return held
}

// holdAll marks the result of every repo the gate holds deferred (its Err the hold).
func (v *rolloutVerdict) holdAll(repos []*repoPlan) {
	for _, p := range repos {
		if err, ok := v.held[p.target().Repo]; ok {
			p.res.Err = err
		}
	}
}

// prOptions is the pull request options a repo is executed with: the run's, a cluster's own
// merge mode when the fleet rolls out in waves, and what its wave says of its pull request.
func (v *rolloutVerdict) prOptions(env *decideEnv, t *fanout.Target) pr.Options {
	o := env.prOptions(t)
	if m, ok := v.Merge[t.Repo]; ok {
		o.AutoMerge, o.Waves = m.AutoMerge, m.Waves
	}
	return o
}

// opensPR reports whether a decision would open a new pull request (or create the repo):
// what the gate holds. Updating, closing or blocking an open one is never held.
func opensPR(d *pr.Decision) bool {
	return d != nil && (d.OpenPR || d.CreateRepo || len(d.Bootstrap) > 0)
}

// withoutContent is d without its content writes (repo creation, bootstrap, bot branch and
// pull request): what a held repo still executes, i.e. its access plan.
func withoutContent(d *pr.Decision) *pr.Decision {
	c := *d
	c.CreateRepo, c.Bootstrap, c.Changes = false, nil, nil
	c.PushBranch, c.OpenPR, c.UpdatePR = false, false, false
	return &c
}
