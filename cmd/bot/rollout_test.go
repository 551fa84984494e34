package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
