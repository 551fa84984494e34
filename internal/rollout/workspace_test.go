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

// workspaceControl is a fleet in two waves (canary: c1, then p1), rolling back on failure with
// no budget, each cluster in a workspace of its own (shop-c on c1, shop-p on p1), health
// delivered by provider (generic-hmac watches the workspace namespaces).
func workspaceControl(provider string) *control.Repo {
	plat := &control.Platform{}
	plat.Spec.Owner = "acme"
	plat.Spec.Rollout.OnFailure = "rollback"
	plat.Spec.Rollout.Health.Provider = provider
	plat.Spec.Rollout.Waves = []control.Wave{
		{Name: "canary", ClusterSelector: &control.Selector{MatchLabels: map[string]string{"env": "dev"}}},
	}
	ctl := &control.Repo{Platform: plat}
	for _, c := range []struct{ name, env, ws string }{{"c1", "dev", "shop-c"}, {"p1", "prod", "shop-p"}} {
		cl := &control.Cluster{}
		cl.Metadata.Name = c.name
		cl.Metadata.Labels = map[string]string{"env": c.env}
		cl.Spec.Workspace = c.ws
		ctl.Clusters = append(ctl.Clusters, cl)
		ws := &control.Workspace{}
		ws.Metadata.Name = c.ws
		ctl.Workspaces = append(ctl.Workspaces, ws)
	}
	return ctl
}

// TestGateWeighsWorkspaceRepos: a revision that changes only workspace repos (a catalog app of
// the workspaces) rolls out in the waves of their clusters: the canary's workspace opens, the
// later wave's waits; once merged, the failure Flux reports from the canary's workspace
// namespace (the status serve records for /health/c1/shop-c) halts the rollout over the budget
// and rolls it back, naming the workspace's pull request, while a status of another cluster's
// endpoint does not count for it. A healthy report finishes the wave and releases the next.
func TestGateWeighsWorkspaceRepos(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctl := workspaceControl(control.HealthGenericHMAC)
	noop := &pr.Decision{Action: pr.ActionNoop}
	changed := &pr.Decision{Action: pr.ActionOpen, OpenPR: true}
	clusters := []Cluster{{Name: "c1", Repo: "cluster-c1", Decision: noop}, {Name: "p1", Repo: "cluster-p1", Decision: noop}}

	v := gateOf(gateInput{Control: ctl, Revision: "rev1", Now: now, Clusters: clusters, Workspaces: []Workspace{
		{Name: "shop-c", Repo: "workspace-shop-c", Decision: changed},
		{Name: "shop-p", Repo: "workspace-shop-p", Decision: changed},
	}})
	assert.Equal(t, []string{"c1"}, v.Status.Admitted, "the canary's workspace change makes it take part")
	_, held := v.Holds(&fanout.Target{Kind: fanout.KindWorkspace, Name: "shop-c"})
	assert.False(t, held, "the canary's workspace opens")
	why, held := v.Holds(&fanout.Target{Kind: fanout.KindWorkspace, Name: "shop-p"})
	assert.True(t, held, "the later wave's workspace waits")
	assert.Contains(t, why, "waiting for p1")

	status := func(cluster, ns, state string, at time.Time) pr.CommitStatus {
		return pr.CommitStatus{Context: HealthStatusContext(HealthEndpoint{Cluster: cluster, Namespace: ns}, "workspace-"+ns), State: state, CreatedAt: at}
	}
	merged := func(sts ...pr.CommitStatus) pr.RolloutPR {
		return pr.RolloutPR{Number: 3, State: pr.StateMerged, Source: "rev1", MergedAt: now.Add(-10 * time.Minute), Statuses: sts}
	}
	gate := func(ws pr.RolloutPR) Verdict {
		return gateOf(gateInput{Control: ctl, Revision: "rev1", Now: now, Clusters: clusters, Workspaces: []Workspace{
			{Name: "shop-c", Repo: "workspace-shop-c", Decision: noop, PR: ws, Found: true},
			{Name: "shop-p", Repo: "workspace-shop-p", Decision: changed},
		}})
	}

	// Merged, reported by another cluster's endpoint only: still waiting for c1's verdict.
	v = gate(merged(status("p1", "shop-c", pr.StatusFailure, now.Add(-time.Minute))))
	require.Nil(t, v.Status.Halted)
	assert.Equal(t, WaveActive, v.Status.Waves[0].State)
	assert.Equal(t, now.Add(20*time.Minute), v.Status.nextWake(), "the health timeout of the workspace's merge")
	_, held = v.Holds(&fanout.Target{Kind: fanout.KindWorkspace, Name: "shop-p"})
	assert.True(t, held)

	// c1's workspace Kustomization failed: over the budget of 0, the rollout rolls back.
	v = gate(merged(status("c1", "shop-c", pr.StatusFailure, now.Add(-time.Minute))))
	require.NotNil(t, v.Status.Halted)
	assert.Equal(t, "c1", v.Status.Halted.Cluster)
	assert.True(t, v.Status.Halted.Rollback)
	assert.Contains(t, v.Status.Halted.Reason, "Flux reported a failure for the merge of workspace-shop-c#3")
	_, held = v.Holds(&fanout.Target{Kind: fanout.KindWorkspace, Name: "shop-p"})
	assert.True(t, held, "the later wave never gets the failed revision")

	// Healthy on c1: the canary is done and the next wave, with its workspace, starts.
	v = gate(merged(status("c1", "shop-c", pr.StatusSuccess, now.Add(-time.Minute))))
	require.Nil(t, v.Status.Halted)
	assert.Equal(t, WaveDone, v.Status.Waves[0].State)
	assert.Equal(t, []string{"p1"}, v.Status.Admitted)
	_, held = v.Holds(&fanout.Target{Kind: fanout.KindWorkspace, Name: "shop-p"})
	assert.False(t, held)

	// With the github provider nothing watches the workspace namespace: the merge is its verdict.
	v = gateOf(gateInput{Control: workspaceControl(control.HealthGitHub), Revision: "rev1", Now: now, Clusters: clusters, Workspaces: []Workspace{
		{Name: "shop-c", Repo: "workspace-shop-c", Decision: noop, PR: merged(), Found: true},
		{Name: "shop-p", Repo: "workspace-shop-p", Decision: changed},
	}})
	assert.Equal(t, WaveDone, v.Status.Waves[0].State)
	assert.Equal(t, []string{"p1"}, v.Status.Admitted)
}

