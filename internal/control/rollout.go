package control

import (
	"fmt"
	"strings"
	"time"

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

// rollout checks spec.rollout: every wave named once with a valid name, a valid selector,
// a count and a duration that are not negative, and a known merge mode.
func (v *validator) rollout(r RolloutSpec, src Source) {
	seen := map[string]int{}
	for i, w := range r.Waves {
		path := fmt.Sprintf("spec.rollout.waves.%d", i)
		switch {
		case w.Name == "":
			v.add(src.At(path), "name the wave, e.g. name: canary", "wave %d has no name", i+1)
		default:
			if errs := validation.IsDNS1123Label(w.Name); len(errs) > 0 {
				v.add(src.At(path+".name"), dnsLabelHint, "invalid wave name %q: %s", w.Name, strings.Join(errs, "; "))
			}
		}
		if j, dup := seen[w.Name]; dup && w.Name != "" {
			v.add(src.At(path+".name"), "give each wave its own name", "wave %q is declared twice (first at %s)", w.Name, src.At(fmt.Sprintf("spec.rollout.waves.%d.name", j)))
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
	}
}

// rolloutWarnings lists waves that are legal but almost always a mistake: a wave matching no
// cluster (most likely a typo: the rollout skips it), and a wave whose clusters an earlier
// wave already takes (a cluster goes to the first wave that matches it).
func rolloutWarnings(r *Repo) Issues {
	var is Issues
	waves := r.Platform.Spec.Rollout.Waves
	src := r.Platform.Source
	for j, w := range waves {
		path := fmt.Sprintf("spec.rollout.waves.%d.clusterSelector", j)
		var matched, taken []string
		takenBy := -1
		for _, c := range r.Clusters {
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
				"wave %s: clusterSelector matches none of the %d clusters", w.Name, len(r.Clusters))
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

// ClusterAutoMerge reports whether fleetbot's pull requests in the named cluster's repo are
// merged automatically: its wave's merge mode when the wave sets one, else
// spec.pullRequests.merge.
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
		return waves[i].Merge == MergeAuto
	}
	return auto
}
