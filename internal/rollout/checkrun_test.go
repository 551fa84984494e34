package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestCheckRun: the check run's words for each phase of a rollout, from the gate's
// verdict on the same observations.
func TestCheckRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	waves := []Wave{
		{Name: "canary", Clusters: []string{"c01"}, Soak: time.Hour},
		{Name: "eu", Clusters: []string{"c02", "c03"}},
		{Name: "(rest)", Clusters: []string{"c04"}},
	}
	changed := func() map[string]Observed {
		return map[string]Observed{"c01": {Changed: true}, "c02": {Changed: true}, "c03": {Changed: false}, "c04": {Changed: true}}
	}
	merged := func(n int, h Health, at time.Time) Observed {
		return Observed{Changed: true, PR: &PR{Number: n, Revision: "abc1234567", Merged: true, MergedAt: at, Health: h, HealthAt: at}}
	}

	obs := changed()
	st := Evaluate("abc1234567", waves, obs, now, Options{})
	p := st.checkRun()
	assert.Equal(t, CheckRunning, p.Conclusion)
	assert.Equal(t, "wave 1 of 3 (canary): 0 of 1 clusters done", p.Title)
	assert.Equal(t, 3, p.Changed)
	assert.Contains(t, p.Summary, "| 2 | eu | waiting | 1 / 2 | 1 | 0 | 0 | - |", "c03 is unchanged: done without a pull request")

	obs["c01"] = merged(1, HealthSuccess, now)
	st = Evaluate("abc1234567", waves, obs, now.Add(10*time.Minute), Options{})
	p = st.checkRun()
	assert.Equal(t, "wave 1 of 3 (canary): 1 of 1 clusters done, soaking until 2026-03-01T13:00:00Z", p.Title)
	assert.Equal(t, now.Add(time.Hour), p.NextCheck)
	assert.Contains(t, p.Summary, "Next check by time alone: 2026-03-01T13:00:00Z.")

	obs["c02"] = merged(2, HealthFailure, now.Add(2*time.Hour))
	st = Evaluate("abc1234567", waves, obs, now.Add(2*time.Hour), Options{})
	p = st.checkRun()
	assert.Equal(t, CheckHalted, p.Conclusion)
	assert.Equal(t, "rollout halted on c02: Flux reported a failure for the merge of #2", p.Title)
	assert.Contains(t, p.Summary, "**Halted on c02** (wave eu)")
	assert.True(t, p.NextCheck.IsZero())

	obs["c02"] = merged(2, HealthSuccess, now.Add(2*time.Hour))
	obs["c04"] = merged(3, HealthSuccess, now.Add(3*time.Hour))
	st = Evaluate("abc1234567", waves, obs, now.Add(3*time.Hour), Options{})
	p = st.checkRun()
	assert.Equal(t, CheckDone, p.Conclusion)
	assert.Equal(t, "rollout done: 3 of 3 waves", p.Title)
	assert.Contains(t, p.Summary, "| 3 | (rest) | done | 1 / 1 | 1 | 1 | 1 | - |")
}
