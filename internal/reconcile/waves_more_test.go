package reconcile

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// newMetalRig is the wave rig whose clusters also run component metallb
// (platform/metallb/), which declares its own waves: metal-first (the clusters no fleet wave
// names: c04, c05), then the rest (c01, c02, c03).
func newMetalRig(t *testing.T) *waveRig {
	t.Helper()
	return newWaveRigWith(t, func(r *waveRig) {
		r.metal = fleet{"c01": "m1", "c02": "m1", "c03": "m1", "c04": "m1", "c05": "m1"}
		r.metalWaves = []control.Wave{{
			Name:            "metal-first",
			ClusterSelector: &control.Selector{MatchExpressions: []control.Requirement{{Key: "ring", Operator: "DoesNotExist"}}},
		}}
	})
}

// changeMetal moves every cluster's metallb to value v at control revision v.
func (r *waveRig) changeMetal(v string) {
	for n := range r.metal {
		r.metal[n] = v
	}
	r.rev = v
}

// TestRolloutComponentWaves: a change to a component with its own waves alone takes the
// component's waves, not the fleet's; a change touching that component and anything else
// (here monitoring, under the fleet's waves) takes both lists combined, the component's
// first: a cluster goes in the component's order, and within each of its waves in the
// fleet's. The same observations give the same plan on a restarted forge.
func TestRolloutComponentWaves(t *testing.T) {
	t.Parallel()
	r := newMetalRig(t)

	r.changeMetal("m2")
	rep := r.apply()
	assert.Equal(t, []string{"cluster-c04", "cluster-c05"}, r.opened(), "metallb's first wave, though the fleet's canary is c01")
	assert.Equal(t, []string{rollout.ComponentWaves("metallb")}, rep.Rollout.Lists)
	assert.Contains(t, heldWhy(t, rep, "cluster-c01"), "wave metal-first is not done (0 of 2 changed clusters healthy)")

	r.mergeAndReport("cluster-c04", "success")
	r.mergeAndReport("cluster-c05", "success")
	r.restart()
	rep = r.apply()
	assert.Equal(t, []string{"cluster-c01", "cluster-c02", "cluster-c03"}, r.opened(), "metallb's rest: no maxParallel, no soak")
	assert.Equal(t, []string{rollout.ComponentWaves("metallb")}, rep.Rollout.Lists)
	for _, c := range []string{"cluster-c01", "cluster-c02", "cluster-c03"} {
		r.mergeAndReport(c, "success")
	}
	rep = r.apply()
	assert.True(t, rep.Rollout.Done, "metallb's waves, not the fleet's canary soak of 1h")
	assert.Equal(t, []string{rollout.ComponentWaves("metallb")}, rep.Rollout.Lists,
		"no cluster's change shows metallb any more: the merged pull requests recorded it")
	assert.Empty(t, r.opened())

	// metallb and monitoring at once: metallb's waves, each split by the fleet's.
	r.changeMetal("m3")
	r.change("m3")
	rep = r.apply()
	assert.Equal(t, []string{rollout.ComponentWaves("metallb"), rollout.FleetWaves}, rep.Rollout.Lists)
	var names []string
	for _, w := range rep.Rollout.Waves {
		names = append(names, w.Name)
	}
	assert.Equal(t, []string{"metal-first+(rest)", "(rest)+canary", "(rest)+eu"}, names)
	assert.Equal(t, []string{"cluster-c04", "cluster-c05"}, r.opened())
	assert.Contains(t, heldWhy(t, rep, "cluster-c01"), "wave metal-first+(rest) is not done")
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave metal-first+(rest) is not done")

	r.mergeAndReport("cluster-c04", "success")
	r.mergeAndReport("cluster-c05", "success")
	r.restart()
	rep = r.apply()
	assert.Equal(t, []string{"cluster-c01"}, r.opened(), "then the fleet's canary")
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave (rest)+canary is not done")
	again, err := Plan(t.Context(), r.forge, r.control(true), r.targets(), r.opts())
	require.NoError(t, err)
	assert.Equal(t, rep.Rollout.Waves, again.Rollout.Waves, "a plan of the same observations gives the same waves")
}

// TestRolloutComponentWavesWithoutFleetWaves: a component's own waves alone are a rollout: the
// gate runs (and the others' changes go at once) without spec.rollout.waves.
func TestRolloutComponentWavesWithoutFleetWaves(t *testing.T) {
	t.Parallel()
	r := newMetalRig(t)
	repo := func() *control.Repo {
		c := r.control(true)
		c.Platform.Spec.Rollout.Waves = nil
		return c
	}
	require.True(t, repo().HasRollout())
	r.changeMetal("m2")
	rep, err := Apply(t.Context(), r.forge, repo(), r.targets(), r.opts())
	require.NoError(t, err)
	assert.Equal(t, []string{"cluster-c04", "cluster-c05"}, r.opened())
	assert.Contains(t, heldWhy(t, rep, "cluster-c03"), "wave metal-first is not done")
}

