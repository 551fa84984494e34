package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// wiredControl is a fleet of one canary (c1) and a prod wave of four clusters (p1-p4), the
// digest of its content set, for the gate's reading of the control repo's rules and records.
func wiredControl(prod control.Wave) *control.Repo {
	plat := &control.Platform{}
	plat.Spec.Owner = "acme"
	prod.Name = "prod"
	prod.ClusterSelector = &control.Selector{MatchLabels: map[string]string{"env": "prod"}}
	plat.Spec.Rollout.Waves = []control.Wave{
		{Name: "canary", ClusterSelector: &control.Selector{MatchLabels: map[string]string{"env": "dev"}}},
		prod,
	}
	ctl := &control.Repo{Platform: plat, Digest: "sha256:content"}
	for _, c := range []struct{ name, env string }{{"c1", "dev"}, {"p1", "prod"}, {"p2", "prod"}, {"p3", "prod"}, {"p4", "prod"}} {
		cl := &control.Cluster{}
		cl.Metadata.Name = c.name
		cl.Metadata.Labels = map[string]string{"env": c.env}
		ctl.Clusters = append(ctl.Clusters, cl)
	}
	return ctl
}

func percent(s string) *control.CountOrPercent {
	v := control.CountOrPercent(intstr.FromString(s))
	return &v
}

// wiredFleet is the gate's input at now: c1 merged healthy long ago, and each prod cluster
// as given (nil: changed, no pull request yet).
func wiredFleet(ctl *control.Repo, now time.Time, prod map[string]*pr.RolloutPR) gateInput {
	changed := &pr.Decision{Action: pr.ActionOpen, OpenPR: true}
	healthy := func(at time.Time) pr.RolloutPR {
		return pr.RolloutPR{Number: 1, State: pr.StateMerged, Source: "rev1", MergedAt: at,
			Statuses: []pr.CommitStatus{{Context: FluxStatusPrefix + "flux-system/x", State: pr.StatusSuccess, CreatedAt: at}}}
	}
	in := gateInput{Control: ctl, Revision: "rev1", Now: now, Clusters: []Cluster{
		{Name: "c1", Repo: "cluster-c1", Decision: &pr.Decision{Action: pr.ActionNoop}, PR: healthy(now.Add(-3 * time.Hour)), Found: true},
	}}
	for _, name := range []string{"p1", "p2", "p3", "p4"} {
		c := Cluster{Name: name, Repo: "cluster-" + name, Decision: changed}
		if p := prod[name]; p != nil {
			c.PR, c.Found, c.Decision = *p, true, &pr.Decision{Action: pr.ActionNoop}
		}
		in.Clusters = append(in.Clusters, c)
	}
	return in
}

