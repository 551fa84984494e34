package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
)

// TestRolloutCommands: with waves declared, plan shows which clusters each wave takes, apply
// opens only the first wave's pull requests (the others deferred: held by the rollout), and
// rollout status prints each wave's state and why the others wait.
func TestRolloutCommands(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctl := copyControl(t)
	platform := filepath.Join(ctl, "platform.yaml")
	b, err := os.ReadFile(platform)
	require.NoError(t, err)
	writeFile(t, platform, string(b)+"  rollout:\n    waves:\n      - name: staging\n        clusterSelector: {matchLabels: {env: staging}}\n        soak: 1h\n")

	code, out, errOut := cli(t, "plan", "--control", ctl)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "rollout waves (a change reaches them in this order; pass --forge for their state):\n  1. staging: staging-eu-1\n  2. (rest): edge-1, prod-eu-1, prod-us-1\n")

	forge := filepath.Join(t.TempDir(), "forge")
	code, out, errOut = cli(t, "apply", "--control", ctl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "acme/cluster-staging-eu-1")
	assert.Regexp(t, `acme/cluster-prod-eu-1\s+cluster\s+deferred`, out)
	assert.Contains(t, out, "held by the rollout: wave staging is not done (0 of 1 changed clusters healthy)")

	code, out, errOut = cli(t, "rollout", "status", "--control", ctl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, ": in progress\n")
	lines := strings.Split(out, "\n")
	require.GreaterOrEqual(t, len(lines), 4, out)
	assert.Regexp(t, `staging\s+active\s+1\s+1\s+0\s+0\s+-`, lines[2])
	assert.Regexp(t, `\(rest\)\s+waiting\s+3\s+3\s+0\s+0\s+-`, lines[3])
	assert.Contains(t, out, "held:\n  edge-1: wave staging is not done (0 of 1 changed clusters healthy)\n")

	code, _, errOut = cli(t, "rollout", "status", "--control", ctl)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "rollout status needs --forge")
}

// TestRolloutPauseResumeLocalForge: rollout pause writes rollout/paused with the reason;
// then apply on the local forge opens nothing (every repo held with the pause's note), plan
// and rollout status show the pause. rollout resume removes it and the first wave opens.
func TestRolloutPauseResumeLocalForge(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ctl := copyControl(t)
	platform := filepath.Join(ctl, "platform.yaml")
	b, err := os.ReadFile(platform)
	require.NoError(t, err)
	writeFile(t, platform, string(b)+"  rollout:\n    healthTimeout: 1h\n    waves:\n      - name: staging\n        clusterSelector: {matchLabels: {env: staging}}\n")

	code, out, errOut := cli(t, "rollout", "pause", "--reason", "investigating the staging alerts", "--control", ctl)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "rollout paused: rollout/paused written; commit that and push it")
	code, out, errOut = cli(t, "rollout", "pause", "--reason", "investigating the staging alerts", "--control", ctl)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "the rollout is already paused for that reason: nothing written")

	code, out, errOut = cli(t, "plan", "--control", ctl)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "rollout paused (rollout/paused): investigating the staging alerts: no new wave starts; fleetbot rollout resume continues it\n")

	forge := filepath.Join(t.TempDir(), "forge")
	code, out, errOut = cli(t, "apply", "--control", ctl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `acme/cluster-staging-eu-1\s+cluster\s+deferred`, out)
	assert.Contains(t, out, "held by the rollout: rollout paused: investigating the staging alerts")
	pulls, _ := filepath.Glob(filepath.Join(forge, "acme", "*.pulls.json"))
	for _, p := range pulls {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		assert.NotContains(t, string(b), `"state": "open"`, "%s: paused, no pull request opens", p)
	}

	code, out, errOut = cli(t, "rollout", "status", "--control", ctl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, ": paused\npaused (rollout/paused): investigating the staging alerts: no new wave starts and fleetbot merges nothing")
	assert.Regexp(t, `staging\s+paused\s+1\s+1\s+0\s+0\s+-`, out)

	code, out, errOut = cli(t, "rollout", "resume", "--control", ctl)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "rollout resumed: rollout/paused removed; commit that")
	assert.NoFileExists(t, filepath.Join(ctl, "rollout", "paused"))
	code, out, errOut = cli(t, "rollout", "resume", "--control", ctl)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "the rollout is not paused (no rollout/paused): nothing written")

	code, out, errOut = cli(t, "apply", "--control", ctl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "held by the rollout: wave staging is not done")
	code, out, errOut = cli(t, "rollout", "status", "--control", ctl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, ": in progress\n")
	assert.Regexp(t, `staging\s+active\s+1\s+1\s+0\s+0\s+-`, out)
	b, err = os.ReadFile(filepath.Join(forge, "acme", "cluster-staging-eu-1.pulls.json"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `\"waves\":[\"spec.rollout.waves\"]`, "the pull request records which waves its revision takes")
}

