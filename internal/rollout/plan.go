package rollout

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// RestWave names the implicit last wave: the clusters no declared wave matches.
const RestWave = "(rest)"

// FleetWaves names the list of spec.rollout.waves in a Plan's Lists.
const FleetWaves = "spec.rollout.waves"

// ComponentWaves returns the name of a component's list of waves in a Plan's Lists.
func ComponentWaves(app string) string { return "component " + app }

// WaveGroup is one declared wave of spec.rollout.waves with the clusters it holds, in wave
// order.
type WaveGroup struct {
	// Name is the declared wave's name, or RestWave.
	Name string
	// Index is the wave's position in spec.rollout.waves; -1 for RestWave.
	Index int
	// Clusters are the names of the wave's clusters, sorted.
	Clusters []string
}

// Waves assigns every cluster of the control repo to its wave of spec.rollout.waves: the first
// declared wave whose clusterSelector matches it (control.WaveOf), or the implicit last wave.
// Waves that hold no cluster are kept (a plan shows them empty); RestWave is present only when
// it holds clusters. With no waves declared, every cluster is in one RestWave.
func (r *Rollouts) Waves() []WaveGroup {
	declared := r.fleetWaves()
	out := make([]WaveGroup, len(declared))
	for i, w := range declared {
		out[i] = WaveGroup{Name: w.Name, Index: i}
	}
	rest := WaveGroup{Name: RestWave, Index: -1}
	for _, c := range r.clusters() { // sorted by name, so each wave's list is too
		i := control.WaveOf(declared, c.Metadata.Labels)
		if i < 0 {
			rest.Clusters = append(rest.Clusters, c.Metadata.Name)
			continue
		}
		out[i].Clusters = append(out[i].Clusters, c.Metadata.Name)
	}
	if len(rest.Clusters) > 0 {
		out = append(out, rest)
	}
	return out
}

// PlannedWave is one wave of a Plan, its settings combined from the lists it comes from.
type PlannedWave struct {
	// Name is the wave's name; a combined wave joins its lists' wave names with "+".
	Name string
	// Clusters are the wave's clusters, sorted.
	Clusters []string
	// MaxParallel is the smallest cap of the combined waves (0: no cap).
	MaxParallel int
	// Soak is the longest soak of the combined waves.
	Soak time.Duration
	// AutoMerge: every combined wave merges automatically (its merge, else
	// spec.pullRequests.merge, is auto).
	AutoMerge bool
	// MaxUnavailable and MaxFailures are the failure budgets of the combined waves, each with
	// its defaults (maxUnavailable 0, maxFailures its maxUnavailable): every one applies, so
	// the smallest binds. The implicit last wave has a budget of 0.
	MaxUnavailable, MaxFailures []intstr.IntOrString
	// Rollback: a combined wave rolls back on failure (its onFailure, else
	// spec.rollout.onFailure, is rollback); otherwise the rollout halts.
	Rollback bool
	// Approvals name the combined waves that require approval (approval: required): the wave
	// starts once each of them is approved (rollout/approvals/<name>.yaml).
	Approvals []string
}

// Plan is the waves one control-repo revision takes through the fleet.
type Plan struct {
	// Lists are the lists of waves the plan combines, in precedence order (ComponentWaves
	// names, then FleetWaves).
	Lists []string
	Waves []PlannedWave
}

// waveList is one list of declared waves a plan combines, and its name in Plan.Lists.
type waveList struct {
	name  string
	waves []control.Wave
}

