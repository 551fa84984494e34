package rollout

import (
	"io/fs"
	"os"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// planFixture loads the control package's valid control repo (clusters dev-us-1: env=dev,
// region=us; prod-eu-1: env=prod, region=eu) with platform.yaml replaced by platform, so the
// plan is tested on the control repo as written and validated.
func planFixture(t *testing.T, platform string) *control.Repo {
	t.Helper()
	const dir = "../control/testdata/valid"
	m := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(os.DirFS(dir), p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	}))
	m["platform.yaml"] = &fstest.MapFile{Data: []byte(platform)}
	repo, err := control.Load(m)
	require.NoError(t, err)
	return repo
}

// platformSpec is a platform.yaml with the components monitoring (every cluster; rollout: its
// own waves, indented under the component) and metallb, and extra lines under spec.
func platformSpec(rollout, spec string) string {
	return `apiVersion: fleetbot.io/v1alpha1
kind: Platform
metadata: {name: acme}
spec:
  owner: acme
  admins: [platform]
  components:
    - app: monitoring
      clusterSelector: {}
` + rollout + `    - app: metallb
      clusterSelector:
        matchLabels: {network: metal}
      values: {metallb_speaker_tolerations: "false"}
` + spec
}

// TestWaves: a cluster is in the first declared wave that matches it, the clusters no wave
// matches make a last wave of their own, and a wave matching none is kept empty.
func TestWaves(t *testing.T) {
	repo := planFixture(t, platformSpec("", `  rollout:
    waves:
      - name: canary
        clusterSelector: {matchLabels: {env: dev}}
      - name: prod
        clusterSelector: {matchLabels: {env: prod}}
`))
	assert.Equal(t, []WaveGroup{
		{Name: "canary", Index: 0, Clusters: []string{"dev-us-1"}},
		{Name: "prod", Index: 1, Clusters: []string{"prod-eu-1"}},
	}, New(repo, nil).Waves())

	repo = planFixture(t, platformSpec("", `  rollout:
    waves:
      - name: eu
        clusterSelector: {matchLabels: {region: eu}}
      - name: metal
        clusterSelector: {matchLabels: {network: metal}}
`))
	assert.Equal(t, []WaveGroup{
		{Name: "eu", Index: 0, Clusters: []string{"prod-eu-1"}},
		{Name: "metal", Index: 1},
		{Name: RestWave, Index: -1, Clusters: []string{"dev-us-1"}},
	}, New(repo, nil).Waves())

	repo = planFixture(t, platformSpec("", ""))
	assert.Equal(t, []WaveGroup{{Name: RestWave, Index: -1, Clusters: []string{"dev-us-1", "prod-eu-1"}}}, New(repo, nil).Waves())
	assert.Empty(t, (*Rollouts)(nil).Waves(), "no control repo, no waves")
}

// TestPlan: one list applies as declared; several combine into their intersection, ordered by
// the first list, then the next; the combined wave takes the longest soak, the smallest
// maxParallel and merges automatically only when all its waves do.
func TestPlan(t *testing.T) {
	repo := planFixture(t, platformSpec(`      rollout:
        waves:
          - name: eu
            clusterSelector: {matchLabels: {region: eu}}
            soak: 2h
            maxParallel: 3
            merge: auto
`, `  rollout:
    waves:
      - name: dev
        clusterSelector: {matchLabels: {env: dev}}
        soak: 1h
        maxParallel: 1
        merge: auto
`))
	ro := New(repo, nil)

	fleet := ro.Plan(nil, true)
	assert.Equal(t, []string{FleetWaves}, fleet.Lists)
	assert.Equal(t, []PlannedWave{
		{Name: "dev", Clusters: []string{"dev-us-1"}, MaxParallel: 1, Soak: time.Hour, AutoMerge: true},
		{Name: RestWave, Clusters: []string{"prod-eu-1"}},
	}, fleet.Waves)
	assert.Equal(t, fleet, ro.Plan(nil, false), "a revision that changes no cluster plans the fleet's waves")
	assert.Equal(t, fleet, ro.Plan([]string{"metallb"}, true), "metallb declares no waves of its own")

	own := ro.Plan([]string{"monitoring"}, false)
	assert.Equal(t, []string{ComponentWaves("monitoring")}, own.Lists)
	assert.Equal(t, []PlannedWave{
		{Name: "eu", Clusters: []string{"prod-eu-1"}, MaxParallel: 3, Soak: 2 * time.Hour, AutoMerge: true},
		{Name: RestWave, Clusters: []string{"dev-us-1"}},
	}, own.Waves, "a change to monitoring alone takes monitoring's waves: eu first")

	both := ro.Plan([]string{"monitoring"}, true)
	assert.Equal(t, []string{ComponentWaves("monitoring"), FleetWaves}, both.Lists)
	assert.Equal(t, []PlannedWave{
		{Name: "eu+(rest)", Clusters: []string{"prod-eu-1"}, MaxParallel: 3, Soak: 2 * time.Hour},
		{Name: "(rest)+dev", Clusters: []string{"dev-us-1"}, MaxParallel: 1, Soak: time.Hour},
	}, both.Waves, "the component's list comes first; a wave merges automatically only when each of its lists' waves does")
	for i := 0; i < 3; i++ {
		assert.Equal(t, both, ro.Plan([]string{"monitoring", "monitoring"}, true), "deterministic")
	}
}

