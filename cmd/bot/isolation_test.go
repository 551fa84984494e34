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
)

// TestAttackDelegatedTeamNamesAnotherCluster is issue 31's attack end to end: CODEOWNERS gives
// /clusters/payments-*.yaml to payments-sre, who add clusters/payments-3.yaml whose
// metadata.name is another team's cluster. check control --strict refuses the head (exit 1,
// invalid) naming both locations; the team's own payments-3 stays allowed.
func TestAttackDelegatedTeamNamesAnotherCluster(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	dir := copyControl(t)
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	write := func(p, data string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, p), []byte(data), 0o644))
	}
	write(".github/CODEOWNERS", "* @acme/platform\n/clusters/payments-*.yaml @acme/payments-sre\n")
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	cluster := func(name string) string {
		return "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + name + "\n  labels: {env: prod}\nspec:\n  admins: [payments-sre]\n"
	}
	for branch, name := range map[string]string{"impostor": "prod-us-1", "own": "payments-3"} {
		git("checkout", "-q", "-b", branch, "main")
		write("clusters/payments-3.yaml", cluster(name))
		git("add", "-A")
		git("commit", "-q", "-m", branch)
	}
	git("checkout", "-q", "main")

	run := func(head string) (int, string, string, string) {
		code, out, errOut := cli(t, "check", "control", "--control", dir, "--base", "main", "--head", head,
			"--author", "carol", "--author-teams", "payments-sre", "--format", "json", "--strict")
		var doc struct {
			Review struct {
				Verdict string `json:"verdict"`
			} `json:"review"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		return code, doc.Review.Verdict, out, errOut
	}
	code, verdict, out, errOut := run("impostor")
	assert.Equal(t, 1, code, "%s\n%s", out, errOut)
	assert.Equal(t, "invalid", verdict)
	assert.Contains(t, out, `cluster \"prod-us-1\" is defined in clusters/payments-3.yaml (metadata.name at clusters/payments-3.yaml:4)`)
	assert.Contains(t, out, "rename the file to clusters/prod-us-1.yaml, or set metadata.name: payments-3")
	assert.False(t, strings.Contains(out, `"verdict": "allowed"`))

	code, verdict, out, errOut = run("own")
	assert.Equal(t, 0, code, "%s\n%s", out, errOut)
	assert.Equal(t, "allowed", verdict)
}

// TestCheckWorkspacePodSecurityAndAllowlist: check workspace evaluates pods at --pod-security
// (restricted unless the workspace is baseline; privileged is refused as a level) and takes the
// platform's extension of the allowlist as --allow Kind.group.
func TestCheckWorkspacePodSecurityAndAllowlist(t *testing.T) {
	t.Parallel()
	dir := workspaceCheckout(t)
	writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "resources:\n- pod.yaml\n")
	writeFile(t, filepath.Join(dir, "apps", "pod.yaml"), "apiVersion: v1\nkind: Pod\nmetadata:\n  name: root\nspec:\n  containers:\n  - name: app\n    image: app\n")
	code, out, _ := cli(t, "check", "workspace", "--dir", dir, "--workspace", "payments")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, `apps/pod.yaml:5: Pod/root: violates PodSecurity "restricted:v1.36": allowPrivilegeEscalation != false`)
	assert.Contains(t, out, "hint: set securityContext.allowPrivilegeEscalation: false in every container")
	code, out, errOut := cli(t, "check", "workspace", "--dir", dir, "--workspace", "payments", "--pod-security", "baseline")
	assert.Equal(t, 0, code, "a root container meets baseline: %s%s", out, errOut)
	code, _, errOut = cli(t, "check", "workspace", "--dir", dir, "--workspace", "payments", "--pod-security", "privileged")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `--pod-security "privileged": a workspace namespace is restricted or baseline (never privileged)`)

	writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "resources:\n- sm.yaml\n")
	writeFile(t, filepath.Join(dir, "apps", "sm.yaml"), "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: web\n")
	code, out, _ = cli(t, "check", "workspace", "--dir", dir, "--workspace", "payments")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "apps/sm.yaml:2: ServiceMonitor/web: kind ServiceMonitor.monitoring.coreos.com is not allowed in a workspace repo")
	code, out, errOut = cli(t, "check", "workspace", "--dir", dir, "--workspace", "payments", "--allow", "ServiceMonitor.monitoring.coreos.com")
	assert.Equal(t, 0, code, "%s%s", out, errOut)
}