// Plan returns the waves a change takes when it touches the named platform components that
// declare their own waves (components) and, when fleet is true, anything else (another
// component, flux/fleetbot.yaml, a README): spec.rollout.waves.
//
// One list applies as declared. Several lists combine into their intersection, so that a
// change is never rolled out faster than its first list says and each further list refines
// it: every cluster is placed in each list (the first wave whose selector matches it, else
// that list's implicit last wave), clusters with the same place in every list form one wave,
// and those waves are ordered by the place in the first list, then the second, and so on.
// The lists are in precedence order: the components' own, in spec.components order, then
// spec.rollout.waves. A combined wave takes the longest soak, the smallest maxParallel, and
// merges automatically only when each of its waves does. With neither components nor fleet
// (a revision that changes no cluster) the plan is spec.rollout.waves.
//
// The result depends only on the control repo and the arguments: the same revision plans the
// same waves on every run.
func (r *Rollouts) Plan(components []string, fleet bool) Plan {
	lists := r.planLists(components, fleet)
	plan := Plan{}
	for _, l := range lists {
		plan.Lists = append(plan.Lists, l.name)
	}
	if len(lists) == 1 {
		plan.Waves = r.asDeclared(lists[0].waves)
	} else {
		plan.Waves = r.combined(lists)
	}
	return plan
}

// planLists are the lists of waves a change takes, in precedence order: the own waves of the
// touched components, in spec.components order, then spec.rollout.waves when fleet is true or
// no component list applies.
func (r *Rollouts) planLists(components []string, fleet bool) []waveList {
	var lists []waveList
	if r.platform() != nil {
		for _, comp := range r.platform().Spec.Components {
			if comp.Rollout != nil && slices.Contains(components, comp.App) {
				lists = append(lists, waveList{ComponentWaves(comp.App), comp.Rollout.Waves})
			}
		}
	}
	if fleet || len(lists) == 0 {
		lists = append(lists, waveList{FleetWaves, r.fleetWaves()})
	}
	return lists
}

// asDeclared plans one list as declared: its waves in order, empty ones kept (a plan shows
// them), then the implicit last wave when it holds clusters.
func (r *Rollouts) asDeclared(waves []control.Wave) []PlannedWave {
	out := make([]PlannedWave, len(waves))
	for i, w := range waves {
		out[i] = r.planned(w)
	}
	rest := r.planned(control.Wave{Name: RestWave})
	for _, c := range r.clusters() {
		if i := control.WaveOf(waves, c.Metadata.Labels); i >= 0 {
			out[i].Clusters = append(out[i].Clusters, c.Metadata.Name)
		} else {
			rest.Clusters = append(rest.Clusters, c.Metadata.Name)
		}
	}
	if len(rest.Clusters) > 0 {
		out = append(out, rest)
	}
	return out
}

// placedGroup is the combined wave of the clusters with one place in every list.
type placedGroup struct {
	place []int
	wave  PlannedWave
}

// combined plans several lists: one wave per distinct place of a cluster in the lists, in
// lexicographic order of the places.
func (r *Rollouts) combined(lists []waveList) []PlannedWave {
	groups := map[string]*placedGroup{}
	for _, c := range r.clusters() { // sorted by name, so each wave's list is too
		place, key := placeIn(lists, c.Metadata.Labels)
		g, ok := groups[key]
		if !ok {
			g = &placedGroup{place: place, wave: r.combinedWave(lists, place)}
			groups[key] = g
		}
		g.wave.Clusters = append(g.wave.Clusters, c.Metadata.Name)
	}
	ordered := make([]*placedGroup, 0, len(groups))
	for _, g := range groups {
		ordered = append(ordered, g)
	}
	sort.Slice(ordered, func(a, b int) bool { return slices.Compare(ordered[a].place, ordered[b].place) < 0 })
	out := make([]PlannedWave, 0, len(ordered))
	for _, g := range ordered {
		out = append(out, g.wave)
	}
	return out
}

// placeIn is a cluster's place in each list (the index of its wave, the list's length for its
// implicit last wave) and the places as one key.
func placeIn(lists []waveList, labels map[string]string) ([]int, string) {
	place := make([]int, len(lists))
	key := make([]string, len(lists))
	for k, l := range lists {
		place[k] = control.WaveOf(l.waves, labels)
		if place[k] < 0 {
			place[k] = len(l.waves)
		}
		key[k] = fmt.Sprint(place[k])
	}
	return place, strings.Join(key, ",")
}

