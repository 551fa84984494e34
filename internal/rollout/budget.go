package rollout

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Budget is a wave's failure budget: how many of the clusters taking part in a revision (the
// wave's changed clusters, skipped ones left out) may be unavailable, and how many of those
// may have failed, while the rollout goes on.
//
// A cluster is failed when Flux reported a failure for its merge of the revision; it is not
// reported when no healthy verdict came within the health timeout of the merge (unknown or
// still pending then: switched off, unreachable, stuck). Unavailable is both. A count is
// taken as written, a percentage of the clusters taking part rounded down (Kubernetes'
// maxUnavailable rule, intstr.GetScaledValueFromIntOrPercent), so "10%" of 5 clusters is 0.
// Every limit listed applies (a wave combined from several lists of waves takes each
// list's), so the smallest binds; none is 0: the first failed or silent cluster goes over.
type Budget struct {
	MaxUnavailable, MaxFailures []intstr.IntOrString
}

// limits returns the budget for n clusters taking part: how many may be unavailable, and how
// many failed.
func (b Budget) limits(n int) (unavailable, failures int) {
	return smallest(b.MaxUnavailable, n), smallest(b.MaxFailures, n)
}

// smallest is the smallest of the limits scaled to n, 0 when there are none. A limit that
// does not parse counts as 0 (validation refuses it before a plan is made).
func smallest(limits []intstr.IntOrString, n int) int {
	out := -1
	for _, l := range limits {
		v, err := intstr.GetScaledValueFromIntOrPercent(&l, n, false)
		if err != nil || v < 0 {
			v = 0
		}
		if out < 0 || v < out {
			out = v
		}
	}
	return max(out, 0)
}

// counted is a cluster that counts against its wave's budget.
type counted struct {
	cluster string
	// failed: Flux reported a failure; otherwise no healthy verdict came in time.
	failed bool
	// reason says what happened, at says when it counted (the failure, the deadline).
	reason string
	at     time.Time
	// failedBy names the Flux objects that failed (PR.FailedBy).
	failedBy string
}

// weighBudget decides a tallied wave against its budget: within it the clusters that failed
// or did not report are listed and the wave goes on; over it the rollout halts (and rolls
// back when the wave says so), naming the first such cluster.
func (e *evaluation) weighBudget(w Wave, t *waveTally) {
	for _, c := range t.counted {
		if c.failed {
			t.status.Failed = append(t.status.Failed, c.cluster)
		} else {
			t.status.Unreported = append(t.status.Unreported, c.cluster)
		}
	}
	unavailable, failures := w.Budget.limits(t.status.Changed)
	t.status.MaxUnavailable, t.status.MaxFailures = unavailable, failures
	nf, nu := len(t.status.Failed), len(t.counted)
	if nf <= failures && nu <= unavailable {
		return
	}
	first := t.counted[0]
	reason := first.reason
	if len(w.Budget.MaxUnavailable) > 0 || len(w.Budget.MaxFailures) > 0 || nu > 1 {
		reason = overBudget(t.status, unavailable, failures) + " (first: " + first.reason + ")"
	}
	e.halt(w, first.cluster, reason)
	if h := e.Halted; h != nil && h.Cluster == first.cluster && h.FailedBy == "" {
		h.FailedBy = first.failedBy
	}
}

// overBudget says how a wave went over its budget.
func overBudget(ws WaveStatus, unavailable, failures int) string {
	var parts []string
	if len(ws.Failed) > 0 {
		parts = append(parts, "failed: "+strings.Join(ws.Failed, ", "))
	}
	if len(ws.Unreported) > 0 {
		parts = append(parts, "not reported: "+strings.Join(ws.Unreported, ", "))
	}
	n := len(ws.Failed) + len(ws.Unreported)
	if len(ws.Failed) > failures {
		return fmt.Sprintf("%d of %d clusters failed (%s), over maxFailures %d", len(ws.Failed), ws.Changed, strings.Join(parts, "; "), failures)
	}
	return fmt.Sprintf("%d of %d clusters unavailable (%s), over maxUnavailable %d", n, ws.Changed, strings.Join(parts, "; "), unavailable)
}

// lastVerdict is when the last verdict of a wave came: the newest healthy verdict, failure or
// health deadline of its clusters; the wave's soak runs from it.
func (t *waveTally) lastVerdict() time.Time {
	last := t.lastHealthy
	for _, c := range t.counted {
		if c.at.After(last) {
			last = c.at
		}
	}
	return last
}

// awaiting reports whether a merged cluster of the wave still waits for Flux's verdict.
func (t *waveTally) awaiting() bool {
	return t.status.Merged > t.status.Healthy+len(t.counted)
}
