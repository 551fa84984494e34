package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// budgetFleet is one wave of n clusters (c-0 ...), each merged at t0 with the health given,
// and a second wave of one cluster waiting behind it.
func budgetFleet(budget Budget, health ...Health) ([]Wave, map[string]Observed) {
	first := Wave{Name: "first", Budget: budget}
	obs := map[string]Observed{"next-1": {Changed: true}}
	for i, h := range health {
		c := fmt.Sprintf("c-%d", i)
		first.Clusters = append(first.Clusters, c)
		pr := &PR{Number: i + 1, Revision: "r1", Merged: true, MergedAt: t0, Health: h}
		if h == HealthSuccess || h == HealthFailure {
			pr.HealthAt = t0.Add(time.Minute)
		}
		obs[c] = Observed{Changed: true, PR: pr}
	}
	return []Wave{first, {Name: "next", Clusters: []string{"next-1"}}}, obs
}

func limits(v ...any) []intstr.IntOrString {
	var out []intstr.IntOrString
	for _, x := range v {
		switch x := x.(type) {
		case int:
			out = append(out, intstr.FromInt32(int32(x)))
		case string:
			out = append(out, intstr.FromString(x))
		}
	}
	return out
}

const (
	ok     = HealthSuccess
	failed = HealthFailure
	silent = HealthUnknown
	slow   = HealthPending
)

// TestBudget drives one wave through every verdict a failure budget gives, with the clock
// injected: within budget the rollout goes on and lists the clusters; over it the rollout
// halts naming the first of them; a cluster waiting for Flux within the health timeout holds
// the wave and counts only once the timeout passed.
func TestBudget(t *testing.T) {
	after := t0.Add(DefaultHealthTimeout) // every silent cluster timed out
	for _, tc := range []struct {
		name       string
		budget     Budget
		health     []Health
		now        time.Time
		state      WaveState
		failed     []string
		unreported []string
		halt       string // reason substring; "" = no halt
		haltAt     string
		next       time.Time
	}{
		{name: "no budget: the first failure halts with its own reason", health: []Health{ok, failed, ok},
			now: t0.Add(time.Hour), state: WaveHalted, failed: []string{"c-1"}, halt: "Flux reported a failure for the merge of #2", haltAt: "c-1"},
		{name: "no budget: a silent cluster halts at the health timeout", health: []Health{ok, silent},
			now: after, state: WaveHalted, unreported: []string{"c-1"}, halt: "no healthy status from Flux within 30m0s of the merge of #2 (last: unknown)", haltAt: "c-1"},
		{name: "no budget: before the timeout the wave waits", health: []Health{ok, slow},
			now: t0.Add(time.Minute), state: WaveActive, next: t0.Add(DefaultHealthTimeout)},
		{name: "within maxUnavailable: the rollout goes on", budget: Budget{MaxUnavailable: limits(2), MaxFailures: limits(2)},
			health: []Health{ok, failed, silent, ok}, now: after, state: WaveDone, failed: []string{"c-1"}, unreported: []string{"c-2"}},
		{name: "over maxUnavailable: it halts and says by how much", budget: Budget{MaxUnavailable: limits(1), MaxFailures: limits(1)},
			health: []Health{ok, failed, silent, ok}, now: after, state: WaveHalted, failed: []string{"c-1"}, unreported: []string{"c-2"},
			halt: "2 of 4 clusters unavailable (failed: c-1; not reported: c-2), over maxUnavailable 1 (first: Flux reported a failure for the merge of #2)", haltAt: "c-1"},
		{name: "maxFailures 0 under maxUnavailable: silence is tolerated", budget: Budget{MaxUnavailable: limits(2), MaxFailures: limits(0)},
			health: []Health{ok, silent, ok}, now: after, state: WaveDone, unreported: []string{"c-1"}},
		{name: "maxFailures 0 under maxUnavailable: a failure is not", budget: Budget{MaxUnavailable: limits(2), MaxFailures: limits(0)},
			health: []Health{ok, failed, ok}, now: after, state: WaveHalted, failed: []string{"c-1"},
			halt: "1 of 3 clusters failed (failed: c-1), over maxFailures 0", haltAt: "c-1"},
		{name: "a percentage rounds down: 10% of 5 is 0", budget: Budget{MaxUnavailable: limits("10%"), MaxFailures: limits("10%")},
			health: []Health{ok, ok, failed, ok, ok}, now: after, state: WaveHalted, failed: []string{"c-2"}, halt: "over maxFailures 0"},
		{name: "40% of 5 is 2", budget: Budget{MaxUnavailable: limits("40%"), MaxFailures: limits("40%")},
			health: []Health{ok, failed, failed, ok, ok}, now: after, state: WaveDone, failed: []string{"c-1", "c-2"}},
		{name: "combined limits: the smallest binds", budget: Budget{MaxUnavailable: limits("50%", 1), MaxFailures: limits("50%", 1)},
			health: []Health{ok, failed, failed, ok}, now: after, state: WaveHalted, failed: []string{"c-1", "c-2"}, halt: "over maxFailures 1"},
		{name: "failed within budget, another still pending: the wave waits", budget: Budget{MaxUnavailable: limits(1), MaxFailures: limits(1)},
			health: []Health{failed, slow}, now: t0.Add(10 * time.Minute), state: WaveActive, failed: []string{"c-0"}, next: t0.Add(DefaultHealthTimeout)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waves, obs := budgetFleet(tc.budget, tc.health...)
			st := Evaluate("r1", waves, obs, tc.now, Options{})
			ws := st.Waves[0]
			assert.Equal(t, tc.state, ws.State)
			assert.Equal(t, tc.failed, ws.Failed)
			assert.Equal(t, tc.unreported, ws.Unreported)
			if tc.halt == "" {
				assert.Nil(t, st.Halted)
			} else if assert.NotNil(t, st.Halted) {
				assert.Contains(t, st.Halted.Reason, tc.halt)
				assert.Equal(t, "first", st.Halted.Wave)
				if tc.haltAt != "" {
					assert.Equal(t, tc.haltAt, st.Halted.Cluster)
				}
				assert.Equal(t, "wave first halted", st.Held["next-1"])
			}
			if tc.state == WaveDone {
				assert.Equal(t, []string{"next-1"}, st.Admitted, "the next wave starts")
			}
			assert.Equal(t, tc.next, st.NextCheck)
		})
	}
}