// TestGateWorkspaceWithClusterChange: a cluster whose repo and workspace repo both change is
// done when both merged and are healthy, and failed when either failed.
func TestGateWorkspaceWithClusterChange(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctl := workspaceControl(control.HealthGenericHMAC)
	noop := &pr.Decision{Action: pr.ActionNoop}
	ok := func(cluster, ns string) []pr.CommitStatus {
		name := "flux-system"
		if ns != "" {
			name = "workspace-" + ns
		}
		return []pr.CommitStatus{{Context: HealthStatusContext(HealthEndpoint{Cluster: cluster, Namespace: ns}, name), State: pr.StatusSuccess, CreatedAt: now.Add(-time.Minute)}}
	}
	clusterPR := pr.RolloutPR{Number: 7, State: pr.StateMerged, Source: "rev1", MergedAt: now.Add(-10 * time.Minute), Statuses: ok("c1", "")}
	in := func(ws pr.RolloutPR, found bool, d *pr.Decision) gateInput {
		return gateInput{Control: ctl, Revision: "rev1", Now: now,
			Clusters:   []Cluster{{Name: "c1", Repo: "cluster-c1", Decision: noop, PR: clusterPR, Found: true}, {Name: "p1", Repo: "cluster-p1", Decision: noop}},
			Workspaces: []Workspace{{Name: "shop-c", Repo: "workspace-shop-c", Decision: d, PR: ws, Found: found}}}
	}
	// The workspace's pull request is still to open: the cluster stays in its wave.
	v := gateOf(in(pr.RolloutPR{}, false, &pr.Decision{Action: pr.ActionOpen, OpenPR: true}))
	assert.Equal(t, WaveActive, v.Status.Waves[0].State)
	assert.Equal(t, []string{"c1"}, v.Status.Admitted)
	// Both merged and healthy: done.
	wsPR := pr.RolloutPR{Number: 2, State: pr.StateMerged, Source: "rev1", MergedAt: now.Add(-5 * time.Minute), Statuses: ok("c1", "shop-c")}
	v = gateOf(in(wsPR, true, noop))
	assert.Equal(t, WaveDone, v.Status.Waves[0].State)
	// The workspace failed: the cluster failed.
	wsPR.Statuses[0].State = pr.StatusFailure
	v = gateOf(in(wsPR, true, noop))
	require.NotNil(t, v.Status.Halted)
	assert.Contains(t, v.Status.Halted.Reason, "workspace-shop-c#2")
}

