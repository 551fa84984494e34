package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// gateInput is what a test hands the gate: the control repo, the revision, the time and the
// clusters as the forge shows them.
type gateInput struct {
	Control  *control.Repo
	Revision string
	Now      time.Time
	Clusters []Cluster
	// Workspaces are the run's workspace repos (see Workspace).
	Workspaces []Workspace
}

// gateOf is the verdict of the control repo's Rollouts, timed by in.Now, on in.
func gateOf(in gateInput) Verdict {
	return New(in.Control, func() time.Time { return in.Now }).Gate(in.Revision, in.Clusters, in.Workspaces)
}

// sliceControl is a fleet in two waves (canary: env=dev, then the implicit last wave), with
// the workspace team-a on both waves' clusters.
func sliceControl() *control.Repo {
	plat := &control.Platform{}
	plat.Spec.Owner = "acme"
	plat.Spec.Rollout.Waves = []control.Wave{
		{Name: "canary", ClusterSelector: &control.Selector{MatchLabels: map[string]string{"env": "dev"}}, Soak: "1h"},
	}
	ctl := &control.Repo{Platform: plat}
	for _, c := range []struct{ name, env string }{{"c1", "dev"}, {"p1", "prod"}} {
		cl := &control.Cluster{}
		cl.Metadata.Name = c.name
		cl.Metadata.Labels = map[string]string{"env": c.env}
		cl.Spec.Workspace = "team-a"
		ctl.Clusters = append(ctl.Clusters, cl)
	}
	return ctl
}

// TestGateEndToEnd: the slice plans the waves from the control repo, weighs what the forge
// shows, holds the later wave's cluster and the workspace that goes with it, says how the
// admitted cluster's pull request merges, wakes up when the soak ends, and words it all for
// the check run and the report.
func TestGateEndToEnd(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctl := sliceControl()
	ro := New(ctl, func() time.Time { return now })
	require.True(t, ro.Enabled())
	assert.False(t, ro.NeedsEveryChange())
	changed := &pr.Decision{Action: pr.ActionOpen, OpenPR: true}

	// Nothing merged yet: canary's cluster is admitted, the last wave's held.
	v := ro.Gate("rev1", []Cluster{
		{Name: "c1", Repo: "cluster-c1", Decision: changed},
		{Name: "p1", Repo: "cluster-p1", Decision: changed},
	}, nil)
	assert.Equal(t, []string{"c1"}, v.Status.Admitted)
	why, held := v.Holds(&fanout.Target{Kind: fanout.KindCluster, Name: "p1"})
	assert.True(t, held)
	assert.Contains(t, why, "wave canary is not done")
	_, held = v.Holds(&fanout.Target{Kind: fanout.KindCluster, Name: "c1"})
	assert.False(t, held)
	why, held = v.Holds(&fanout.Target{Kind: fanout.KindWorkspace, Name: "team-a"})
	assert.True(t, held, "the workspace goes with the last wave of its clusters")
	assert.Contains(t, why, "waiting for p1")
	_, held = v.Holds(&fanout.Target{Kind: fanout.KindCluster, Name: "p1", Removed: true})
	assert.False(t, held, "a removed repo is never held")
	assert.Equal(t, MergeSettings{AutoMerge: false, Waves: []string{FleetWaves}}, v.Merge["cluster-c1"])
	assert.True(t, ro.NextWake(v.Status).IsZero(), "only a merge can move it on")
	assert.Equal(t, CheckRunning, ro.CheckRun(v.Status).Conclusion)

	// Canary merged and Flux reported it healthy: the wave soaks; the gate wakes when it ends.
	merged := pr.RolloutPR{Number: 7, State: pr.StateMerged, Source: "rev1", MergedAt: now.Add(-10 * time.Minute),
		Statuses: []pr.CommitStatus{{Context: FluxStatusPrefix + "flux-system/abc", State: pr.StatusSuccess, CreatedAt: now.Add(-5 * time.Minute)}}}
	v = ro.Gate("rev1", []Cluster{
		{Name: "c1", Repo: "cluster-c1", Decision: &pr.Decision{Action: pr.ActionNoop}, PR: merged, Found: true},
		{Name: "p1", Repo: "cluster-p1", Decision: changed},
	}, nil)
	require.Len(t, v.Status.Waves, 2)
	assert.Equal(t, WaveSoaking, v.Status.Waves[0].State)
	assert.Equal(t, now.Add(55*time.Minute), ro.NextWake(v.Status))
	assert.Contains(t, ro.CheckRun(v.Status).Title, "soaking until")
	rep := v.Status.Report()
	assert.Equal(t, "rev1", rep.Revision)
	assert.Equal(t, now.Add(55*time.Minute), rep.NextCheck)

	var none *Status
	assert.True(t, ro.NextWake(none).IsZero())
	assert.Nil(t, none.Report())
}