// TestBudgetSoaksFromTheLastVerdict: a wave whose last verdict is a silent cluster's deadline
// soaks from that deadline, not from its last healthy verdict.
func TestBudgetSoaksFromTheLastVerdict(t *testing.T) {
	waves, obs := budgetFleet(Budget{MaxUnavailable: limits(1), MaxFailures: limits(1)}, ok, silent)
	waves[0].Soak = time.Hour
	deadline := t0.Add(DefaultHealthTimeout)
	st := Evaluate("r1", waves, obs, deadline, Options{})
	assert.Equal(t, WaveSoaking, st.Waves[0].State)
	assert.Equal(t, deadline.Add(time.Hour), st.Waves[0].SoakUntil)
	assert.Equal(t, deadline.Add(time.Hour), st.NextCheck)
	st = Evaluate("r1", waves, obs, deadline.Add(time.Hour), Options{})
	assert.Equal(t, WaveDone, st.Waves[0].State)
}

// TestBudgetRollbackAction: a wave that rolls back says so in its halt; a wave that halts does
// not.
func TestBudgetRollbackAction(t *testing.T) {
	waves, obs := budgetFleet(Budget{}, failed)
	st := Evaluate("r1", waves, obs, t0.Add(time.Hour), Options{})
	require.NotNil(t, st.Halted)
	assert.False(t, st.Halted.Rollback)
	waves[0].Rollback = true
	st = Evaluate("r1", waves, obs, t0.Add(time.Hour), Options{})
	require.NotNil(t, st.Halted)
	assert.True(t, st.Halted.Rollback)
	assert.False(t, st.Done)
}

// TestSkip: a skipped cluster gets no new pull request, is not waited for and does not count
// against the budget; its open pull request is still updated; the wave lists it.
func TestSkip(t *testing.T) {
	waves, obs := budgetFleet(Budget{}, ok, silent)
	obs["c-2"] = Observed{Changed: true}                                                 // no pull request yet
	obs["c-3"] = Observed{Changed: true, PR: &PR{Number: 9, Revision: "r0", Open: true}} // an older one, open
	waves[0].Clusters = append(waves[0].Clusters, "c-2", "c-3")
	skip := map[string]bool{"c-1": true, "c-2": true, "c-3": true}

	st := Evaluate("r1", waves, obs, t0.Add(time.Hour), Options{Skipped: skip})
	ws := st.Waves[0]
	assert.Equal(t, WaveDone, ws.State, "only c-0 takes part, and it is healthy")
	assert.Equal(t, []string{"c-1", "c-2", "c-3"}, ws.Skipped)
	assert.Equal(t, 1, ws.Changed)
	assert.Nil(t, ws.Unreported)
	assert.Equal(t, []string{"c-3", "next-1"}, st.Admitted, "c-3's open pull request is updated in place; c-2 gets none")
	assert.NotContains(t, st.Held, "c-2")

	st = Evaluate("r1", waves, obs, t0.Add(time.Hour), Options{})
	assert.Equal(t, WaveHalted, st.Waves[0].State, "without the skips the silent c-1 halts the rollout")
}
