package status

import (
	"fmt"
	"strings"
	"sync"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// AllClusters names the one bar of the rollout picture when the control repo declares no
// waves: every change reaches every cluster at once, so the fleet is one wave.
const AllClusters = "all clusters"

// The segments of a wave's bar, in the order they are drawn: where each cluster of the wave
// stands for the control-repo revision.
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

// Wave is one bar of the rollout picture: how many of a wave's clusters are in each segment.
type Wave struct {
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
func (w *Wave) Count(seg string) int {
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

// InSync is how many of the wave's clusters carry the desired state (healthy or done).
func (w *Wave) InSync() int { return w.Healthy + w.Done }

// Label says the whole bar in words, every count included (the SVG's accessible name).
func (w *Wave) Label() string {
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

// segmentOf says which segment of its wave's bar a cluster row falls in; halt is the cluster
// the rollout gate halted on ("" none).
func segmentOf(r *Repo, halt string) string {
	failing := r.Health == pr.StatusFailure || r.Health == pr.StatusError
	switch {
	case r.State == StateUnhealthy, r.State == StateFailed, r.State == StateBlocked, halt != "" && r.Name == halt && r.Kind == string(fanout.KindCluster),
		r.State == StateInSync && failing:
		return SegHalted
	case r.State == StateInSync && r.Health == pr.StatusSuccess:
		return SegHealthy
	case r.State == StateInSync, r.State == StateSkipped:
		return SegDone
	case r.State == StatePROpen:
		return SegOpen
	}
	return SegPending
}

// waveIndex is how Build assigned clusters to waves: the waves in order, each cluster's wave,
// and the gate's verdicts.
type waveIndex struct {
	// declared: the control repo declares waves (otherwise one AllClusters wave).
	declared bool
	order    []string
	of       map[string]string
	// size counts the control repo's clusters per wave.
	size  map[string]int
	state map[string]string
	halt  string
}

// newWaveIndex assigns the control repo's clusters to waves as the rollout gate does
// (control.Repo.Waves), through cache when given, and adds the gate's verdicts. A nil control
// repo has no waves.
func newWaveIndex(c *control.Repo, st *rollout.Status, cache *waveCache) waveIndex {
	var x waveIndex
	if cache != nil {
		x = cache.assign(c)
	} else {
		x = assignWaves(c)
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

// assignWaves puts every cluster of c in its wave.
func assignWaves(c *control.Repo) waveIndex {
	x := waveIndex{of: map[string]string{}, size: map[string]int{}}
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
	for _, g := range c.Waves() {
		x.order = append(x.order, g.Name)
		x.size[g.Name] = len(g.Clusters)
		for _, n := range g.Clusters {
			x.of[n] = g.Name
		}
	}
	return x
}

// waveCache keeps the wave assignment of the last control repo seen. Assigning evaluates
// every wave's selector on every cluster (a third of a 10,000-repo page); serve's control
// repo changes only with an apply, while the page is built on every request.
type waveCache struct {
	mu  sync.Mutex
	ctl *control.Repo
	x   waveIndex
}

// assign returns c's wave assignment, computed once per control repo. The maps it returns are
// shared and never written after.
func (wc *waveCache) assign(c *control.Repo) waveIndex {
	wc.mu.Lock()
	defer wc.mu.Unlock()
	if wc.ctl != c || wc.x.of == nil {
		wc.ctl, wc.x = c, assignWaves(c)
	}
	return wc.x
}

// bars counts the cluster rows per wave, in the waves' order. A wave without a row is dropped
// (a filtered view, or a plan limited to some repos), except, with keepEmpty, a declared wave
// that matches no cluster at all: it shows as an empty bar.
func (x *waveIndex) bars(repos []Repo, keepEmpty bool) []Wave {
	if len(x.order) == 0 {
		return nil
	}
	pos := make(map[string]int, len(x.order))
	out := make([]Wave, len(x.order))
	for i, name := range x.order {
		pos[name] = i
		out[i] = Wave{Name: name, State: x.state[name]}
	}
	for i := range repos {
		r := &repos[i]
		if r.Kind != string(fanout.KindCluster) {
			continue
		}
		name, ok := x.of[r.Name]
		if !ok {
			continue // a removed cluster: in no wave
		}
		w := &out[pos[name]]
		w.Total++
		switch r.Segment {
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
	kept := out[:0]
	for _, w := range out {
		if w.Total > 0 || (keepEmpty && x.size[w.Name] == 0) {
			kept = append(kept, w)
		}
	}
	return kept
}
