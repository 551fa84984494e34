package control

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// platformWith is the valid fixture's platform.yaml with extra lines under spec.
func platformWith(spec string) string {
	return `apiVersion: fleetbot.io/v1alpha1
kind: Platform
metadata: {name: acme}
spec:
  owner: acme
  admins: [platform]
  components:
    - app: monitoring
      clusterSelector: {}
    - app: metallb
      clusterSelector:
        matchLabels: {network: metal}
      values: {metallb_speaker_tolerations: "false"}
` + spec
}

func TestRolloutBadInput(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want []want
	}{
		{
			name: "no name",
			spec: "  rollout:\n    waves:\n      - clusterSelector: {}\n",
			want: []want{{pos: "platform.yaml:16", msg: "wave 1 has no name", hint: "name: canary"}},
		},
		{
			name: "invalid name",
			spec: "  rollout:\n    waves:\n      - name: Canary_1\n        clusterSelector: {}\n",
			want: []want{{pos: "platform.yaml:16", msg: `invalid wave name "Canary_1"`}},
		},
		{
			name: "the implicit wave's name",
			spec: "  rollout:\n    waves:\n      - name: (rest)\n        clusterSelector: {}\n",
			want: []want{{pos: "platform.yaml:16", msg: `invalid wave name "(rest)"`}},
		},
		{
			name: "duplicate name",
			spec: "  rollout:\n    waves:\n      - name: canary\n        clusterSelector: {matchLabels: {env: dev}}\n      - name: canary\n        clusterSelector: {}\n",
			want: []want{{pos: "platform.yaml:18", msg: `wave "canary" is declared twice (first at platform.yaml:16)`}},
		},
		{
			name: "no selector",
			spec: "  rollout:\n    waves:\n      - name: canary\n",
			want: []want{{pos: "platform.yaml:16", msg: `wave "canary" has no clusterSelector`, hint: "{} matches every cluster"}},
		},
		{
			name: "invalid selector",
			spec: "  rollout:\n    waves:\n      - name: canary\n        clusterSelector:\n          matchExpressions:\n            - {key: env, operator: Near, values: [dev]}\n",
			want: []want{{pos: "platform.yaml:19", msg: "invalid cluster selector"}},
		},
		{
			name: "negative maxParallel",
			spec: "  rollout:\n    waves:\n      - name: canary\n        clusterSelector: {}\n        maxParallel: -1\n",
			want: []want{{pos: "platform.yaml:18", msg: `wave "canary": maxParallel -1 is negative`}},
		},
		{
			name: "negative soak",
			spec: "  rollout:\n    waves:\n      - name: canary\n        clusterSelector: {}\n        soak: -30m\n",
			want: []want{{pos: "platform.yaml:18", msg: `wave "canary": soak -30m is negative`}},
		},
		{
			name: "soak without a unit",
			spec: "  rollout:\n    waves:\n      - name: canary\n        clusterSelector: {}\n        soak: \"30\"\n",
			want: []want{{pos: "platform.yaml:18", msg: `wave "canary": invalid soak "30"`, hint: "30m"}},
		},
		{
			name: "unknown merge mode",
			spec: "  rollout:\n    waves:\n      - name: canary\n        clusterSelector: {}\n        merge: yolo\n",
			want: []want{{pos: "platform.yaml:18", msg: `wave "canary": invalid merge mode "yolo"`}},
		},
		{
			name: "unknown field",
			spec: "  rollout:\n    waves:\n      - name: canary\n        clusterSelector: {}\n        sok: 1h\n",
			want: []want{{pos: "platform.yaml:18", msg: `unknown field "sok"`, hint: `did you mean "soak"?`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := loadIssues(t, fixture(t, map[string]string{"platform.yaml": platformWith(tt.spec)}), tt.name)
			for _, w := range tt.want {
				assertIssue(t, is, tt.name, w)
			}
		})
	}
}

func TestRolloutWaves(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{"platform.yaml": platformWith(`  rollout:
    waves:
      - name: canary
        clusterSelector: {matchLabels: {env: dev}}
        maxParallel: 1
        soak: 1h30m
        merge: auto
      - name: prod
        clusterSelector: {matchLabels: {env: prod}}
`)}))
	require.NoError(t, err)
	assert.Empty(t, repo.Warnings)
	assert.Equal(t, []WaveGroup{
		{Name: "canary", Index: 0, Clusters: []string{"dev-us-1"}},
		{Name: "prod", Index: 1, Clusters: []string{"prod-eu-1"}},
	}, repo.Waves())
	w := repo.Platform.Spec.Rollout.Waves[0]
	assert.Equal(t, 90*time.Minute, w.SoakDuration())
	assert.Equal(t, 1, w.MaxParallel)
	assert.Equal(t, MergeAuto, w.Merge)
	assert.Zero(t, repo.Platform.Spec.Rollout.Waves[1].SoakDuration())
	assert.True(t, repo.ClusterAutoMerge("dev-us-1"), "the canary wave merges automatically")
	assert.False(t, repo.ClusterAutoMerge("prod-eu-1"), "prod follows spec.pullRequests.merge (manual)")
	assert.False(t, repo.ClusterAutoMerge("no-such-cluster"))
}

// TestRolloutWavesFirstMatchAndRest: a cluster is in the first wave that matches it, and
// the clusters no wave matches make a last wave of their own.
func TestRolloutWavesFirstMatchAndRest(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{"platform.yaml": platformWith(`  rollout:
    waves:
      - name: eu
        clusterSelector: {matchLabels: {region: eu}}
      - name: metal
        clusterSelector: {matchLabels: {network: metal}}
`)}))
	require.NoError(t, err)
	assert.Equal(t, []WaveGroup{
		{Name: "eu", Index: 0, Clusters: []string{"prod-eu-1"}},
		{Name: "metal", Index: 1},
		{Name: RestWave, Index: -1, Clusters: []string{"dev-us-1"}},
	}, repo.Waves())
	require.Len(t, repo.Warnings, 1)
	assert.Equal(t, "platform.yaml:19", repo.Warnings[0].Pos.String())
	assert.Contains(t, repo.Warnings[0].Message, "wave metal overlaps earlier waves: all of its 1 clusters (e.g. prod-eu-1) are already in wave eu")
}

func TestRolloutWavesNoneDeclared(t *testing.T) {
	repo, err := Load(fixture(t, nil))
	require.NoError(t, err)
	assert.Equal(t, []WaveGroup{{Name: RestWave, Index: -1, Clusters: []string{"dev-us-1", "prod-eu-1"}}}, repo.Waves())
}

func TestRolloutWarnings(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{"platform.yaml": platformWith(`  rollout:
    waves:
      - name: canary
        clusterSelector: {matchLabels: {env: dve}}
      - name: everything
        clusterSelector: {}
      - name: prod
        clusterSelector: {matchLabels: {env: prod}}
`)}))
	require.NoError(t, err, "warnings do not fail the load")
	var got []string
	for _, w := range repo.Warnings {
		got = append(got, w.Pos.String()+": "+w.Message)
	}
	assert.Equal(t, []string{
		"platform.yaml:17: wave canary: clusterSelector matches none of the 2 clusters",
		"platform.yaml:21: wave prod overlaps earlier waves: all of its 1 clusters (e.g. prod-eu-1) are already in wave everything",
	}, got)
	for _, w := range repo.Warnings {
		assert.True(t, strings.TrimSpace(w.Hint) != "", "every warning says what to do: %s", w)
	}
}
