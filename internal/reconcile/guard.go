package reconcile

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// weight is what the removal guard weighs of one repo's decisions.
type weight struct {
	// repo is "owner/name", for the access refusal's lines.
	repo string
	// counted repos make the total maxRemovals is a share of: target and managed repos, not
	// the control repo.
	counted bool
	cluster bool
	// removed: the repo's managed content goes (a tombstone not emptied yet, or one that
	// could not be planned: taken for removed).
	removed bool
	// destroys counts the provisioned clusters whose machines the plan destroys.
	destroys int
	// losesComponent: a cluster repo's plan deletes a rendered platform component.
	losesComponent bool
	// accessRefused is policy.Diff's refusal of the repo's access plan (nil: within
	// maxAccessRemovals).
	accessRefused error
}

// fleetTotals is the size of the fleet a run limited to some repos stands in for: the target
// repos and cluster repos of the run's shard.
type fleetTotals struct{ repos, clusters int }

// guardInput is everything the removal guard decides on: the decisions' weights, the fleet a
// limited run stands in for (nil for a run over every repo), platform spec.maxRemovals, and
// whether the run was allowed past the limits (--allow-removals, --allow-access-removals).
type guardInput struct {
	weights                            []weight
	fleet                              *fleetTotals
	maxRemovals                        intstr.IntOrString
	allowRemovals, allowAccessRemovals bool
}

// guardVerdict is the removal guard's verdict: how many target repos the plan removes, the cap
// it was checked against, and why the run is refused (nil: it may write).
type guardVerdict struct {
	removals, max int
	refused       error
}

// guard refuses a plan that removes too much before anything is written: more target repos
// (or provisioned clusters destroyed) than spec.maxRemovals (a share of the repos, at least 1),
// every cluster repo, more cluster repos losing a platform component than maxRemovals (a
// clusterSelector that matches nothing), or more of one repo's grants than
// spec.access.maxAccessRemovals. It is a pure function of the decisions: an invalid
// maxRemovals is its only error.
func guard(in guardInput) (guardVerdict, error) {
	var removals, total, clusters, clustersRemoved, componentRemovals int
	for _, w := range in.weights {
		if w.counted {
			total++
		}
		if w.removed {
			removals++
		}
		removals += w.destroys
		if w.cluster {
			clusters++
			if w.removed {
				clustersRemoved++
			} else if w.losesComponent {
				componentRemovals++
			}
		}
	}
	if in.fleet != nil {
		// A run limited to some repos (an incremental apply or plan, a drift batch) weighs its
		// removals against the fleet, as the full run it stands in for does: against the repos
		// it planned, two clusters losing a component of a 30-cluster fleet would be refused.
		total, clusters = max(total, in.fleet.repos), max(clusters, in.fleet.clusters)
	}
	limit := in.maxRemovals
	most, err := intstr.GetScaledValueFromIntOrPercent(&limit, total, true)
	if err != nil {
		return guardVerdict{}, fmt.Errorf("platform spec.maxRemovals %q: %w", limit.String(), err)
	}
	most = max(most, 1)
	v := guardVerdict{removals: removals, max: most}
	var refused error
	switch {
	case in.allowRemovals:
	case removals > most:
		refused = fmt.Errorf("%w: %d of %d target repos would be removed, more than maxRemovals (%s of %d = %d); nothing was written. "+
			"If the control repo is right, re-run with --allow-removals", ErrTooManyRemovals, removals, total, limit.String(), total, most)
	case clustersRemoved > 0 && clustersRemoved == clusters:
		// maxRemovals is at least 1, so a one-cluster fleet would lose its cluster to an
		// emptied clusters/ directory without this.
		refused = fmt.Errorf("%w: every cluster repo (%d) would be removed; nothing was written. "+
			"If the control repo is right, re-run with --allow-removals", ErrTooManyRemovals, clustersRemoved)
	case componentRemovals > most:
		refused = fmt.Errorf("%w: %d of %d cluster repos would lose a platform component, more than maxRemovals (%s = %d); nothing was written. "+
			"A clusterSelector that matches no cluster does this (see the warnings); if the control repo is right, re-run with --allow-removals",
			ErrTooManyRemovals, componentRemovals, clusters, limit.String(), most)
	}
	v.refused = joinRefusals(refused, refuseAccess(in.weights, in.allowAccessRemovals))
	return v, nil
}

