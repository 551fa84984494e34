package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/window"
)

// weekdays9to17 is an allow window, 09:00-17:00 UTC on weekdays.
var weekdays9to17 = window.Schedule{{Days: [7]bool{false, true, true, true, true, true, false}, Start: 9 * time.Hour, Duration: 8 * time.Hour}}

// TestChangeWindows: outside the windows no new pull request opens (the wave shows closed and
// its clusters wait for the opening, which is the next check), an open pull request is still
// updated, and nothing may merge; inside them the wave runs as usual and the closing is the
// next check.
func TestChangeWindows(t *testing.T) {
	f := newFleet()
	f.obs["eu-1"] = Observed{Changed: true, PR: &PR{Number: 7, Revision: "r0", Open: true}} // an older pull request, open
	saturday := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	monday9 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

	st := Evaluate("r1", f.waves, f.obs, saturday, Options{Schedule: weekdays9to17})
	assert.Equal(t, WaveClosed, st.Waves[0].State)
	assert.Equal(t, "outside the change windows until 2026-11-30T09:00:00Z", st.Held["dev-1"])
	assert.Equal(t, []string{"eu-1"}, st.Admitted, "the open pull request is updated in place")
	assert.Equal(t, &WindowStatus{Open: false, Next: monday9}, st.Window)
	assert.Equal(t, monday9, st.NextCheck)
	assert.False(t, st.MergesAllowed())
	assert.False(t, st.Done)

	st = Evaluate("r1", f.waves, f.obs, monday9, Options{Schedule: weekdays9to17})
	assert.Equal(t, WaveActive, st.Waves[0].State)
	assert.Equal(t, []string{"dev-1", "eu-1"}, st.Admitted)
	assert.True(t, st.MergesAllowed())
	assert.Equal(t, monday9.Add(8*time.Hour), st.NextCheck, "the closing would hold what is admitted")

	st = Evaluate("r1", f.waves, f.obs, monday9, Options{Schedule: weekdays9to17, Paused: true})
	assert.False(t, st.MergesAllowed(), "a pause stops merges inside a window too")

	st = Evaluate("r1", f.waves, f.obs, saturday, Options{})
	assert.Nil(t, st.Window)
	assert.True(t, st.MergesAllowed(), "no windows: any time")
}

// TestChangeWindowsHoldNoSoak: a soak and a health timeout run on in a closed window (only new
// pull requests and merges wait), so a wave soaked over the weekend lets the next one start
// at the opening.
func TestChangeWindowsHoldNoSoak(t *testing.T) {
	f := newFleet()
	friday := time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC)
	f.obs["dev-1"] = Observed{Changed: true, PR: &PR{Number: 1, Revision: "r1", Merged: true, MergedAt: friday, Health: HealthSuccess, HealthAt: friday}}
	st := Evaluate("r1", f.waves, f.obs, friday.Add(2*time.Hour), Options{Schedule: weekdays9to17})
	assert.Equal(t, WaveDone, st.Waves[0].State, "soaked for its hour after the window closed")
	assert.Equal(t, WaveClosed, st.Waves[1].State)
	assert.Contains(t, st.Held["eu-1"], "outside the change windows until 2026-11-30T09:00:00Z")
}

// TestApproval: a wave that requires approval waits once the waves before it are done, names
// what it waits for and how to approve it, and starts when approved; a wave with nothing to
// change needs no approval.
func TestApproval(t *testing.T) {
	f := newFleet()
	f.waves[1].Approvals = []string{"eu"}
	done := t0.Add(2 * time.Hour)
	f.obs["dev-1"] = Observed{Changed: true, PR: &PR{Number: 1, Revision: "r1", Merged: true, MergedAt: t0, Health: HealthSuccess, HealthAt: t0}}

	st := Evaluate("r1", f.waves, f.obs, t0, Options{})
	assert.Equal(t, WaveSoaking, st.Waves[0].State)
	assert.Equal(t, WaveWaiting, st.Waves[1].State, "the approval is asked for only once the canary is done")

	st = Evaluate("r1", f.waves, f.obs, done, Options{})
	assert.Equal(t, WaveAwaitingApproval, st.Waves[1].State)
	assert.Equal(t, []string{"eu"}, st.Waves[1].Awaiting)
	assert.Equal(t, "wave eu waits for approval (fleetbot rollout approve eu)", st.Held["eu-1"])
	assert.Equal(t, "wave eu waits for approval (fleetbot rollout approve eu)", st.Held["us-1"], "later waves wait behind it")
	assert.Empty(t, st.Admitted)
	assert.True(t, st.NextCheck.IsZero(), "only an approval moves it on")

	st = Evaluate("r1", f.waves, f.obs, done, Options{Approved: map[string]bool{"eu": true}})
	assert.Equal(t, WaveActive, st.Waves[1].State)
	assert.Equal(t, []string{"eu-1", "eu-2"}, st.Admitted, "maxParallel 2")

	// A combined wave waits for each approval it needs.
	f.waves[1].Approvals = []string{"metal-eu", "eu"}
	st = Evaluate("r1", f.waves, f.obs, done, Options{Approved: map[string]bool{"eu": true}})
	assert.Equal(t, []string{"metal-eu"}, st.Waves[1].Awaiting)

	// Nothing to change in the wave: no approval asked, the next wave starts.
	for _, c := range f.waves[1].Clusters {
		f.obs[c] = Observed{}
	}
	st = Evaluate("r1", f.waves, f.obs, done, Options{})
	assert.Equal(t, WaveDone, st.Waves[1].State)
	assert.Equal(t, []string{"us-1", "us-2"}, st.Admitted)
}