// TestPlanCarriesTheRules: a planned wave carries its failure budget (maxFailures defaulting
// to maxUnavailable), its failure action (its own, else spec.rollout.onFailure) and its
// approval.
func TestPlanCarriesTheRules(t *testing.T) {
	repo := planFixture(t, platformSpec("", `  rollout:
    onFailure: rollback
    waves:
      - name: canary
        clusterSelector: {matchLabels: {env: dev}}
        maxUnavailable: 50%
        merge: auto
      - name: prod
        clusterSelector: {matchLabels: {env: prod}}
        approval: required
        onFailure: halt
        maxFailures: 0
        maxUnavailable: "10%"
`))
	plan := New(repo, nil).Plan(nil, true)
	require.Len(t, plan.Waves, 2)
	canary, prod := plan.Waves[0], plan.Waves[1]
	assert.Equal(t, []intstr.IntOrString{intstr.FromString("50%")}, canary.MaxUnavailable)
	assert.Equal(t, []intstr.IntOrString{intstr.FromString("50%")}, canary.MaxFailures, "maxFailures defaults to maxUnavailable")
	assert.True(t, canary.Rollback, "spec.rollout.onFailure")
	assert.Empty(t, canary.Approvals)
	assert.Equal(t, []intstr.IntOrString{intstr.FromString("10%")}, prod.MaxUnavailable)
	assert.Equal(t, []intstr.IntOrString{intstr.FromInt32(0)}, prod.MaxFailures)
	assert.False(t, prod.Rollback, "the wave's own onFailure")
	assert.Equal(t, []string{"prod"}, prod.Approvals)
}

// TestPlanCombinesRules: a wave combined from several lists takes every list's budget (a list
// without one has 0, which binds), rolls back when any of its waves does, and waits for each
// approval any of them requires.
func TestPlanCombinesRules(t *testing.T) {
	repo := planFixture(t, platformSpec(`      rollout:
        waves:
          - name: mon-canary
            clusterSelector: {matchLabels: {env: dev}}
            maxUnavailable: 1
            approval: required
            onFailure: rollback
`, `  rollout:
    waves:
      - name: canary
        clusterSelector: {matchLabels: {env: dev}}
        maxUnavailable: 50%
        approval: required
      - name: prod
        clusterSelector: {matchLabels: {env: prod}}
        maxUnavailable: 10%
`))
	plan := New(repo, nil).Plan([]string{"monitoring"}, true)
	require.Len(t, plan.Waves, 2)
	first, rest := plan.Waves[0], plan.Waves[1]
	assert.Equal(t, "mon-canary+canary", first.Name)
	assert.Equal(t, []intstr.IntOrString{intstr.FromInt32(1), intstr.FromString("50%")}, first.MaxUnavailable)
	assert.True(t, first.Rollback)
	assert.Equal(t, []string{"mon-canary", "canary"}, first.Approvals)
	assert.Equal(t, "(rest)+prod", rest.Name)
	assert.Nil(t, rest.MaxUnavailable, "the component's implicit last wave has no budget: 0 binds")
	assert.False(t, rest.Rollback)
	assert.Empty(t, rest.Approvals)
}