// TestGateWorkspaceOpenPRAdmitsNoClusterChange: a workspace's open pull request (of an earlier
// revision, updated in place) does not let its cluster of a later wave open a new one: the
// cluster's change waits for its wave.
func TestGateWorkspaceOpenPRAdmitsNoClusterChange(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctl := workspaceControl(control.HealthGenericHMAC)
	changed := &pr.Decision{Action: pr.ActionOpen, OpenPR: true}
	v := gateOf(gateInput{Control: ctl, Revision: "rev2", Now: now,
		Clusters: []Cluster{{Name: "c1", Repo: "cluster-c1", Decision: changed}, {Name: "p1", Repo: "cluster-p1", Decision: changed}},
		Workspaces: []Workspace{{Name: "shop-p", Repo: "workspace-shop-p", Decision: &pr.Decision{Action: pr.ActionUpdate, UpdatePR: true},
			PR: pr.RolloutPR{Number: 1, State: pr.StateOpen, Source: "rev1"}, Found: true}}})
	assert.Equal(t, []string{"c1"}, v.Status.Admitted)
	why, held := v.Holds(&fanout.Target{Kind: fanout.KindCluster, Name: "p1"})
	assert.True(t, held, "p1's new pull request waits for its wave")
	assert.Contains(t, why, "wave canary is not done")
}

// TestGateWorkspaceInheritedMerge: a revision that leaves a workspace repo as an earlier one
// merged it weighs that merge as its own when Flux reported on it from the carrier's workspace
// namespace (a failure stays a failure after a commit that only approves), and not at all when
// nothing ever reported on it there (merged before its health was watched): the wave does not
// wait for a verdict that never comes.
func TestGateWorkspaceInheritedMerge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ctl := workspaceControl(control.HealthGenericHMAC)
	inSync := &pr.Decision{Action: pr.ActionNoop, Tree: "t1"}
	clusters := []Cluster{{Name: "c1", Repo: "cluster-c1", Decision: inSync}, {Name: "p1", Repo: "cluster-p1", Decision: inSync}}
	merged := pr.RolloutPR{Number: 4, State: pr.StateMerged, Source: "rev1", Tree: "t1", MergedAt: now.Add(-time.Hour)}
	gate := func(p pr.RolloutPR) Verdict {
		return gateOf(gateInput{Control: ctl, Revision: "rev2", Now: now, Clusters: clusters,
			Workspaces: []Workspace{{Name: "shop-c", Repo: "workspace-shop-c", Decision: inSync, PR: p, Found: true}}})
	}
	v := gate(merged)
	assert.Nil(t, v.Status.Halted)
	assert.True(t, v.Status.Done, "nothing reported on the merge from c1's namespace: not this revision's to wait for")

	merged.Statuses = []pr.CommitStatus{{Context: HealthStatusContext(HealthEndpoint{Cluster: "c1", Namespace: "shop-c"}, "workspace-shop-c"),
		State: pr.StatusFailure, CreatedAt: now.Add(-50 * time.Minute)}}
	v = gate(merged)
	require.NotNil(t, v.Status.Halted, "the failure reported on it is still the workspace's")
	assert.Contains(t, v.Status.Halted.Reason, "workspace-shop-c#4")
}
