package control

import (
	"errors"
	"os"
	"path/filepath"
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
	w := repo.Platform.Spec.Rollout.Waves[0]
	assert.Equal(t, 90*time.Minute, w.SoakDuration())
	assert.Equal(t, 1, w.MaxParallel)
	assert.Equal(t, MergeAuto, w.Merge)
	assert.Zero(t, repo.Platform.Spec.Rollout.Waves[1].SoakDuration())
	assert.True(t, repo.ClusterAutoMerge("dev-us-1"), "the canary wave merges automatically")
	assert.False(t, repo.ClusterAutoMerge("prod-eu-1"), "prod follows spec.pullRequests.merge (manual)")
	assert.False(t, repo.ClusterAutoMerge("no-such-cluster"))
}

// TestRolloutWavesFirstMatchAndRest: a wave whose clusters an earlier wave already takes is
// warned of (a cluster is in the first wave that matches it: rollout.TestWaves).
func TestRolloutWavesFirstMatchAndRest(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{"platform.yaml": platformWith(`  rollout:
    waves:
      - name: eu
        clusterSelector: {matchLabels: {region: eu}}
      - name: metal
        clusterSelector: {matchLabels: {network: metal}}
`)}))
	require.NoError(t, err)
	require.Len(t, repo.Warnings, 1)
	assert.Equal(t, "platform.yaml:19", repo.Warnings[0].Pos.String())
	assert.Contains(t, repo.Warnings[0].Message, "wave metal overlaps earlier waves: all of its 1 clusters (e.g. prod-eu-1) are already in wave eu")
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

// platformWithComponentRollout is the valid fixture's platform.yaml whose monitoring component
// (every cluster) has the rollout block at line 10 onwards, and extra lines under spec.
func platformWithComponentRollout(rollout, spec string) string {
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

// TestRolloutSettingsBadInput: a bad health timeout or a bad wave in a component's own
// waves is an error at its file:line, and the repo is not loaded (nothing is planned or
// written from it).
func TestRolloutSettingsBadInput(t *testing.T) {
	tests := []struct {
		name          string
		rollout, spec string
		want          []want
	}{
		{
			name: "negative health timeout",
			spec: "  rollout:\n    healthTimeout: -5m\n",
			want: []want{{pos: "platform.yaml:15", msg: "healthTimeout -5m is not positive"}},
		},
		{
			name: "zero health timeout",
			spec: "  rollout:\n    healthTimeout: 0s\n",
			want: []want{{pos: "platform.yaml:15", msg: "healthTimeout 0s is not positive"}},
		},
		{
			name: "health timeout without a unit",
			spec: "  rollout:\n    healthTimeout: \"30\"\n",
			want: []want{{pos: "platform.yaml:15", msg: `invalid healthTimeout "30"`, hint: "30m"}},
		},
		{
			name:    "component wave with a negative soak",
			rollout: "      rollout:\n        waves:\n          - name: canary\n            clusterSelector: {matchLabels: {env: dev}}\n            soak: -1h\n",
			want:    []want{{pos: "platform.yaml:14", msg: `wave "canary": soak -1h is negative`}},
		},
		{
			name:    "component wave with an unknown merge policy",
			rollout: "      rollout:\n        waves:\n          - name: canary\n            clusterSelector: {matchLabels: {env: dev}}\n            merge: later\n",
			want:    []want{{pos: "platform.yaml:14", msg: `wave "canary": invalid merge mode "later"`}},
		},
		{
			name:    "component wave without a selector, named twice",
			rollout: "      rollout:\n        waves:\n          - name: canary\n            clusterSelector: {}\n          - name: canary\n",
			want: []want{
				{pos: "platform.yaml:14", msg: `wave "canary" has no clusterSelector`},
				{pos: "platform.yaml:14", msg: `wave "canary" is declared twice (first at platform.yaml:12)`},
			},
		},
		{
			name:    "component rollout with an unknown field",
			rollout: "      rollout:\n        wave: []\n",
			want:    []want{{pos: "platform.yaml:11", msg: `unknown field "wave"`}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := loadIssues(t, fixture(t, map[string]string{"platform.yaml": platformWithComponentRollout(tt.rollout, tt.spec)}), tt.name)
			for _, w := range tt.want {
				assertIssue(t, is, tt.name, w)
			}
		})
	}
}

func TestRolloutHealthTimeout(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{"platform.yaml": platformWith("  rollout:\n    healthTimeout: 2h\n")}))
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, repo.HealthTimeout())
	repo, err = Load(fixture(t, nil))
	require.NoError(t, err)
	assert.Zero(t, repo.HealthTimeout(), "unset: the gate's default (30m) applies")
}

