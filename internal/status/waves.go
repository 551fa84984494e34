package status

import (
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// The rollout picture's model is the rollout slice's (rollout.View, rollout.Bar); the status
// view decides each row's segment and draws the bars.

// AllClusters names the one bar of the rollout picture when the control repo declares no
// waves; see rollout.AllClusters.
const AllClusters = rollout.AllClusters

// The segments of a wave's bar, in the order they are drawn; see rollout.SegHealthy.
const (
	SegHealthy = rollout.SegHealthy
	SegDone    = rollout.SegDone
	SegOpen    = rollout.SegOpen
	SegPending = rollout.SegPending
	SegHalted  = rollout.SegHalted
)

// Segments lists the segment names in drawing order.
var Segments = rollout.Segments

// Wave is one bar of the rollout picture: how many of a wave's clusters are in each segment.
type Wave = rollout.Bar

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

// waveBars counts the cluster rows of repos per wave of the rollout view (rollout.View.Bars).
func waveBars(x *rollout.View, repos []Repo, keepEmpty bool) []Wave {
	rows := make([]rollout.Row, 0, len(repos))
	for i := range repos {
		if r := &repos[i]; r.Kind == string(fanout.KindCluster) {
			rows = append(rows, rollout.Row{Cluster: r.Name, Segment: r.Segment})
		}
	}
	return x.Bars(rows, keepEmpty)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