// refuseAccess turns every repo whose access plan exceeds maxAccessRemovals into one refusal of
// the run, unless allowed.
func refuseAccess(weights []weight, allow bool) error {
	if allow {
		return nil
	}
	var lines []string
	for _, w := range weights {
		if w.accessRefused == nil {
			continue
		}
		detail := w.accessRefused.Error()
		if re := (*policy.RemovalsError)(nil); errors.As(w.accessRefused, &re) {
			detail = re.Detail
		}
		lines = append(lines, w.repo+": "+detail)
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("%w in %d repo(s): %s; nothing was written. If the control repo is right, re-run with --allow-access-removals",
		ErrTooManyAccessRemovals, len(lines), strings.Join(lines, "; "))
}

// joinRefusals combines the target-removal and access-removal refusals into the run's one
// refusal, which a person lifts (needs-human, ReasonTooManyRemovals).
func joinRefusals(errs ...error) error {
	var out []error
	for _, e := range errs {
		if e != nil {
			out = append(out, e)
		}
	}
	var err error
	switch len(out) {
	case 0:
		return nil
	case 1:
		err = out[0]
	default:
		err = errors.Join(out...)
	}
	return report.Classify(err, report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonTooManyRemovals})
}

// weigh is what the guard weighs of each repo of the run.
func weigh(repos []*repoPlan) []weight {
	out := make([]weight, len(repos))
	for i, p := range repos {
		t, d := p.target(), p.content
		w := weight{repo: t.FullName(), counted: !isAccessEntry(p), cluster: t.Kind == fanout.KindCluster, destroys: p.destroys}
		w.removed = t.Removed && (d == nil || d.Action == pr.ActionRemove)
		w.losesComponent = w.cluster && d != nil && removesComponent(d)
		if p.access != nil {
			w.accessRefused = p.access.plan.Refused
		}
		out[i] = w
	}
	return out
}

// fleetTotalsOf is the fleet a run limited by Only stands in for (nil for a run over every
// repo).
func fleetTotalsOf(in runInput) *fleetTotals {
	if in.opts.Only == nil {
		return nil
	}
	var fl fleetTotals
	for _, t := range in.targets {
		if in.opts.Shard.Owns(t.Repo) {
			fl.repos++
			if t.Kind == fanout.KindCluster {
				fl.clusters++
			}
		}
	}
	return &fl
}

// removesComponent reports whether a cluster repo's plan deletes a rendered platform
// component, which Flux then prunes from the cluster: every file of the component goes and
// none comes. Moving a component's file into its directory (platform/<app>.yaml before
// per-component Kustomizations, platform/<app>/ since) removes nothing.
func removesComponent(d *pr.Decision) bool {
	removed, kept := map[string]bool{}, map[string]bool{}
	for _, f := range d.Files {
		c := platformComponent(f.Path)
		if c == "" {
			continue
		}
		if f.Op == pr.FileRemoved {
			removed[c] = true
		} else {
			kept[c] = true
		}
	}
	for c := range removed {
		if !kept[c] {
			return true
		}
	}
	return false
}

// platformComponent returns the platform component (or the tenancy policy) a cluster
// repo path belongs to, in today's layout (platform/<app>/...) or the one before
// (platform/<app>.yaml); "" for every other path.
func platformComponent(p string) string {
	rest, ok := strings.CutPrefix(p, "platform/")
	if !ok {
		return ""
	}
	if c, _, ok := strings.Cut(rest, "/"); ok {
		return c
	}
	if rest == "kustomization.yaml" {
		return ""
	}
	return strings.TrimSuffix(rest, ".yaml")
}
