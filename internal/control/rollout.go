package control

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// RestWave names the implicit last wave: the clusters no declared wave matches.
const RestWave = "(rest)"

// WaveGroup is one wave of a rollout with the clusters it holds, in wave order.
type WaveGroup struct {
	// Name is the declared wave's name, or RestWave.
	Name string
	// Index is the wave's position in spec.rollout.waves; -1 for RestWave.
	Index int
	// Clusters are the names of the wave's clusters, sorted.
	Clusters []string
}

// Waves assigns every cluster of the repo to its wave: the first declared wave whose
// clusterSelector matches it, or the implicit last wave. Waves that hold no cluster are
// kept (a plan shows them empty); RestWave is present only when it holds clusters. With no
// waves declared, every cluster is in one RestWave.
func (r *Repo) Waves() []WaveGroup {
	var declared []Wave
	if r.Platform != nil {
		declared = r.Platform.Spec.Rollout.Waves
	}
	out := make([]WaveGroup, len(declared))
	for i, w := range declared {
		out[i] = WaveGroup{Name: w.Name, Index: i}
	}
	rest := WaveGroup{Name: RestWave, Index: -1}
	for _, c := range r.Clusters { // sorted by name, so each wave's list is too
		i := waveOf(declared, c.Metadata.Labels)
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

// waveOf returns the index of the first wave matching labels, or -1.
func waveOf(waves []Wave, labels map[string]string) int {
	for i, w := range waves {
		if ok, err := w.ClusterSelector.Matches(labels); err == nil && ok {
			return i
		}
	}
	return -1
}

// SoakDuration is the wave's soak as a duration (0 when unset). The value has been
// validated at load; an invalid one reads as 0.
func (w Wave) SoakDuration() time.Duration {
	if w.Soak == "" {
		return 0
	}
	d, err := time.ParseDuration(w.Soak)
	if err != nil {
		return 0
	}
	return d
}

// rollout checks spec.rollout: its waves (see waves) and a health timeout that is a positive
// duration.
func (v *validator) rollout(r RolloutSpec, src Source) {
	v.waves(r.Waves, src, "spec.rollout.waves")
	v.rolloutRules(r, src)
	if r.HealthTimeout != "" {
		d, err := time.ParseDuration(r.HealthTimeout)
		switch {
		case err != nil:
			v.add(src.At("spec.rollout.healthTimeout"), "use a Go duration such as 30m, 1h or 1h30m (default 30m)",
				"invalid healthTimeout %q", r.HealthTimeout)
		case d <= 0:
			v.add(src.At("spec.rollout.healthTimeout"), "use how long Flux has to report a merge healthy before the rollout halts, e.g. 30m; leave it out for 30m",
				"healthTimeout %s is not positive", r.HealthTimeout)
		}
	}
}

// waves checks one list of waves (spec.rollout.waves, or a component's rollout.waves at
// base): every wave named once with a valid name, a valid selector, a count and a duration
// that are not negative, and a known merge mode.
func (v *validator) waves(waves []Wave, src Source, base string) {
	seen := map[string]int{}
	for i, w := range waves {
		path := fmt.Sprintf("%s.%d", base, i)
		switch {
		case w.Name == "":
			v.add(src.At(path), "name the wave, e.g. name: canary", "wave %d has no name", i+1)
		default:
			if errs := validation.IsDNS1123Label(w.Name); len(errs) > 0 {
				v.add(src.At(path+".name"), dnsLabelHint, "invalid wave name %q: %s", w.Name, strings.Join(errs, "; "))
			}
		}
		if j, dup := seen[w.Name]; dup && w.Name != "" {
			v.add(src.At(path+".name"), "give each wave its own name", "wave %q is declared twice (first at %s)", w.Name, src.At(fmt.Sprintf("%s.%d.name", base, j)))
		} else {
			seen[w.Name] = i
		}
		if w.ClusterSelector == nil {
			v.add(src.At(path), "add a clusterSelector (matchLabels or matchExpressions); {} matches every cluster left",
				"wave %q has no clusterSelector", w.Name)
		}
		v.selector(w.ClusterSelector, src, path+".clusterSelector")
		if w.MaxParallel < 0 {
			v.add(src.At(path+".maxParallel"), "use 0 for no cap, or the number of pull requests the wave may have open at once",
				"wave %q: maxParallel %d is negative", w.Name, w.MaxParallel)
		}
		if w.Soak != "" {
			d, err := time.ParseDuration(w.Soak)
			switch {
			case err != nil:
				v.add(src.At(path+".soak"), "use a Go duration such as 30m, 2h or 1h30m", "wave %q: invalid soak %q", w.Name, w.Soak)
			case d < 0:
				v.add(src.At(path+".soak"), "use 0 for no soak, or how long the wave must stay healthy before the next one starts",
					"wave %q: soak %s is negative", w.Name, w.Soak)
			}
		}
		switch w.Merge {
		case "", MergeManual, MergeAuto:
		default:
			v.add(src.At(path+".merge"), "use manual or auto, or leave it out for spec.pullRequests.merge", "wave %q: invalid merge mode %q", w.Name, w.Merge)
		}
		v.waveRules(w, src, path)
	}
}

// rolloutWarnings lists waves that are legal but almost always a mistake: a wave matching no
// cluster (most likely a typo: the rollout skips it), and a wave whose clusters an earlier
// wave already takes (a cluster goes to the first wave that matches it). A component's waves
// are weighed against the clusters that run the component.
func rolloutWarnings(r *Repo) Issues {
	src := r.Platform.Source
	is := waveWarnings(r.Platform.Spec.Rollout.Waves, r.Clusters, src, "spec.rollout.waves", "")
	is = append(is, rolloutRuleWarnings(r)...)
	for i, comp := range r.Platform.Spec.Components {
		if comp.Rollout == nil {
			continue
		}
		var running []*Cluster
		for _, c := range r.Clusters {
			if ok, err := comp.ClusterSelector.Matches(c.Metadata.Labels); err == nil && ok {
				running = append(running, c)
			}
		}
		is = append(is, waveWarnings(comp.Rollout.Waves, running, src, fmt.Sprintf("spec.components.%d.rollout.waves", i),
			" running component "+comp.App)...)
	}
	return is
}

// waveWarnings is rolloutWarnings for one list of waves over clusters; of names them in
// the message ("" for the whole fleet).
func waveWarnings(waves []Wave, clusters []*Cluster, src Source, base, of string) Issues {
	var is Issues
	for j, w := range waves {
		path := fmt.Sprintf("%s.%d.clusterSelector", base, j)
		var matched, taken []string
		takenBy := -1
		for _, c := range clusters {
			if ok, err := w.ClusterSelector.Matches(c.Metadata.Labels); err != nil || !ok {
				continue
			}
			matched = append(matched, c.Metadata.Name)
			if i := waveOf(waves[:j], c.Metadata.Labels); i >= 0 {
				taken = append(taken, c.Metadata.Name)
				if takenBy < 0 {
					takenBy = i
				}
			}
		}
		switch {
		case len(matched) == 0:
			is.Add(src.At(path), "check the labels against clusters/*.yaml, or remove the wave",
				"wave %s: clusterSelector matches none of the %d clusters%s", w.Name, len(clusters), of)
		case len(taken) > 0:
			what := fmt.Sprintf("%d of its %d clusters", len(taken), len(matched))
			if len(taken) == len(matched) {
				what = fmt.Sprintf("all of its %d clusters", len(matched))
			}
			is.Add(src.At(path), "a cluster belongs to the first wave that matches it: narrow this selector or reorder the waves",
				"wave %s overlaps earlier waves: %s (e.g. %s) are already in wave %s", w.Name, what, taken[0], waves[takenBy].Name)
		}
	}
	return is
}

// ClusterAutoMerge reports whether fleetbot's pull requests in the named cluster's repo may
// be merged automatically, which turns on the repo's "Allow auto-merge" setting: its wave's
// merge mode when the wave sets one, else spec.pullRequests.merge, or an auto wave of a
// component the cluster runs that declares its own waves. Whether one pull request is
// merged automatically is its wave's merge in the revision's RolloutPlan.
func (r *Repo) ClusterAutoMerge(name string) bool {
	if r == nil || r.Platform == nil {
		return false
	}
	auto := r.Platform.Spec.PullRequests.Merge == MergeAuto
	c := r.Cluster(name)
	if c == nil {
		return auto
	}
	waves := r.Platform.Spec.Rollout.Waves
	if i := waveOf(waves, c.Metadata.Labels); i >= 0 && waves[i].Merge != "" {
		auto = waves[i].Merge == MergeAuto
	}
	for _, comp := range r.Platform.Spec.Components {
		if comp.Rollout == nil {
			continue
		}
		if ok, err := comp.ClusterSelector.Matches(c.Metadata.Labels); err != nil || !ok {
			continue
		}
		if i := waveOf(comp.Rollout.Waves, c.Metadata.Labels); i >= 0 && comp.Rollout.Waves[i].Merge == MergeAuto {
			auto = true
		}
	}
	return auto
}

// HasRollout reports whether changes roll out in waves: spec.rollout.waves, or a component's
// own waves, is declared. Then the cluster repos carry Flux's health reporting and every run
// goes through the rollout gate.
func (r *Repo) HasRollout() bool {
	if r == nil || r.Platform == nil {
		return false
	}
	if len(r.Platform.Spec.Rollout.Waves) > 0 {
		return true
	}
	for _, comp := range r.Platform.Spec.Components {
		if comp.Rollout != nil && len(comp.Rollout.Waves) > 0 {
			return true
		}
	}
	return false
}

// HealthTimeout is spec.rollout.healthTimeout as a duration, 0 when unset (the rollout gate's
// default applies). The value has been validated at load.
func (r *Repo) HealthTimeout() time.Duration {
	if r == nil || r.Platform == nil || r.Platform.Spec.Rollout.HealthTimeout == "" {
		return 0
	}
	d, err := time.ParseDuration(r.Platform.Spec.Rollout.HealthTimeout)
	if err != nil || d < 0 {
		return 0
	}
	return d
}

// FleetWaves names the list of spec.rollout.waves in a RolloutPlan's Lists.
const FleetWaves = "spec.rollout.waves"

// ComponentWaves returns the name of a component's list of waves in a RolloutPlan's Lists.
func ComponentWaves(app string) string { return "component " + app }

// PlannedWave is one wave of a RolloutPlan, its settings combined from the lists it comes
// from.
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

// RolloutPlan is the waves one control-repo revision takes through the fleet.
type RolloutPlan struct {
	// Lists are the lists of waves the plan combines, in precedence order (ComponentWaves
	// names, then FleetWaves).
	Lists []string
	Waves []PlannedWave
}

// RolloutPlan returns the waves a change takes when it touches the named platform components
// that declare their own waves (components) and, when fleet is true, anything else (another
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
func (r *Repo) RolloutPlan(components []string, fleet bool) RolloutPlan {
	type list struct {
		name  string
		waves []Wave
	}
	var lists []list
	want := map[string]bool{}
	for _, c := range components {
		want[c] = true
	}
	if r.Platform != nil {
		for _, comp := range r.Platform.Spec.Components {
			if want[comp.App] && comp.Rollout != nil {
				lists = append(lists, list{ComponentWaves(comp.App), comp.Rollout.Waves})
			}
		}
	}
	if fleet || len(lists) == 0 {
		var waves []Wave
		if r.Platform != nil {
			waves = r.Platform.Spec.Rollout.Waves
		}
		lists = append(lists, list{FleetWaves, waves})
	}
	defaultAuto := r.Platform != nil && r.Platform.Spec.PullRequests.Merge == MergeAuto
	var spec RolloutSpec
	if r.Platform != nil {
		spec = r.Platform.Spec.Rollout
	}
	wave := func(w Wave) PlannedWave {
		auto := defaultAuto
		if w.Merge != "" {
			auto = w.Merge == MergeAuto
		}
		return plannedRules(PlannedWave{Name: w.Name, MaxParallel: w.MaxParallel, Soak: w.SoakDuration(), AutoMerge: auto}, spec, w)
	}
	plan := RolloutPlan{}
	for _, l := range lists {
		plan.Lists = append(plan.Lists, l.name)
	}
	if len(lists) == 1 {
		// One list: as declared, its empty waves kept (a plan shows them).
		waves := lists[0].waves
		out := make([]PlannedWave, len(waves))
		for i, w := range waves {
			out[i] = wave(w)
		}
		rest := wave(Wave{Name: RestWave})
		for _, c := range r.Clusters {
			if i := waveOf(waves, c.Metadata.Labels); i >= 0 {
				out[i].Clusters = append(out[i].Clusters, c.Metadata.Name)
			} else {
				rest.Clusters = append(rest.Clusters, c.Metadata.Name)
			}
		}
		if len(rest.Clusters) > 0 {
			out = append(out, rest)
		}
		plan.Waves = out
		return plan
	}
	// Several lists: one wave per distinct place, in lexicographic order of the places.
	type group struct {
		place []int
		wave  PlannedWave
	}
	groups := map[string]*group{}
	for _, c := range r.Clusters { // sorted by name, so each wave's list is too
		place := make([]int, len(lists))
		key := make([]string, len(lists))
		for k, l := range lists {
			place[k] = waveOf(l.waves, c.Metadata.Labels)
			if place[k] < 0 {
				place[k] = len(l.waves)
			}
			key[k] = fmt.Sprint(place[k])
		}
		g, ok := groups[strings.Join(key, ",")]
		if !ok {
			g = &group{place: place, wave: PlannedWave{AutoMerge: true}}
			names := make([]string, len(lists))
			rest := true
			for k, l := range lists {
				w := Wave{Name: RestWave}
				if place[k] < len(l.waves) {
					w, rest = l.waves[place[k]], false
				}
				names[k] = w.Name
				pw := wave(w)
				if pw.MaxParallel > 0 && (g.wave.MaxParallel == 0 || pw.MaxParallel < g.wave.MaxParallel) {
					g.wave.MaxParallel = pw.MaxParallel
				}
				g.wave.Soak = max(g.wave.Soak, pw.Soak)
				g.wave.AutoMerge = g.wave.AutoMerge && pw.AutoMerge
				combineRules(&g.wave, pw, k == 0)
			}
			g.wave.Name = strings.Join(names, "+")
			if rest {
				g.wave.Name = RestWave
			}
			groups[strings.Join(key, ",")] = g
		}
		g.wave.Clusters = append(g.wave.Clusters, c.Metadata.Name)
	}
	ordered := make([]*group, 0, len(groups))
	for _, g := range groups {
		ordered = append(ordered, g)
	}
	sort.Slice(ordered, func(a, b int) bool { return slices.Compare(ordered[a].place, ordered[b].place) < 0 })
	for _, g := range ordered {
		plan.Waves = append(plan.Waves, g.wave)
	}
	return plan
}

// PausedFile is the control repo file that pauses every rollout while it exists (`fleetbot
// rollout pause` writes it, `fleetbot rollout resume` removes it). Its text says why.
const PausedFile = "rollout/paused"

// MaxPauseBytes bounds rollout/paused: a line or a short paragraph saying why.
const MaxPauseBytes = 4096

// Pause is a paused rollout, recorded in the control repo.
type Pause struct {
	// Reason is the file's text, trimmed ("" when it says nothing).
	Reason string
}