// combinedWave is the wave of one place in every list: its waves' names joined with "+"
// (RestWave when it is every list's implicit last wave), the smallest cap, the longest soak,
// auto-merge only when each of its waves merges automatically, and every wave's rules.
func (r *Rollouts) combinedWave(lists []waveList, place []int) PlannedWave {
	g := PlannedWave{AutoMerge: true}
	names := make([]string, len(lists))
	rest := true
	for k, l := range lists {
		w := control.Wave{Name: RestWave}
		if place[k] < len(l.waves) {
			w, rest = l.waves[place[k]], false
		}
		names[k] = w.Name
		pw := r.planned(w)
		if pw.MaxParallel > 0 && (g.MaxParallel == 0 || pw.MaxParallel < g.MaxParallel) {
			g.MaxParallel = pw.MaxParallel
		}
		g.Soak = max(g.Soak, pw.Soak)
		g.AutoMerge = g.AutoMerge && pw.AutoMerge
		combineRules(&g, pw, k == 0)
	}
	g.Name = strings.Join(names, "+")
	if rest {
		g.Name = RestWave
	}
	return g
}

// planned is one declared wave as planned alone: its cap, soak and merge mode (its own, else
// spec.pullRequests.merge), with its rules (plannedRules).
func (r *Rollouts) planned(w control.Wave) PlannedWave {
	var spec control.PlatformSpec
	if r.platform() != nil {
		spec = r.platform().Spec
	}
	auto := spec.PullRequests.Merge == control.MergeAuto
	if w.Merge != "" {
		auto = w.Merge == control.MergeAuto
	}
	return plannedRules(PlannedWave{Name: w.Name, MaxParallel: w.MaxParallel, Soak: w.SoakDuration(), AutoMerge: auto}, spec.Rollout, w)
}

// plannedRules adds a declared wave's failure budget, failure action and approval to its
// planned wave. A wave that declares no budget has none (nil: 0 failed, 0 unavailable); the
// implicit last wave (a Wave with only its name) takes the rollout's failure action and needs
// no approval.
func plannedRules(pw PlannedWave, spec control.RolloutSpec, w control.Wave) PlannedWave {
	if w.MaxUnavailable != nil || w.MaxFailures != nil {
		unavailable, failures := w.Budget()
		pw.MaxUnavailable = []intstr.IntOrString{unavailable}
		pw.MaxFailures = []intstr.IntOrString{failures}
	}
	pw.Rollback = spec.FailureAction(w) == control.OnFailureRollback
	if w.Approval == control.ApprovalRequired {
		pw.Approvals = []string{w.Name}
	}
	return pw
}

// combineRules adds the next list's wave (pw; first: it is the first) to a combined wave:
// every budget applies (a wave without one has 0, which binds), it rolls back when any of its
// waves does, and needs the approvals of all of them.
func combineRules(g *PlannedWave, pw PlannedWave, first bool) {
	if first {
		g.MaxUnavailable, g.MaxFailures = pw.MaxUnavailable, pw.MaxFailures
	} else {
		g.MaxUnavailable = allLimits(g.MaxUnavailable, pw.MaxUnavailable)
		g.MaxFailures = allLimits(g.MaxFailures, pw.MaxFailures)
	}
	g.Rollback = g.Rollback || pw.Rollback
	for _, a := range pw.Approvals {
		if !slices.Contains(g.Approvals, a) {
			g.Approvals = append(g.Approvals, a)
		}
	}
}

// allLimits is the budget made of two that both apply: nil (0) when either is.
func allLimits(a, b []intstr.IntOrString) []intstr.IntOrString {
	if a == nil || b == nil {
		return nil
	}
	return append(slices.Clone(a), b...)
}
