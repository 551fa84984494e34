package app

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// TestDescribeRollout: the check run's words for each phase of a rollout, from the gate's
// verdict on the same observations.
func TestDescribeRollout(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	waves := []rollout.Wave{
		{Name: "canary", Clusters: []string{"c01"}, Soak: time.Hour},
		{Name: "eu", Clusters: []string{"c02", "c03"}},
		{Name: "(rest)", Clusters: []string{"c04"}},
	}
	changed := func() map[string]rollout.Observed {
		return map[string]rollout.Observed{"c01": {Changed: true}, "c02": {Changed: true}, "c03": {Changed: false}, "c04": {Changed: true}}
	}
	merged := func(n int, h rollout.Health, at time.Time) rollout.Observed {
		return rollout.Observed{Changed: true, PR: &rollout.PR{Number: n, Revision: "abc1234567", Merged: true, MergedAt: at, Health: h, HealthAt: at}}
	}

	obs := changed()
	st := rollout.Evaluate("abc1234567", waves, obs, now, rollout.Options{})
	p := DescribeRollout(&st)
	assert.Equal(t, ProgressRunning, p.Conclusion)
	assert.Equal(t, "wave 1 of 3 (canary): 0 of 1 clusters done", p.Title)
	assert.Equal(t, 3, p.Changed)
	assert.Contains(t, p.Summary, "| 2 | eu | waiting | 1 / 2 | 1 | 0 | 0 | - |", "c03 is unchanged: done without a pull request")

	obs["c01"] = merged(1, rollout.HealthSuccess, now)
	st = rollout.Evaluate("abc1234567", waves, obs, now.Add(10*time.Minute), rollout.Options{})
	p = DescribeRollout(&st)
	assert.Equal(t, "wave 1 of 3 (canary): 1 of 1 clusters done, soaking until 2026-03-01T13:00:00Z", p.Title)
	assert.Equal(t, now.Add(time.Hour), p.NextCheck)
	assert.Contains(t, p.Summary, "Next check by time alone: 2026-03-01T13:00:00Z.")

	obs["c02"] = merged(2, rollout.HealthFailure, now.Add(2*time.Hour))
	st = rollout.Evaluate("abc1234567", waves, obs, now.Add(2*time.Hour), rollout.Options{})
	p = DescribeRollout(&st)
	assert.Equal(t, ProgressHalted, p.Conclusion)
	assert.Equal(t, "rollout halted on c02: Flux reported a failure for the merge of #2", p.Title)
	assert.Contains(t, p.Summary, "**Halted on c02** (wave eu)")
	assert.True(t, p.NextCheck.IsZero())

	obs["c02"] = merged(2, rollout.HealthSuccess, now.Add(2*time.Hour))
	obs["c04"] = merged(3, rollout.HealthSuccess, now.Add(3*time.Hour))
	st = rollout.Evaluate("abc1234567", waves, obs, now.Add(3*time.Hour), rollout.Options{})
	p = DescribeRollout(&st)
	assert.Equal(t, ProgressDone, p.Conclusion)
	assert.Equal(t, "rollout done: 3 of 3 waves", p.Title)
	assert.Contains(t, p.Summary, "| 3 | (rest) | done | 1 / 1 | 1 | 1 | 1 | - |")
}
