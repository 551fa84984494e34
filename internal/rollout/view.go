package rollout

import (
	"fmt"
	"strings"
	"sync"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// AllClusters names the one bar of the rollout picture when the control repo declares no
// waves: every change reaches every cluster at once, so the fleet is one wave.
const AllClusters = "all clusters"

// The segments of a wave's bar, in the order they are drawn: where each cluster of the wave
// stands for the control-repo revision. The status view decides a cluster's segment from its
// row (and View.HaltedOn); the rollout picture counts them per wave.
const (
	// SegHealthy: the default branch carries the desired state and Flux reports it healthy.
	SegHealthy = "healthy"
	// SegDone: the default branch carries the desired state; Flux has reported no verdict
	// on it (yet, or ever: the local forge has no commit statuses). Archived (skipped)
	// repos count here too: fleetbot will not change them.
	SegDone = "done"
	// SegOpen: the desired state waits in fleetbot's open pull request.
	SegOpen = "open"
	// SegPending: not written yet: fleetbot's next apply changes the repo, or the write
	// waits for the budget or for the wave's turn in the rollout.
	SegPending = "pending"
	// SegHalted: stopped until a human acts: Flux reports the merged state failing (which
	// halts a rollout), the rollout gate halted on this cluster, a human pushed to the bot
	// branch, or the repo could not be read or written.
	SegHalted = "halted"
)

// Segments lists the segment names in drawing order.
var Segments = []string{SegHealthy, SegDone, SegOpen, SegPending, SegHalted}

// Bar is one bar of the rollout picture: how many of a wave's clusters are in each segment.
type Bar struct {
	Name string `json:"name"`
	// State is the rollout gate's verdict on the wave (done, soaking, active, waiting,
	// halted) when the view comes from a plan that evaluated the rollout; "" otherwise.
	State   string `json:"state,omitempty"`
	Total   int    `json:"total"`
	Healthy int    `json:"healthy"`
	Done    int    `json:"done"`
	Open    int    `json:"open"`
	Pending int    `json:"pending"`
	Halted  int    `json:"halted"`
}

// Count returns the number of the wave's clusters in one segment.
func (w *Bar) Count(seg string) int {
	switch seg {
	case SegHealthy:
		return w.Healthy
	case SegDone:
		return w.Done
	case SegOpen:
		return w.Open
	case SegPending:
		return w.Pending
	case SegHalted:
		return w.Halted
	}
	return 0
}

// add counts one cluster in segment seg.
func (w *Bar) add(seg string) {
	w.Total++
	switch seg {
	case SegHealthy:
		w.Healthy++
	case SegDone:
		w.Done++
	case SegOpen:
		w.Open++
	case SegPending:
		w.Pending++
	case SegHalted:
		w.Halted++
	}
}

// InSync is how many of the wave's clusters carry the desired state (healthy or done).
func (w *Bar) InSync() int { return w.Healthy + w.Done }

// Label says the whole bar in words, every count included (the SVG's accessible name).
func (w *Bar) Label() string {
	name := w.Name
	if name != AllClusters {
		name = "wave " + name
	}
	parts := make([]string, len(Segments))
	for i, seg := range Segments {
		parts[i] = fmt.Sprintf("%d %s", w.Count(seg), seg)
	}
	s := fmt.Sprintf("%s: %d %s: %s", name, w.Total, plural(w.Total, "cluster", "clusters"), strings.Join(parts, ", "))
	if w.State != "" {
		s += "; rollout " + w.State
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// View is the rollout picture's model of a fleet: which wave each cluster is in (as the gate
// assigns them, Rollouts.Waves), the waves in order, and the gate's verdict on each.
type View struct {
	// declared: the control repo declares waves (otherwise one AllClusters wave).
	declared bool
	order    []string
	of       map[string]string
	// size counts the control repo's clusters per wave.
	size  map[string]int
	state map[string]string
	halt  string
}

// newView assigns the control repo's clusters to waves as the gate does, through cache when
// given, and adds the gate's verdict st (nil: none evaluated) (Rollouts.View). A nil control
// repo has no waves.
func newView(r *Rollouts, st *Status, cache *ViewCache) View {
	var x View
	if cache != nil {
		x = cache.assign(r)
	} else {
		x = assignWaves(r)
	}
	x.state = map[string]string{}
	if st != nil && x.declared {
		for _, w := range st.Waves {
			x.state[w.Name] = string(w.State)
		}
		if st.Halted != nil {
			x.halt = st.Halted.Cluster
		}
	}
	return x
}

// Declared reports whether the control repo declares waves (otherwise the picture is one
// AllClusters bar).
func (x *View) Declared() bool { return x.declared }

// WaveOf is the wave of a cluster ("" when it is in none: a removed cluster).
func (x *View) WaveOf(cluster string) string { return x.of[cluster] }

// HaltedOn is the cluster the gate halted the rollout on ("" none).
func (x *View) HaltedOn() string { return x.halt }

// assignWaves puts every cluster of the control repo in its wave.
func assignWaves(r *Rollouts) View {
	x := View{of: map[string]string{}, size: map[string]int{}}
	c := r.repo()
	if c == nil {
		return x
	}
	x.declared = c.Platform != nil && len(c.Platform.Spec.Rollout.Waves) > 0
	if !x.declared {
		if len(c.Clusters) == 0 {
			return x
		}
		x.order = []string{AllClusters}
		for _, cl := range c.Clusters {
			x.of[cl.Metadata.Name] = AllClusters
		}
		x.size[AllClusters] = len(c.Clusters)
		return x
	}
	for _, g := range r.Waves() {
		x.order = append(x.order, g.Name)
		x.size[g.Name] = len(g.Clusters)
		for _, n := range g.Clusters {
			x.of[n] = g.Name
		}
	}
	return x
}

// ViewCache keeps the wave assignment of the last control repo seen. Assigning evaluates
// every wave's selector on every cluster (a third of a 10,000-repo status page); serve's
// control repo changes only with an apply, while the page is built on every request. The zero
// value is ready to use.
type ViewCache struct {
	mu  sync.Mutex
	ctl *control.Repo
	x   View
}

// assign returns the wave assignment of r's control repo, computed once per control repo. The
// maps it returns are shared and never written after.
func (wc *ViewCache) assign(r *Rollouts) View {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if wc.ctl != r.repo() || wc.x.of == nil {
		wc.ctl, wc.x = r.repo(), assignWaves(r)
	}
	return wc.x
}

// Row is one cluster as the picture counts it: its name and the segment it stands in.
type Row struct {
	Cluster, Segment string
}

// Bars counts the cluster rows per wave, in the waves' order. A wave without a row is dropped
// (a filtered view, or a plan limited to some repos), except, with keepEmpty, a declared wave
// that matches no cluster at all: it shows as an empty bar.
func (x *View) Bars(rows []Row, keepEmpty bool) []Bar {
	if len(x.order) == 0 {
		return nil
	}
	pos := make(map[string]int, len(x.order))
	out := make([]Bar, len(x.order))
	for i, name := range x.order {
		pos[name] = i
		out[i] = Bar{Name: name, State: x.state[name]}
	}
	for _, r := range rows {
		name, ok := x.of[r.Cluster]
		if !ok {
			continue // a removed cluster: in no wave
		}
		out[pos[name]].add(r.Segment)
	}
	kept := out[:0]
	for _, w := range out {
		if w.Total > 0 || (keepEmpty && x.size[w.Name] == 0) {
			kept = append(kept, w)
		}
	}
	return kept
}