// TestRolloutPauseResume: paused (rollout/paused in the control repo), no new wave starts and
// no new pull request opens, the pause's note says why on every held repo and on the status;
// an open pull request is still updated in place. Resumed, the next wave starts.
func TestRolloutPauseResume(t *testing.T) {
	t.Parallel()
	r := newWaveRig(t)
	r.change("v2")
	r.apply()
	assert.Equal(t, []string{"cluster-c01"}, r.opened())

	r.paused = &control.Pause{Reason: "checking the canary's dashboards"}
	r.change("v3") // a new revision while paused: the canary's open pull request follows it
	before := r.open("cluster-c01").GetNumber()
	rep := r.apply()
	assert.Equal(t, []string{"cluster-c01"}, r.opened())
	assert.Equal(t, before, r.open("cluster-c01").GetNumber(), "updated in place")
	assert.Equal(t, "update", byRepo(rep)["cluster-c01"].Word())
	require.True(t, rep.Rollout.Paused)
	assert.Equal(t, "checking the canary's dashboards", rep.Rollout.PauseNote)

	r.mergeAndReport("cluster-c01", "success")
	r.srv.AdvanceClock(2 * time.Hour) // past the canary's soak
	rep = r.apply()
	assert.Empty(t, r.opened(), "paused: wave eu does not start")
	assert.Equal(t, "held by the rollout: rollout paused: checking the canary's dashboards", heldWhy(t, rep, "cluster-c02")[len("acme/cluster-c02: "):])
	assert.Contains(t, heldWhy(t, rep, "cluster-c04"), "rollout paused: checking the canary's dashboards")
	states := map[string]rollout.WaveState{}
	for _, w := range rep.Rollout.Waves {
		states[w.Name] = w.State
	}
	assert.Equal(t, map[string]rollout.WaveState{"canary": rollout.WaveDone, "eu": rollout.WavePaused, rollout.RestWave: rollout.WaveWaiting}, states)

	r.paused = nil
	rep = r.apply()
	assert.False(t, rep.Rollout.Paused)
	assert.Equal(t, []string{"cluster-c02"}, r.opened(), "resumed: eu starts (maxParallel 1)")
}

// TestRolloutPausedMergesNothing: paused, a wave whose merge is auto gets no auto-merge from
// fleetbot: every cluster's pull request options say manual.
func TestRolloutPausedMergesNothing(t *testing.T) {
	t.Parallel()
	r := newWaveRigWith(t, func(r *waveRig) { r.autoEU = true })
	r.change("v2")
	r.paused = &control.Pause{}
	autoMerge := func() map[string]bool {
		ctl := r.control(true)
		in := newRunInput(ctl, r.targets(), r.opts().withDefaults(ctl))
		pl, _, err := plan(t.Context(), r.forge, in)
		require.NoError(t, err)
		env := &decideEnv{repo: ctl, prOpts: prOptions(ctl, in.opts)}
		out := map[string]bool{}
		for _, p := range pl.repos {
			_, inWave := pl.verdict.Merge[p.target().Repo]
			require.True(t, inWave, p.target().Repo)
			out[p.target().Name] = pl.verdict.prOptions(env, p.target()).AutoMerge
		}
		return out
	}
	for name, auto := range autoMerge() {
		assert.False(t, auto, "%s: paused, fleetbot enables no auto-merge", name)
	}
	r.paused = nil
	for name, auto := range autoMerge() {
		assert.Equal(t, name == "c02" || name == "c03", auto, "%s: wave eu merges automatically", name)
	}
}

// TestRolloutHealthTimeoutConfigured: spec.rollout.healthTimeout replaces the 30 minutes a
// merge has to be reported healthy; the rig's clock is the fake GitHub's, moved by hand.
func TestRolloutHealthTimeoutConfigured(t *testing.T) {
	t.Parallel()
	r := newWaveRigWith(t, func(r *waveRig) { r.healthTimeout = "2h" })
	r.change("v2")
	r.apply()
	r.mergeAndReport("cluster-c01", "")
	r.srv.AdvanceClock(rollout.DefaultHealthTimeout)
	rep := r.apply()
	assert.Nil(t, rep.Rollout.Halted, "30 minutes is not 2h")
	assert.Equal(t, r.srv.Now().Add(90*time.Minute).UTC(), rep.Rollout.NextCheck.UTC())
	assert.Contains(t, heldWhy(t, rep, "cluster-c02"), "wave canary is not done")

	r.srv.AdvanceClock(90*time.Minute - time.Second)
	assert.Nil(t, r.apply().Rollout.Halted)
	r.srv.AdvanceClock(time.Second)
	rep = r.apply()
	require.NotNil(t, rep.Rollout.Halted)
	assert.Contains(t, rep.Rollout.Halted.Reason, "no healthy status from Flux within 2h0m0s of the merge")
	assert.Empty(t, r.opened())
}
