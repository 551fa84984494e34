package app

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// TestRunnerDecidesFullOrIncremental: the Runner alone decides whether a run is full or
// incremental, from the request's mode, trigger and scope, the fleet's rollout waves and its
// own kind (one-shot or service) and shard. The rules are the ones every front end had before
// the one door: the CLI's apply is incremental unless --full, its plan full; the Action's push
// incremental, its scheduled and manual runs full; serve's push incremental but with waves,
// its resync full, a drift limited to its repos, its check of a pull request incremental but
// with waves or shards.
func TestRunnerDecidesFullOrIncremental(t *testing.T) {
	t.Parallel()
	plain := &Fleet{Repo: &control.Repo{Platform: &control.Platform{}}, Targets: []*fanout.Target{{Repo: "cluster-a"}}}
	waves := &Fleet{Repo: &control.Repo{Platform: &control.Platform{Spec: control.PlatformSpec{
		Rollout: control.RolloutSpec{Waves: []control.Wave{{Name: "canary"}}}}}}, Targets: plain.Targets}
	oneShot := &Runner{baselines: reconcile.NewBaselines("", nil)}
	noCache := &Runner{}
	service := &Runner{baselines: reconcile.NewBaselines("", nil), service: true}
	sharded := &Runner{baselines: reconcile.NewBaselines("", nil), service: true, cfg: Config{Shard: Shard{Index: 1, Count: 2}}}

	const full, incremental, none = "full", "incremental", "no baselines"
	for _, c := range []struct {
		name   string
		runner *Runner
		fleet  *Fleet
		req    Request
		want   string
	}{
		{"cli apply", oneShot, plain, Request{Mode: ModeApply, Trigger: TriggerCLI}, incremental},
		{"cli apply --full", oneShot, plain, Request{Mode: ModeApply, Trigger: TriggerCLI, Full: true}, full},
		{"cli apply with waves", oneShot, waves, Request{Mode: ModeApply, Trigger: TriggerCLI}, incremental},
		{"cli apply without a cache", noCache, plain, Request{Mode: ModeApply, Trigger: TriggerCLI}, none},
		{"cli plan", oneShot, plain, Request{Mode: ModePlan, Trigger: TriggerCLI}, none},
		{"action push", oneShot, plain, Request{Mode: ModeApply, Trigger: TriggerPush}, incremental},
		{"action schedule", oneShot, plain, Request{Mode: ModeApply, Trigger: TriggerResync}, full},
		{"action plan", oneShot, plain, Request{Mode: ModePlan, Trigger: TriggerCheck}, none},
		{"serve push", service, plain, Request{Mode: ModeApply, Trigger: TriggerPush}, incremental},
		{"serve push with waves", service, waves, Request{Mode: ModeApply, Trigger: TriggerPush}, full},
		{"serve resync", service, plain, Request{Mode: ModeApply, Trigger: TriggerResync}, full},
		{"serve drift", service, plain, Request{Mode: ModeApply, Trigger: TriggerDrift, Scope: Scope{Repos: []string{"cluster-a"}}}, none},
		{"serve check", service, plain, Request{Mode: ModePlan, Trigger: TriggerCheck, Scope: Scope{AllShards: true}}, incremental},
		{"serve check with waves", service, waves, Request{Mode: ModePlan, Trigger: TriggerCheck, Scope: Scope{AllShards: true}}, none},
		{"sharded serve check", sharded, plain, Request{Mode: ModePlan, Trigger: TriggerCheck, Scope: Scope{AllShards: true}}, none},
		{"sharded serve push", sharded, plain, Request{Mode: ModeApply, Trigger: TriggerPush}, incremental},
	} {
		in := c.runner.incremental(c.fleet, c.req)
		got := none
		switch {
		case in != nil && in.Full:
			got = full
		case in != nil:
			got = incremental
		}
		assert.Equal(t, c.want, got, c.name)
		if in != nil {
			assert.Equal(t, c.fleet.digests(), in.Digests, "%s: the fleet's digests, computed once", c.name)
			if c.req.Mode == ModePlan {
				assert.Negative(t, in.FullEvery, "%s: a plan's scope does not turn full by age", c.name)
			}
		}
	}
}