// TestHealthOf: Flux's verdict from the kustomization/ statuses only, the newest per context.
func TestHealthOf(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st := func(ctx, state string, at time.Time) pr.CommitStatus {
		return pr.CommitStatus{Context: ctx, State: state, CreatedAt: at}
	}
	h, _ := HealthOf([]pr.CommitStatus{st("ci/build", pr.StatusFailure, t0)})
	assert.Equal(t, HealthUnknown, h, "another context is not Flux's")
	h, at := HealthOf([]pr.CommitStatus{st("kustomization/a", pr.StatusFailure, t0), st("kustomization/a", pr.StatusSuccess, t0.Add(time.Minute)),
		st("kustomization/b", pr.StatusSuccess, t0.Add(2*time.Minute))})
	assert.Equal(t, HealthSuccess, h)
	assert.Equal(t, t0.Add(2*time.Minute), at, "dated by the last success")
	h, _ = HealthOf([]pr.CommitStatus{st("kustomization/a", pr.StatusPending, t0), st("kustomization/b", pr.StatusSuccess, t0)})
	assert.Equal(t, HealthPending, h)
	h, _ = HealthOf([]pr.CommitStatus{st("kustomization/a", pr.StatusPending, t0), st("kustomization/b", pr.StatusError, t0)})
	assert.Equal(t, HealthFailure, h)
	h, _ = HealthOf([]pr.CommitStatus{st("kustomization/a", pr.StatusSuccess, t0), st("helmrelease/podinfo/1a2b3c4d", pr.StatusFailure, t0)})
	assert.Equal(t, HealthFailure, h, "a HelmRelease's status (helmrelease/, as notification-controller names it) counts")
}

// TestViewBars: the status picture counts each cluster in its wave, keeps the gate's state,
// names the cluster the rollout halted on, and drops a wave without rows unless asked.
func TestViewBars(t *testing.T) {
	t.Parallel()
	ctl := sliceControl()
	st := &Status{Waves: []WaveStatus{{Name: "canary", State: WaveHalted}}, Halted: &Halt{Wave: "canary", Cluster: "c1"}}
	var cache ViewCache
	x := New(ctl, nil).View(st, &cache)
	assert.True(t, x.Declared())
	assert.Equal(t, "canary", x.WaveOf("c1"))
	assert.Equal(t, "c1", x.HaltedOn())
	bars := x.Bars([]Row{{Cluster: "c1", Segment: SegHalted}, {Cluster: "gone", Segment: SegDone}}, false)
	require.Len(t, bars, 1)
	assert.Equal(t, Bar{Name: "canary", State: "halted", Total: 1, Halted: 1}, bars[0])
	assert.Equal(t, "wave canary: 1 cluster: 0 healthy, 0 done, 0 open, 0 pending, 1 halted; rollout halted", bars[0].Label())

	flat := New(&control.Repo{Platform: &control.Platform{}, Clusters: ctl.Clusters}, nil).View(nil, nil)
	assert.False(t, flat.Declared())
	assert.Equal(t, AllClusters, flat.WaveOf("p1"))
}

// TestFailureIsAttributed: a halt names what failed on the cluster, from its merge commit's
// statuses (the newest of each context): the Kustomization of a platform component or of the
// workspace (generic-hmac records the workspace namespace's on its own context), a
// HelmRelease; the check run's summary carries it (the rollback's reason too: reconcile).
func TestFailureIsAttributed(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	st := func(ctx, state string, ago time.Duration) pr.CommitStatus {
		return pr.CommitStatus{Context: ctx, State: state, CreatedAt: now.Add(-ago)}
	}
	statuses := []pr.CommitStatus{
		st("kustomization/platform-monitoring/1a2b3c4d", pr.StatusFailure, 4*time.Minute),
		st("kustomization/apps/1a2b3c4d", pr.StatusFailure, 5*time.Minute),
		st("kustomization/apps/1a2b3c4d", pr.StatusSuccess, 3*time.Minute), // recovered
		st("kustomization/workspace-team-a/9f8e7d6c", pr.StatusFailure, 2*time.Minute),
		st("helmrelease/podinfo/9f8e7d6c", pr.StatusError, 2*time.Minute),
		st("ci/build", pr.StatusFailure, time.Minute),
	}
	assert.Equal(t, "HelmRelease podinfo, Kustomization platform-monitoring (component monitoring), Kustomization workspace-team-a (workspace team-a)",
		FailedObjects(statuses))
	assert.Empty(t, FailedObjects(statuses[2:3]))

	merged := pr.RolloutPR{Number: 7, State: pr.StateMerged, Source: "rev1", MergedAt: now.Add(-10 * time.Minute), Statuses: statuses}
	ro := New(sliceControl(), func() time.Time { return now })
	v := ro.Gate("rev1", []Cluster{
		{Name: "c1", Repo: "cluster-c1", Decision: &pr.Decision{Action: pr.ActionNoop}, PR: merged, Found: true},
		{Name: "p1", Repo: "cluster-p1", Decision: &pr.Decision{Action: pr.ActionOpen, OpenPR: true}},
	}, nil)
	require.NotNil(t, v.Status.Halted)
	assert.Equal(t, "c1", v.Status.Halted.Cluster)
	assert.Equal(t, "Flux reported a failure for the merge of #7", v.Status.Halted.Reason, "the check run's title stays short")
	assert.Equal(t, "HelmRelease podinfo, Kustomization platform-monitoring (component monitoring), Kustomization workspace-team-a (workspace team-a)",
		v.Status.Halted.FailedBy)
	assert.Contains(t, ro.CheckRun(v.Status).Summary, "What failed on c1: HelmRelease podinfo, Kustomization platform-monitoring (component monitoring), Kustomization workspace-team-a (workspace team-a).")
}

// TestCountsAsHealth: the contexts the gate weighs are Flux's Kustomization and HelmRelease
// statuses (what serve's ingress wakes the rollout on too); a CI status is not.
func TestCountsAsHealth(t *testing.T) {
	for ctx, want := range map[string]bool{
		"kustomization/apps/7a1b": true, "helmrelease/podinfo/0c9c": true,
		"ci/build": false, "": false, "kustomizations/x/1": false,
	} {
		assert.Equal(t, want, CountsAsHealth(ctx), ctx)
	}
}