// TestGateReadsTheControlRepo: the gate takes the failure budget, the failure action, the
// approvals, skips, change windows and a rollback record from the control repo, each state
// change at an injected time.
func TestGateReadsTheControlRepo(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 2, 12, 0, 0, 0, time.UTC) // a Monday
	failed := &pr.RolloutPR{Number: 9, State: pr.StateMerged, Source: "rev1", MergedAt: now.Add(-time.Hour),
		Statuses: []pr.CommitStatus{{Context: FluxStatusPrefix + "flux-system/x", State: pr.StatusFailure, CreatedAt: now.Add(-50 * time.Minute)}}}
	silent := &pr.RolloutPR{Number: 8, State: pr.StateMerged, Source: "rev1", MergedAt: now.Add(-2 * time.Hour)}
	healthy := &pr.RolloutPR{Number: 7, State: pr.StateMerged, Source: "rev1", MergedAt: now.Add(-2 * time.Hour),
		Statuses: []pr.CommitStatus{{Context: FluxStatusPrefix + "flux-system/x", State: pr.StatusSuccess, CreatedAt: now.Add(-time.Hour)}}}

	t.Run("within budget the rollout goes on and lists the failed and silent clusters", func(t *testing.T) {
		ctl := wiredControl(control.Wave{MaxUnavailable: percent("50%")})
		v := gateOf(wiredFleet(ctl, now, map[string]*pr.RolloutPR{"p1": failed, "p2": silent, "p3": healthy, "p4": healthy}))
		require.Nil(t, v.Status.Halted)
		prod := v.Status.Waves[1]
		assert.Equal(t, []string{"p1"}, prod.Failed)
		assert.Equal(t, []string{"p2"}, prod.Unreported)
		assert.Equal(t, 2, prod.MaxUnavailable)
		assert.True(t, v.Status.Done)
		sum := v.Status.checkRun().Summary
		assert.Contains(t, sum, "Wave prod: failed (1 of maxFailures 2): p1.")
		assert.Contains(t, sum, "Wave prod: not reported within the health timeout (with the failed, 2 of maxUnavailable 2): p2.")
		var b strings.Builder
		require.NoError(t, v.Status.Report().WriteText(&b))
		assert.Contains(t, b.String(), "wave prod: failed (1, maxFailures 2): p1\n")
		assert.Equal(t, []string{"p2"}, v.Status.Report().Waves[1].Unreported)
	})
	t.Run("over budget it halts, or asks for a rollback", func(t *testing.T) {
		ctl := wiredControl(control.Wave{MaxUnavailable: percent("25%")})
		in := wiredFleet(ctl, now, map[string]*pr.RolloutPR{"p1": failed, "p2": silent, "p3": healthy})
		v := gateOf(in)
		require.NotNil(t, v.Status.Halted)
		assert.False(t, v.Status.Halted.Rollback)
		assert.Contains(t, v.Status.Halted.Reason, "2 of 4 clusters unavailable")
		assert.Contains(t, v.Status.Held["p4"], "rollout halted")

		ctl.Platform.Spec.Rollout.OnFailure = control.OnFailureRollback
		v = gateOf(in)
		require.NotNil(t, v.Status.Halted)
		assert.True(t, v.Status.Halted.Rollback, "spec.rollout.onFailure: rollback")
		assert.Contains(t, v.Status.checkRun().Summary, "Wave prod rolls back on failure (onFailure: rollback): fleetbot opens a pull request on every cluster and workspace repo the revision reached")
		assert.True(t, v.Status.Report().Halted.Rollback)
	})
	t.Run("a skipped cluster is left out of the wave and its budget", func(t *testing.T) {
		ctl := wiredControl(control.Wave{})
		in := wiredFleet(ctl, now, map[string]*pr.RolloutPR{"p1": failed, "p2": healthy, "p3": healthy, "p4": healthy})
		require.NotNil(t, gateOf(in).Status.Halted, "budget 0: p1's failure halts")
		ctl.Skips = []control.RolloutRecord{{Name: "p1", Digest: ctl.Digest}}
		v := gateOf(in)
		assert.Nil(t, v.Status.Halted)
		assert.Equal(t, []string{"p1"}, v.Status.Waves[1].Skipped)
		ctl.Skips[0].Digest = "sha256:other"
		assert.NotNil(t, gateOf(in).Status.Halted, "a skip of other content does not apply")
	})
	t.Run("an approval wave waits for its record", func(t *testing.T) {
		ctl := wiredControl(control.Wave{Approval: control.ApprovalRequired})
		in := wiredFleet(ctl, now, nil)
		v := gateOf(in)
		assert.Equal(t, WaveAwaitingApproval, v.Status.Waves[1].State)
		assert.Empty(t, v.Status.Admitted)
		ctl.Approvals = []control.RolloutRecord{{Name: "prod", Digest: ctl.Digest}}
		v = gateOf(in)
		assert.Equal(t, WaveActive, v.Status.Waves[1].State)
		assert.Equal(t, []string{"p1", "p2", "p3", "p4"}, v.Status.Admitted)
	})
	t.Run("outside the change windows nothing opens and nothing merges automatically", func(t *testing.T) {
		ctl := wiredControl(control.Wave{Merge: control.MergeAuto})
		ctl.Platform.Spec.Rollout.Windows = []control.ChangeWindow{{Kind: control.WindowAllow, Days: []string{"Tue"}, Start: "09:00", Duration: "8h"}}
		in := wiredFleet(ctl, now, nil)
		v := gateOf(in)
		assert.Equal(t, WaveClosed, v.Status.Waves[1].State)
		assert.Equal(t, time.Date(2026, 3, 3, 9, 0, 0, 0, time.UTC), v.Status.nextWake())
		assert.False(t, v.Status.MergesAllowed())
		assert.Contains(t, v.Status.checkRun().Summary, "Change windows: closed until 2026-03-03T09:00:00Z")
		var b strings.Builder
		require.NoError(t, v.Status.Report().WriteText(&b))
		assert.Contains(t, b.String(), "change windows: closed until 2026-03-03T09:00:00Z")

		in.Now = time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC)
		v = gateOf(in)
		assert.Equal(t, WaveActive, v.Status.Waves[1].State)
		assert.True(t, v.Merge["cluster-p1"].AutoMerge, "inside the window the wave's merge applies")
	})
	t.Run("a rollback record holds the content it names everywhere", func(t *testing.T) {
		ctl := wiredControl(control.Wave{})
		ctl.Rollback = &control.RolloutRecord{Name: "rollback", Digest: ctl.Digest, Revision: "rev1", Note: "INC-7"}
		v := gateOf(wiredFleet(ctl, now, nil))
		require.NotNil(t, v.Status.Halted)
		assert.True(t, v.Status.Halted.RolledBack)
		assert.Equal(t, "revision rev1 rolled back by hand (rollout/rollback.yaml): INC-7: no new pull request opens for this content; a control-repo commit that changes what it renders starts a new rollout", v.Status.Halted.Reason)
		assert.Empty(t, v.Status.Admitted)
		assert.Equal(t, "rollout halted: "+v.Status.Halted.Reason, v.Status.checkRun().Title)
		ctl.Digest = "sha256:newer"
		assert.Nil(t, gateOf(wiredFleet(ctl, now, nil)).Status.Halted, "a newer control commit rolls out again")
	})
}