// TestRunnerScopeAndForge: a request reaches reconcile with the Runner's concurrency, clock
// and shard (a check's plan covers every shard), the metrics hook on applies only, and asks
// for the forge its mode needs: read-only for a plan, fresh access reads for a drift whose
// events say access changed.
func TestRunnerScopeAndForge(t *testing.T) {
	t.Parallel()
	applied := 0
	r := &Runner{cfg: Config{Concurrency: 7, Shard: Shard{Index: 1, Count: 3}, OnApplied: func(RepoResult) { applied++ }}}
	f := &Fleet{Repo: &control.Repo{Platform: &control.Platform{}}}

	apply := r.options(f, Request{Mode: ModeApply, Trigger: TriggerPush})
	assert.Equal(t, 7, apply.Concurrency)
	assert.Equal(t, Shard{Index: 1, Count: 3}, apply.Shard)
	require.NotNil(t, apply.Progress)
	apply.Progress(RepoResult{})
	assert.Equal(t, 1, applied)

	check := r.options(f, Request{Mode: ModePlan, Trigger: TriggerCheck, Scope: Scope{AllShards: true}})
	assert.Zero(t, check.Shard, "a check's plan covers every shard")
	assert.Nil(t, check.Progress, "plans are not counted as applied")

	drift := r.options(f, Request{Mode: ModeApply, Trigger: TriggerDrift, Scope: Scope{Repos: []string{"cluster-a"}}})
	assert.Equal(t, []string{"cluster-a"}, drift.Only)
	assert.Equal(t, Shard{Index: 1, Count: 3}, drift.Shard, "a drift stays within the shard")

	assert.Equal(t, ForgePlan, Request{Mode: ModePlan, Trigger: TriggerCheck}.forgeMode())
	assert.Equal(t, ForgeApply, Request{Mode: ModeApply, Trigger: TriggerPush}.forgeMode())
	assert.Equal(t, ForgeApply, Request{Mode: ModeApply, Trigger: TriggerDrift}.forgeMode())
	assert.Equal(t, ForgeDrift, Request{Mode: ModeApply, Trigger: TriggerDrift, AccessChanged: true}.forgeMode())
}

// TestRunnerUnreachableForge: a run whose forge does not open returns the forge's error,
// classified retryable with the reason Unreachable (what the front ends read: serve's neutral
// "could not reach" check run, no requeue), and no result: nothing was read or written. The
// class is the run's even when the forge's error carries its own (a rate limit with its reset).
func TestRunnerUnreachableForge(t *testing.T) {
	t.Parallel()
	unreachable := report.Outcome{Class: report.ClassRetryable, Reason: report.ReasonUnreachable}
	for name, forgeErr := range map[string]error{
		"plain":        assert.AnError,
		"rate-limited": report.Classify(assert.AnError, report.Outcome{Class: report.ClassDeferred, Reason: report.ReasonRateLimited, RetryAt: time.Unix(1e9, 0)}),
	} {
		r := Config{}.ServiceRunner("acme/control", func(context.Context, string, ForgeMode) (Forge, error) {
			return nil, forgeErr
		})
		f := &Fleet{Repo: &control.Repo{Platform: &control.Platform{}}}
		res, err := r.Run(context.Background(), f, Request{Mode: ModeApply, Trigger: TriggerPush})
		assert.Nil(t, res, name)
		assert.Equal(t, unreachable, report.ClassOf(err), name)
		assert.ErrorIs(t, err, assert.AnError, name)
		assert.Equal(t, assert.AnError.Error(), err.Error(), "the forge's own words: %s", name)
	}
}

// TestBaselinesLiveWhereTheRunnerSays: the baseline files are named in one place, per owner for
// the CLI and the Action, per control repo and shard for serve, and nowhere without a cache.
func TestBaselinesLiveWhereTheRunnerSays(t *testing.T) {
	t.Parallel()
	assert.Equal(t, filepath.Join("/c", ".baseline-acme.json"), baselineFile("/c", "Acme"))
	assert.Empty(t, baselineFile("", "acme"))
	assert.Equal(t, filepath.Join("/c", ".baseline-serve-acme_control.json"), serveBaselineFile("/c", "acme/control", Shard{}))
	assert.Equal(t, filepath.Join("/c", ".baseline-serve-acme_control-shard1of3.json"), serveBaselineFile("/c", "acme/control", Shard{Index: 1, Count: 3}))
	assert.Empty(t, serveBaselineFile("", "acme/control", Shard{}))

	local, err := Config{Forge: LocalPrefix + t.TempDir(), CacheDir: t.TempDir()}.OpenRunner(context.Background(), "acme", false)
	require.NoError(t, err)
	t.Cleanup(func() { _ = local.Close() })
	assert.Nil(t, local.baselines, "the local forge keeps no baselines: every apply is full")
}
