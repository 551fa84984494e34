package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)

// fleet is a small simulated fleet: what the forge would show, driven step by step.
type fleet struct {
	waves []Wave
	obs   map[string]Observed
	next  int
}

func newFleet() *fleet {
	f := &fleet{
		waves: []Wave{
			{Name: "canary", Clusters: []string{"dev-1"}, Soak: time.Hour},
			{Name: "eu", Clusters: []string{"eu-1", "eu-2", "eu-3"}, MaxParallel: 2},
			{Name: "us", Clusters: []string{"us-1", "us-2"}},
		},
		obs: map[string]Observed{},
	}
	for _, w := range f.waves {
		for _, c := range w.Clusters {
			f.obs[c] = Observed{Changed: true}
		}
	}
	return f
}

// open opens (or updates in place) the pull requests of the admitted clusters.
func (f *fleet) open(st Status) {
	for _, c := range st.Admitted {
		o := f.obs[c]
		if o.PR == nil || !o.PR.Open {
			f.next++
			o.PR = &PR{Number: f.next, Open: true}
		}
		o.PR.Revision = st.Revision
		f.obs[c] = o
	}
}

func (f *fleet) merge(c string, at time.Time) {
	o := f.obs[c]
	o.PR.Open, o.PR.Merged, o.PR.MergedAt = false, true, at
	f.obs[c] = o
}

func (f *fleet) health(c string, h Health, at time.Time) {
	o := f.obs[c]
	o.PR.Health, o.PR.HealthAt = h, at
	f.obs[c] = o
}

func states(st Status) map[string]WaveState {
	m := map[string]WaveState{}
	for _, w := range st.Waves {
		m[w.Name] = w.State
	}
	return m
}

// TestThreeWavesToCompletion drives a rollout through three waves: the canary must merge,
// turn healthy and soak for an hour before eu starts; eu opens at most two pull requests at
// once; us starts when eu is healthy.
func TestThreeWavesToCompletion(t *testing.T) {
	f := newFleet()
	rev := "r1"

	st := Evaluate(rev, f.waves, f.obs, t0, Options{})
	assert.Equal(t, []string{"dev-1"}, st.Admitted)
	assert.Equal(t, map[string]WaveState{"canary": WaveActive, "eu": WaveWaiting, "us": WaveWaiting}, states(st))
	assert.Contains(t, st.Held["eu-1"], "wave canary is not done (0 of 1 changed clusters healthy)")
	f.open(st)

	f.merge("dev-1", t0.Add(5*time.Minute))
	st = Evaluate(rev, f.waves, f.obs, t0.Add(6*time.Minute), Options{})
	assert.Empty(t, st.Admitted, "merged, not yet healthy: nothing new")
	assert.Equal(t, t0.Add(35*time.Minute), st.NextCheck, "the health timeout is the next moment time alone changes anything")

	f.health("dev-1", HealthSuccess, t0.Add(8*time.Minute))
	st = Evaluate(rev, f.waves, f.obs, t0.Add(10*time.Minute), Options{})
	assert.Equal(t, WaveSoaking, states(st)["canary"])
	assert.Equal(t, t0.Add(68*time.Minute), st.Waves[0].SoakUntil)
	assert.Equal(t, t0.Add(68*time.Minute), st.NextCheck)
	assert.Empty(t, st.Admitted)

	st = Evaluate(rev, f.waves, f.obs, t0.Add(68*time.Minute), Options{})
	assert.Equal(t, WaveDone, states(st)["canary"])
	assert.Equal(t, []string{"eu-1", "eu-2"}, st.Admitted, "maxParallel 2")
	assert.Contains(t, st.Held["eu-3"], "maxParallel 2")
	f.open(st)

	f.merge("eu-1", t0.Add(70*time.Minute))
	st = Evaluate(rev, f.waves, f.obs, t0.Add(71*time.Minute), Options{})
	assert.Equal(t, []string{"eu-2", "eu-3"}, st.Admitted, "a merge frees a slot")
	f.open(st)
	for _, c := range []string{"eu-1", "eu-2", "eu-3"} {
		if !f.obs[c].PR.Merged {
			f.merge(c, t0.Add(72*time.Minute))
		}
		f.health(c, HealthSuccess, t0.Add(75*time.Minute))
	}
	st = Evaluate(rev, f.waves, f.obs, t0.Add(76*time.Minute), Options{})
	assert.Equal(t, []string{"us-1", "us-2"}, st.Admitted, "eu has no soak")
	f.open(st)
	for _, c := range []string{"us-1", "us-2"} {
		f.merge(c, t0.Add(80*time.Minute))
		f.health(c, HealthSuccess, t0.Add(81*time.Minute))
	}
	st = Evaluate(rev, f.waves, f.obs, t0.Add(82*time.Minute), Options{})
	assert.True(t, st.Done)
	assert.Nil(t, st.Halted)
	assert.Empty(t, st.Held)
	assert.True(t, st.NextCheck.IsZero())
	for _, w := range st.Waves {
		assert.Equal(t, WaveDone, w.State, w.Name)
		assert.Equal(t, w.Changed, w.Healthy, w.Name)
	}
}