// TestComponentWaveWarnings: a component's wave matching none of the clusters running the
// component, or only clusters an earlier wave of the component takes, is a warning.
func TestComponentWaveWarnings(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{"platform.yaml": platformWithComponentRollout(`      rollout:
        waves:
          - name: canary
            clusterSelector: {matchLabels: {env: dve}}
          - name: all
            clusterSelector: {}
          - name: prod
            clusterSelector: {matchLabels: {env: prod}}
`, "")}))
	require.NoError(t, err, "warnings do not fail the load")
	var got []string
	for _, w := range repo.Warnings {
		got = append(got, w.Pos.String()+": "+w.Message)
	}
	assert.Equal(t, []string{
		"platform.yaml:13: wave canary: clusterSelector matches none of the 2 clusters running component monitoring",
		"platform.yaml:17: wave prod overlaps earlier waves: all of its 1 clusters (e.g. prod-eu-1) are already in wave all",
	}, got)
	assert.True(t, repo.HasRollout(), "a component's own waves are a rollout")
}

// TestClusterAutoMergeOfComponentWaves: the repo setting "Allow auto-merge" is on wherever
// some list's wave may merge automatically: prod-eu-1 through monitoring's eu wave, dev-us-1
// through the fleet's dev (the plan of a revision: rollout.TestPlan).
func TestClusterAutoMergeOfComponentWaves(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{"platform.yaml": platformWithComponentRollout(`      rollout:
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
`)}))
	require.NoError(t, err)
	assert.True(t, repo.ClusterAutoMerge("prod-eu-1"))
	assert.True(t, repo.ClusterAutoMerge("dev-us-1"))
}

// TestRolloutPaused: rollout/paused pauses the rollout, its text the reason; a directory
// there, a binary or an oversized note is an error at the file and nothing is loaded.
func TestRolloutPaused(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{PausedFile: "  canary slow, investigating\n"}))
	require.NoError(t, err)
	require.NotNil(t, repo.Paused)
	assert.Equal(t, "canary slow, investigating", repo.Paused.Reason)
	require.Len(t, repo.Warnings, 1, "paused without waves: a warning, the pause holds nothing")
	assert.Equal(t, PausedFile, repo.Warnings[0].Pos.String())
	assert.Contains(t, repo.Warnings[0].Message, "no waves are declared")

	repo, err = Load(fixture(t, map[string]string{PausedFile: "x\n", "platform.yaml": platformWith(
		"  rollout:\n    waves:\n      - name: canary\n        clusterSelector: {matchLabels: {env: dev}}\n")}))
	require.NoError(t, err)
	assert.NotNil(t, repo.Paused)
	assert.Empty(t, repo.Warnings)

	repo, err = Load(fixture(t, map[string]string{"rollout/README.md": "notes\n"}))
	require.NoError(t, err)
	assert.Nil(t, repo.Paused, "only rollout/paused pauses")

	for name, files := range map[string]map[string]string{
		"a directory": {PausedFile + "/x": "why\n"},
		"not text":    {PausedFile: "\x00\x01"},
		"too long":    {PausedFile: strings.Repeat("x", MaxPauseBytes+1)},
	} {
		is := loadIssues(t, fixture(t, files), name)
		require.NotEmpty(t, is, name)
		assert.Equal(t, PausedFile, is[0].Pos.String(), name)
	}
}

// TestRolloutPausedLinkLeavingTheRepo: rollout/paused as a symlink leaving the control repo
// is refused at the link, naming its target, and nothing is loaded; one to a file inside the
// repo is read as that file.
func TestRolloutPausedLinkLeavingTheRepo(t *testing.T) {
	dir := copyFixture(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "rollout"), 0o755))
	require.NoError(t, os.Symlink("../../outside/secret", filepath.Join(dir, "rollout", "paused")))
	repo, err := LoadDir(dir)
	require.Error(t, err)
	assert.Nil(t, repo)
	var is Issues
	require.True(t, errors.As(err, &is))
	assert.Equal(t, PausedFile, is[0].Pos.String())
	assert.Contains(t, is[0].Message, `its target "../../outside/secret" resolves outside it`)

	require.NoError(t, os.Remove(filepath.Join(dir, "rollout", "paused")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rollout", "why.txt"), []byte("maintenance window\n"), 0o644))
	require.NoError(t, os.Symlink("why.txt", filepath.Join(dir, "rollout", "paused")))
	repo, err = LoadDir(dir)
	require.NoError(t, err)
	require.NotNil(t, repo.Paused)
	assert.Equal(t, "maintenance window", repo.Paused.Reason)
}
