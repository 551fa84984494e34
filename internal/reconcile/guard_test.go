package reconcile

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// TestGuard: the removal guard is a pure function of the run's decisions. Each case is a fleet
// (cluster and workspace repos, the control repo) with what its plan removes, and the verdict:
// how many removals, the cap, and whether (and why) the run is refused.
func TestGuard(t *testing.T) {
	t.Parallel()
	clusters := func(n int, edit func(i int, w *weight)) []weight {
		out := make([]weight, n)
		for i := range out {
			out[i] = weight{repo: fmt.Sprintf("acme/cluster-%02d", i), counted: true, cluster: true}
			if edit != nil {
				edit(i, &out[i])
			}
		}
		return out
	}
	removeFirst := func(k int) func(i int, w *weight) {
		return func(i int, w *weight) { w.removed = i < k }
	}
	control := weight{repo: "acme/control"}
	workspace := weight{repo: "acme/workspace-a", counted: true}
	accessRefused := &policy.RemovalsError{Detail: "3 of 4 grants would go, more than maxAccessRemovals (1)"}
	pct := func(s string) intstr.IntOrString { return intstr.FromString(s) }
	for _, tc := range []struct {
		name     string
		in       guardInput
		removals int
		max      int
		refused  []string // substrings of the refusal; nil: not refused
	}{
		{name: "nothing removed", in: guardInput{weights: append(clusters(10, nil), control, workspace), maxRemovals: pct("10%")},
			max: 2},
		{name: "within 10% of 11 (rounded up)", in: guardInput{weights: append(clusters(10, removeFirst(2)), workspace), maxRemovals: pct("10%")},
			removals: 2, max: 2},
		{name: "over maxRemovals", in: guardInput{weights: append(clusters(10, removeFirst(3)), workspace), maxRemovals: pct("10%")},
			removals: 3, max: 2, refused: []string{"3 of 11 target repos would be removed, more than maxRemovals (10% of 11 = 2)", "--allow-removals"}},
		{name: "the control repo does not count", in: guardInput{weights: append(clusters(9, removeFirst(1)), control), maxRemovals: pct("10%")},
			removals: 1, max: 1},
		{name: "at least one", in: guardInput{weights: append(clusters(3, removeFirst(1)), workspace), maxRemovals: intstr.FromInt32(0)},
			removals: 1, max: 1},
		{name: "the only cluster", in: guardInput{weights: append(clusters(1, removeFirst(1)), workspace), maxRemovals: pct("50%")},
			removals: 1, max: 1, refused: []string{"every cluster repo (1) would be removed"}},
		{name: "destroyed machines count", in: guardInput{weights: append(clusters(10, nil), weight{repo: "acme/mgmt-hub", counted: true, destroys: 3}), maxRemovals: pct("10%")},
			removals: 3, max: 2, refused: []string{"3 of 11 target repos would be removed"}},
		{name: "clusters losing a component", in: guardInput{weights: clusters(10, func(i int, w *weight) { w.losesComponent = i < 3 }), maxRemovals: pct("10%")},
			max: 1, refused: []string{"3 of 10 cluster repos would lose a platform component", "clusterSelector"}},
		{name: "a removed cluster loses no component besides", in: guardInput{weights: clusters(10, func(i int, w *weight) { w.removed, w.losesComponent = i == 0, i == 0 }), maxRemovals: pct("10%")},
			removals: 1, max: 1},
		{name: "allowed", in: guardInput{weights: clusters(4, removeFirst(4)), maxRemovals: pct("10%"), allowRemovals: true},
			removals: 4, max: 1},
		{name: "a limited run weighs the fleet", in: guardInput{weights: clusters(2, func(_ int, w *weight) { w.losesComponent = true }),
			fleet: &fleetTotals{repos: 31, clusters: 30}, maxRemovals: pct("10%")}, max: 4},
		{name: "the same run over its own repos only", in: guardInput{weights: clusters(2, func(_ int, w *weight) { w.losesComponent = true }), maxRemovals: pct("10%")},
			max: 1, refused: []string{"2 of 2 cluster repos would lose a platform component"}},
		{name: "access removals", in: guardInput{weights: append(clusters(2, func(i int, w *weight) {
			if i == 1 {
				w.accessRefused = accessRefused
			}
		}), workspace), maxRemovals: pct("10%")},
			max: 1, refused: []string{"in 1 repo(s): acme/cluster-01: 3 of 4 grants would go", "--allow-access-removals"}},
		{name: "access removals allowed", in: guardInput{weights: clusters(2, func(_ int, w *weight) { w.accessRefused = accessRefused }), maxRemovals: pct("10%"), allowAccessRemovals: true},
			max: 1},
		{name: "both refusals", in: guardInput{weights: append(clusters(3, func(i int, w *weight) {
			w.removed = i < 2
			if i == 2 {
				w.accessRefused = accessRefused
			}
		}), workspace), maxRemovals: pct("10%")},
			removals: 2, max: 1, refused: []string{"2 of 4 target repos would be removed", "acme/cluster-02: 3 of 4 grants would go"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := guard(tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.removals, v.removals, "removals")
			assert.Equal(t, tc.max, v.max, "max")
			if tc.refused == nil {
				assert.NoError(t, v.refused)
				return
			}
			require.Error(t, v.refused)
			for _, s := range tc.refused {
				assert.Contains(t, v.refused.Error(), s)
			}
			assert.Contains(t, v.refused.Error(), "nothing was written")
			assert.True(t, errors.Is(v.refused, ErrTooManyRemovals) || errors.Is(v.refused, ErrTooManyAccessRemovals))
			assert.Equal(t, report.Outcome{Class: report.ClassNeedsHuman, Reason: report.ReasonTooManyRemovals}, report.ClassOf(v.refused),
				"a person lifts it")
		})
	}
	_, err := guard(guardInput{weights: clusters(1, nil), maxRemovals: pct("ten")})
	assert.ErrorContains(t, err, `platform spec.maxRemovals "ten"`)
}