// TestHaltOnFailedStatus: a failure reported by Flux in the eu wave stops the rollout: us gets
// no pull request, eu's unopened clusters neither, and the halt names the cluster.
func TestHaltOnFailedStatus(t *testing.T) {
	f := newFleet()
	f.open(Evaluate("r1", f.waves, f.obs, t0, Options{}))
	f.merge("dev-1", t0)
	f.health("dev-1", HealthSuccess, t0)
	st := Evaluate("r1", f.waves, f.obs, t0.Add(2*time.Hour), Options{})
	f.open(st) // eu-1, eu-2
	f.merge("eu-1", t0.Add(2*time.Hour))
	f.health("eu-1", HealthFailure, t0.Add(2*time.Hour+time.Minute))

	st = Evaluate("r1", f.waves, f.obs, t0.Add(2*time.Hour+2*time.Minute), Options{})
	require.NotNil(t, st.Halted)
	assert.Equal(t, Halt{Wave: "eu", Cluster: "eu-1", Reason: "Flux reported a failure for the merge of #2"}, *st.Halted)
	assert.Equal(t, []string{"eu-2"}, st.Admitted, "an open pull request is still kept up to date")
	assert.Contains(t, st.Held["eu-3"], "rollout halted: eu-1")
	assert.Equal(t, "wave eu halted", st.Held["us-1"])
	assert.Equal(t, WaveHalted, states(st)["eu"])
	assert.Equal(t, WaveWaiting, states(st)["us"])
	assert.False(t, st.Done)
	assert.True(t, st.NextCheck.IsZero(), "a halt waits for a new revision, not for time")
}

// TestHaltOnHealthTimeout: a merge that Flux never reports healthy halts after the timeout.
func TestHaltOnHealthTimeout(t *testing.T) {
	f := newFleet()
	f.open(Evaluate("r1", f.waves, f.obs, t0, Options{}))
	f.merge("dev-1", t0)
	f.health("dev-1", HealthPending, t0.Add(time.Minute))
	opts := Options{HealthTimeout: 10 * time.Minute}
	st := Evaluate("r1", f.waves, f.obs, t0.Add(9*time.Minute), opts)
	assert.Nil(t, st.Halted)
	assert.Equal(t, t0.Add(10*time.Minute), st.NextCheck)
	st = Evaluate("r1", f.waves, f.obs, t0.Add(10*time.Minute), opts)
	require.NotNil(t, st.Halted)
	assert.Equal(t, "dev-1", st.Halted.Cluster)
	assert.Contains(t, st.Halted.Reason, "no healthy status from Flux within 10m0s of the merge of #1 (last: pending)")
}

// TestSupersedeHaltedRollout: a new revision after a halt starts again at the first wave; the
// halted wave's open pull request is updated in place, and the failed cluster (changed again
// by the fix) gets a new pull request only when its wave starts.
func TestSupersedeHaltedRollout(t *testing.T) {
	f := newFleet()
	f.open(Evaluate("r1", f.waves, f.obs, t0, Options{}))
	f.merge("dev-1", t0)
	f.health("dev-1", HealthSuccess, t0)
	f.open(Evaluate("r1", f.waves, f.obs, t0.Add(2*time.Hour), Options{}))
	f.merge("eu-1", t0.Add(2*time.Hour))
	f.health("eu-1", HealthFailure, t0.Add(2*time.Hour))
	require.NotNil(t, Evaluate("r1", f.waves, f.obs, t0.Add(2*time.Hour), Options{}).Halted)

	// r2 fixes it: every cluster's repo differs from r2's render again.
	for c, o := range f.obs {
		o.Changed = true
		f.obs[c] = o
	}
	eu2 := f.obs["eu-2"].PR.Number
	st := Evaluate("r2", f.waves, f.obs, t0.Add(3*time.Hour), Options{})
	assert.Nil(t, st.Halted, "the failure was r1's")
	assert.Equal(t, []string{"dev-1", "eu-2"}, st.Admitted, "the canary again, and eu-2's open r1 pull request updated in place")
	assert.Contains(t, st.Held["eu-1"], "wave canary is not done")
	f.open(st)
	assert.Equal(t, "r2", f.obs["eu-2"].PR.Revision)
	assert.Equal(t, eu2, f.obs["eu-2"].PR.Number, "same pull request")
}