// TestRolloutComponentWavesPlan: plan lists a component's own waves beside the fleet's, and
// a bad component wave fails validate at its file:line with nothing rendered.
func TestRolloutComponentWavesPlan(t *testing.T) {
	t.Parallel()
	ctl := copyControl(t)
	platform := filepath.Join(ctl, "platform.yaml")
	b, err := os.ReadFile(platform)
	require.NoError(t, err)
	withWaves := strings.Replace(string(b), "    - app: monitoring\n      clusterSelector: {}\n",
		"    - app: monitoring\n      clusterSelector: {}\n      rollout:\n        waves:\n          - name: us-first\n            clusterSelector: {matchLabels: {region: us}}\n", 1)
	require.NotEqual(t, string(b), withWaves)
	writeFile(t, platform, withWaves)
	code, out, errOut := cli(t, "plan", "--control", ctl)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "rollout waves: none fleet-wide (a change to anything but the components below reaches every cluster at once)\n"+
		"component monitoring has its own waves (a change to it alone takes them; with other changes, these then spec.rollout.waves, combined):\n"+
		"  1. us-first: prod-us-1\n  2. (rest): edge-1, prod-eu-1, staging-eu-1\n")

	writeFile(t, platform, strings.Replace(withWaves, "region: us}}\n", "region: us}}\n            soak: -1h\n", 1))
	out2 := filepath.Join(t.TempDir(), "out")
	code, _, errOut = cli(t, "render", "--control", ctl, "--out", out2)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `platform.yaml:27: wave "us-first": soak -1h is negative`)
	assert.NoDirExists(t, out2, "nothing rendered")
}

// TestRolloutApproveSkipRollbackLocalForge: an approval wave holds its clusters until
// rollout approve records the approval; rollout skip leaves a cluster out; rollout rollback
// holds the content everywhere and says why; each is a file in the control repo, bound to its
// content, and -o json reports what was written.
func TestRolloutApproveSkipRollbackLocalForge(t *testing.T) {
	t.Parallel()
	ctl := copyControl(t)
	platform := filepath.Join(ctl, "platform.yaml")
	b, err := os.ReadFile(platform)
	require.NoError(t, err)
	writeFile(t, platform, string(b)+"  rollout:\n    waves:\n      - name: staging\n        clusterSelector: {matchLabels: {env: staging}}\n        approval: required\n")
	forge := filepath.Join(t.TempDir(), "forge")

	code, out, errOut := cli(t, "apply", "--control", ctl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "held by the rollout: wave staging waits for approval (fleetbot rollout approve staging)")

	code, _, errOut = cli(t, "rollout", "approve", "prod", "--control", ctl)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `wave "prod" does not require approval: the waves with approval: required are staging`)

	code, out, errOut = cli(t, "rollout", "approve", "staging", "--note", "change reviewed", "--control", ctl, "-o", "json")
	require.Equal(t, 0, code, errOut)
	var res app.RecordResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, "rollout/approvals/staging.yaml", res.File)
	assert.True(t, res.Changed)
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, res.Digest)
	rec, err := os.ReadFile(filepath.Join(ctl, "rollout", "approvals", "staging.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "digest: "+res.Digest+"\nnote: change reviewed\n", string(rec))
	code, out, errOut = cli(t, "rollout", "approve", "staging", "--note", "change reviewed", "--control", ctl)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "rollout/approvals/staging.yaml is already recorded for this content: nothing written")

	code, out, errOut = cli(t, "apply", "--control", ctl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `acme/cluster-staging-eu-1\s+cluster\s+create\s+#1`, out, "approved: the wave starts")

	code, _, errOut = cli(t, "rollout", "skip", "nowhere-1", "--control", ctl)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `cluster "nowhere-1" is not in clusters/`)
	code, out, errOut = cli(t, "rollout", "skip", "prod-eu-1", "--control", ctl, "--note", "being rebuilt")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "rollout/skips/prod-eu-1.yaml written; commit that and push it")

	code, out, errOut = cli(t, "rollout", "rollback", "--control", ctl, "--note", "INC-1234")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "rollout/rollback.yaml written")
	code, out, errOut = cli(t, "rollout", "status", "--control", ctl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "halted: rolled back by hand (rollout/rollback.yaml): INC-1234: no new pull request opens for this content")
}