// TestApprovalOfTheFirstWave: approval on the first wave holds the whole rollout before its
// first pull request.
func TestApprovalOfTheFirstWave(t *testing.T) {
	f := newFleet()
	f.waves[0].Approvals = []string{"canary"}
	st := Evaluate("r1", f.waves, f.obs, t0, Options{})
	assert.Equal(t, WaveAwaitingApproval, st.Waves[0].State)
	assert.Empty(t, st.Admitted)
	st = Evaluate("r1", f.waves, f.obs, t0, Options{Approved: map[string]bool{"canary": true}})
	assert.Equal(t, []string{"dev-1"}, st.Admitted)
}

// history builds a repo's merges, oldest first: revision, tree and health per merge.
func history(repo string, merges ...Merge) History { return History{Repo: repo, Merges: merges} }

func merge(rev, tree string, h Health) Merge { return Merge{Revision: rev, Tree: tree, Health: h} }

// TestPlanRollback: each repo the failed revision reached gets back the last revision that was
// healthy there (a different one per repo), repos it did not reach or that moved on are left
// alone, a repo with nothing healthy before is stuck, and planning again after a restore
// merged plans only the rest.
func TestPlanRollback(t *testing.T) {
	histories := []History{
		history("cluster-a", merge("r1", "t1a", HealthSuccess), merge("r2", "t2a", HealthSuccess), merge("r3", "t3a", HealthFailure)),
		// r2 failed here before, so the last healthy revision here is r1.
		history("cluster-b", merge("r1", "t1b", HealthSuccess), merge("r2", "t2b", HealthFailure), merge("r3", "t3b", HealthUnknown)),
		// r3 left this repo's tree as r2 had it: the restore skips merges of the failed tree.
		history("cluster-c", merge("r1", "t1c", HealthSuccess), merge("r2", "t3c", HealthSuccess), merge("r3", "t3c", HealthSuccess)),
		history("cluster-d", merge("r1", "t1d", HealthSuccess)),                                    // not reached
		history("cluster-e", merge("r3", "t3e", HealthFailure), merge("r4", "t4e", HealthPending)), // moved on
		history("cluster-f", merge("r3", "t3f", HealthFailure)),                                    // its first merge
		history("workspace-w", merge("r2", "t2w", HealthSuccess), merge("r3", "t3w", HealthSuccess)),
		{Repo: "cluster-g"},
	}
	plan := PlanRollback("r3", histories)
	var got []string
	for _, r := range plan.Restores {
		got = append(got, r.Repo+": "+r.From.Tree+" -> "+r.To.Revision+" "+r.To.Tree)
	}
	assert.Equal(t, []string{
		"cluster-a: t3a -> r2 t2a",
		"cluster-b: t3b -> r1 t1b",
		"cluster-c: t3c -> r1 t1c",
		"workspace-w: t3w -> r2 t2w",
	}, got)
	assert.Equal(t, []string{"cluster-f"}, keys(plan.Stuck))
	assert.Contains(t, plan.Stuck["cluster-f"], "nothing to restore")
	assert.Equal(t, Failure{Revision: "r3", Trees: map[string]string{
		"cluster-a": "t3a", "cluster-b": "t3b", "cluster-c": "t3c", "cluster-f": "t3f", "workspace-w": "t3w",
	}}, plan.Failed)

	// cluster-a's restore merged: planned again, the rest remain and the failure keeps its tree.
	histories[0].Merges = append(histories[0].Merges, Merge{Revision: "r3", Tree: "t2a", Rollback: true})
	again := PlanRollback("r3", histories)
	assert.Len(t, again.Restores, 3)
	assert.NotEqual(t, "cluster-a", again.Restores[0].Repo)
	assert.Equal(t, plan.Failed, again.Failed)
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestFailureRepeats: a revision repeats a rolled-back failure when it renders the failed tree
// in every repo the failure reached; a commit changing any of them is a new rollout.
func TestFailureRepeats(t *testing.T) {
	f := &Failure{Revision: "r3", Trees: map[string]string{"cluster-a": "t3a", "cluster-b": "t3b"}}
	assert.True(t, f.Repeats(map[string]string{"cluster-a": "t3a", "cluster-b": "t3b", "cluster-z": "anything"}), "a pause commit, a change elsewhere")
	assert.False(t, f.Repeats(map[string]string{"cluster-a": "t4a", "cluster-b": "t3b"}), "a fix of cluster-a's content")
	assert.False(t, f.Repeats(map[string]string{"cluster-a": "t3a"}), "cluster-b no longer rendered")
	assert.False(t, (*Failure)(nil).Repeats(map[string]string{}))
	assert.False(t, (&Failure{}).Repeats(map[string]string{}), "a failure that reached nothing marks nothing")
}

// TestEvaluateRepeatedFailure: a revision that repeats a rolled-back failure opens no pull
// request anywhere (open ones, the rollback's among them, are still updated) and says why.
func TestEvaluateRepeatedFailure(t *testing.T) {
	f := newFleet()
	f.obs["dev-1"] = Observed{Changed: true, PR: &PR{Number: 3, Revision: "r3", Open: true}}
	st := Evaluate("r3", f.waves, f.obs, t0, Options{Failed: &Failure{Revision: "r3", Trees: map[string]string{"cluster-dev-1": "t"}}})
	require.NotNil(t, st.Halted)
	assert.True(t, st.Halted.RolledBack)
	assert.Contains(t, st.Halted.Reason, "revision r3 failed and was rolled back")
	assert.Equal(t, []string{"dev-1"}, st.Admitted)
	assert.Contains(t, st.Held["eu-1"], "failed and was rolled back")
	for _, w := range st.Waves {
		assert.Equal(t, WaveWaiting, w.State, w.Name)
	}
	assert.False(t, st.Done)
}