// TestRestartContinues: the verdict is a function of what the forge shows, so evaluating the
// same observations again (a restarted service, the next scheduled Action run) gives the same
// answer, and a cluster that is already up to date needs no pull request.
func TestRestartContinues(t *testing.T) {
	f := newFleet()
	f.obs["dev-1"] = Observed{Changed: false} // already has r1's content
	f.obs["eu-3"] = Observed{Changed: false}
	st := Evaluate("r1", f.waves, f.obs, t0, Options{})
	assert.Equal(t, WaveDone, states(st)["canary"], "nothing to change: done without soak")
	assert.Equal(t, []string{"eu-1", "eu-2"}, st.Admitted)
	f.open(st)
	again := Evaluate("r1", f.waves, f.obs, t0, Options{})
	assert.Equal(t, st, again)
}

func TestPaused(t *testing.T) {
	f := newFleet()
	f.open(Evaluate("r1", f.waves, f.obs, t0, Options{}))
	f.obs["eu-1"] = Observed{Changed: true, PR: &PR{Number: 9, Open: true, Revision: "r0"}}
	st := Evaluate("r1", f.waves, f.obs, t0, Options{Paused: true})
	assert.Equal(t, []string{"dev-1", "eu-1"}, st.Admitted, "open pull requests are still updated")
	assert.Equal(t, "wave canary is not done (0 of 1 changed clusters healthy)", st.Held["eu-2"])
	assert.False(t, st.Done)
}

func TestNoWavesNoChanges(t *testing.T) {
	st := Evaluate("r1", nil, nil, t0, Options{})
	assert.True(t, st.Done)
	assert.Empty(t, st.Admitted)
}

// TestPausedStopsTheNextWave: paused, a wave that is done does not let the next one start
// (its clusters held with the pause's note, the wave shown paused), and resuming (the same
// observations, not paused) starts it.
func TestPausedStopsTheNextWave(t *testing.T) {
	f := newFleet()
	f.open(Evaluate("r1", f.waves, f.obs, t0, Options{}))
	f.merge("dev-1", t0)
	f.health("dev-1", HealthSuccess, t0)
	later := t0.Add(2 * time.Hour) // past the canary's soak
	st := Evaluate("r1", f.waves, f.obs, later, Options{Paused: true, PauseNote: "investigating"})
	assert.True(t, st.Paused)
	assert.Equal(t, "investigating", st.PauseNote)
	assert.Empty(t, st.Admitted, "no new wave starts")
	assert.Equal(t, WaveDone, states(st)["canary"])
	assert.Equal(t, WavePaused, states(st)["eu"])
	assert.Equal(t, WaveWaiting, states(st)["us"])
	assert.Equal(t, "rollout paused: investigating", st.Held["eu-1"])
	assert.Equal(t, "rollout paused: investigating", st.Held["us-1"])
	assert.False(t, st.Done)

	st = Evaluate("r1", f.waves, f.obs, later, Options{})
	assert.False(t, st.Paused)
	assert.Equal(t, []string{"eu-1", "eu-2"}, st.Admitted, "resumed: the next wave starts (maxParallel 2)")
}

// TestHealthTimeoutDefault: without Options.HealthTimeout a merge has DefaultHealthTimeout
// (30m) to become healthy; a configured one replaces it, longer or shorter.
func TestHealthTimeoutDefault(t *testing.T) {
	f := newFleet()
	f.open(Evaluate("r1", f.waves, f.obs, t0, Options{}))
	f.merge("dev-1", t0)
	st := Evaluate("r1", f.waves, f.obs, t0.Add(DefaultHealthTimeout-time.Second), Options{})
	assert.Nil(t, st.Halted)
	assert.Equal(t, t0.Add(DefaultHealthTimeout), st.NextCheck)
	assert.NotNil(t, Evaluate("r1", f.waves, f.obs, t0.Add(DefaultHealthTimeout), Options{}).Halted)
	st = Evaluate("r1", f.waves, f.obs, t0.Add(DefaultHealthTimeout), Options{HealthTimeout: 2 * time.Hour})
	assert.Nil(t, st.Halted, "a longer configured timeout")
	assert.Equal(t, t0.Add(2*time.Hour), st.NextCheck)
}
