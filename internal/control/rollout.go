package control

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// WaveOf returns the index of the first of waves whose clusterSelector matches labels, or -1:
// a cluster belongs to the first wave that matches it (the schema's rule, which validation's
// warnings, the repo setting of ClusterAutoMerge and the rollout's plan read).
func WaveOf(waves []Wave, labels map[string]string) int {
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
			if i := WaveOf(waves[:j], c.Metadata.Labels); i >= 0 {
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
// merged automatically is its wave's merge in the revision's plan (rollout.Rollouts.Plan).
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
	if i := WaveOf(waves, c.Metadata.Labels); i >= 0 && waves[i].Merge != "" {
		auto = waves[i].Merge == MergeAuto
	}
	for _, comp := range r.Platform.Spec.Components {
		if comp.Rollout == nil {
			continue
		}
		if ok, err := comp.ClusterSelector.Matches(c.Metadata.Labels); err != nil || !ok {
			continue
		}
		if i := WaveOf(comp.Rollout.Waves, c.Metadata.Labels); i >= 0 && comp.Rollout.Waves[i].Merge == MergeAuto {
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
