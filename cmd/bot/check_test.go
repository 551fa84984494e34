package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// controlClone makes a git clone of the example control repo with the base
// on main and one branch per change: name -> (file, old, new).
func controlClone(t *testing.T, changes map[string][3]string) string {
	t.Helper()
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
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	for branch, c := range changes {
		git("checkout", "-q", "-b", branch, "main")
		replaceIn(t, filepath.Join(dir, c[0]), c[1], c[2])
		git("commit", "-q", "-am", branch)
	}
	git("checkout", "-q", "main")
	return dir
}

func TestCheckControlPersonas(t *testing.T) {
	t.Parallel()
	dir := controlClone(t, map[string][3]string{
		"flux-interval": {"platform.yaml", "interval: 10m", "interval: 5m"},
		"cluster-edit":  {"clusters/prod-eu-1.yaml", "monitoring_retention: 30d", "monitoring_retention: 90d"},
		"ws-apps":       {"workspaces/payments.yaml", `podinfo_replicas: "2"`, `podinfo_replicas: "4"`},
		"ws-admins":     {"workspaces/payments.yaml", "admins: [payments-devs]", "admins: [payments-devs, intruders]"},
		"invalid":       {"clusters/prod-eu-1.yaml", "admins: [payments-sre]", "admins: [Payments SRE]"},
	})
	for _, tc := range []struct {
		name, head, teams string
		strict            bool
		code              int
		verdict           string
	}{
		{"platform admin edits platform.yaml", "flux-interval", "platform", true, 0, "allowed"},
		{"workspace admin edits a cluster", "cluster-edit", "payments-devs", false, 0, "needs platform admin review"},
		{"workspace admin edits a cluster, strict", "cluster-edit", "payments-devs", true, 3, "needs platform admin review"},
		{"cluster admin edits its own cluster", "cluster-edit", "payments-sre", true, 3, "needs platform admin review"},
		{"workspace admin edits its apps", "ws-apps", "payments-devs", true, 0, "allowed"},
		{"another workspace's admin edits them", "ws-apps", "search-devs", true, 3, "needs platform admin review"},
		{"workspace admin adds a team to its admins", "ws-admins", "payments-devs", true, 3, "needs platform admin review"},
		{"invalid head", "invalid", "platform", false, 1, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"check", "control", "--control", dir, "--base", "main", "--head", tc.head,
				"--author", "someone", "--author-teams", tc.teams, "--format", "json"}
			if tc.strict {
				args = append(args, "--strict")
			}
			code, out, errOut := cli(t, args...)
			assert.Equal(t, tc.code, code, "%s\n%s", out, errOut)
			var doc struct {
				Review struct {
					Verdict string `json:"verdict"`
				} `json:"review"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
			assert.Equal(t, tc.verdict, doc.Review.Verdict)
		})
	}

	code, out, _ := cli(t, "check", "control", "--control", dir, "--base", "main", "--head", "ws-apps", "--author", "bob", "--author-teams", "payments-devs")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "verdict: ALLOWED")
	assert.Contains(t, out, "acme/workspace-payments (workspace payments): modified")
	code, out, _ = cli(t, "check", "control", "--control", dir, "--base", "main", "--head", "cluster-edit", "--author", "bob", "--format", "markdown")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "needs platform admin review")
	assert.Contains(t, out, "(teams unknown)")

	code, _, errOut := cli(t, "check", "control", "--control", dir, "--base", "main", "--head", "no-such-branch")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `resolving "no-such-branch"`)
	code, _, errOut = cli(t, "check", "control", "--control", t.TempDir(), "--base", "main", "--head", "main")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is not a git clone")
}

// workspaceCheckout applies the example control repo to a local forge and
// returns the files of workspace-payments' bot branch, as a checkout.
func workspaceCheckout(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	forge := filepath.Join(t.TempDir(), "forge")
	code, _, errOut := cli(t, "apply", "--control", exampleControl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	dir := filepath.Join(t.TempDir(), "ws")
	out, err := exec.Command("git", "clone", "-q", "-b", "fleetbot/sync", filepath.Join(forge, "acme", "workspace-payments.git"), dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return dir
}

func TestCheckWorkspace(t *testing.T) {
	t.Parallel()
	dir := workspaceCheckout(t)
	code, out, errOut := cli(t, "check", "workspace", "--dir", dir, "--workspace", "payments")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Contains(t, out, "2 kustomization(s) render cleanly: clusters/prod-eu-1, clusters/prod-us-1")

	writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "resources:\n- rbac.yaml\n- cm.yaml\n")
	writeFile(t, filepath.Join(dir, "apps", "rbac.yaml"), "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: god\n")
	writeFile(t, filepath.Join(dir, "apps", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sneaky\n  namespace: kube-system\n")
	code, out, _ = cli(t, "check", "workspace", "--dir", dir, "--workspace", "payments")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "apps/rbac.yaml:2: ClusterRole/god: is cluster-scoped")
	assert.Contains(t, out, `apps/cm.yaml:2: ConfigMap/sneaky: is in namespace "kube-system"`)
	assert.Contains(t, out, "4 problem(s)")

	writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "resources:\n- github.com/evil/x//base?ref=v1\n")
	code, out, _ = cli(t, "check", "workspace", "--dir", dir, "--workspace", "payments", "--format", "json")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, `is remote`)

	code, _, errOut = cli(t, "check", "workspace", "--dir", t.TempDir(), "--workspace", "payments")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "is it a workspace repo?")
	code, _, errOut = cli(t, "check", "workspace", "--dir", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--workspace NAME")
}

// TestAttackTenantKustomizationRunsAsClusterAdmin: a workspace repo
// adding a Flux Kustomization without the workspace's ServiceAccount is
// refused at the file and line of its spec.
func TestAttackTenantKustomizationRunsAsClusterAdmin(t *testing.T) {
	t.Parallel()
	dir := workspaceCheckout(t)
	writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "resources:\n- flux.yaml\n")
	writeFile(t, filepath.Join(dir, "apps", "flux.yaml"), "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: escape\nspec:\n  interval: 1m\n  prune: true\n  path: ./\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n    namespace: flux-system\n")
	code, out, _ := cli(t, "check", "workspace", "--dir", dir, "--workspace", "payments")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "apps/flux.yaml:5: Kustomization/escape: has no spec.serviceAccountName")
	assert.Contains(t, out, "hint: set spec.serviceAccountName: payments")
	assert.Contains(t, out, `apps/flux.yaml:12: Kustomization/escape: spec.sourceRef names namespace "flux-system"`)
}

func TestCheckCluster(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "resources:\n- crd.yaml\n")
	writeFile(t, filepath.Join(dir, "apps", "crd.yaml"), "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: ok-on-a-cluster\n")
	code, out, _ := cli(t, "check", "cluster", "--dir", dir)
	assert.Equal(t, 0, code, out)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "apps", "kustomization.yaml"), []byte("resources:\n- https://example.com/x.yaml\n"), 0o644))
	code, out, _ = cli(t, "check", "cluster", "--dir", dir)
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "apps/kustomization.yaml:2: resources entry \"https://example.com/x.yaml\" is remote")
}

func TestPlanMissingTeamAndAccessDrift(t *testing.T) {
	t.Parallel()
	forgeDir := filepath.Join(t.TempDir(), "forge")
	forge := "local:" + forgeDir
	code, _, errOut := cli(t, "apply", "--control", exampleControl, "--forge", forge)
	require.Equal(t, 0, code, errOut)

	writeFile(t, filepath.Join(forgeDir, "acme", ".org.json"), `{"teams": ["platform", "payments-devs", "search-sre", "search-devs"]}`)
	code, out, errOut := cli(t, "plan", "--control", exampleControl, "--forge", forge)
	assert.Equal(t, 1, code)
	assert.Empty(t, out, "text output leaves the issues to the error, once")
	assert.Contains(t, errOut, `clusters/prod-eu-1.yaml:8: team "payments-sre" does not exist in org acme`)
	require.NoError(t, os.Remove(filepath.Join(forgeDir, "acme", ".org.json")))

	settings := filepath.Join(forgeDir, "acme", "cluster-edge-1.settings.json")
	replaceIn(t, settings, `"platform": "admin"`, `"platform": "admin", "intruders": "admin"`)
	code, out, _ = cli(t, "plan", "--control", exampleControl, "--forge", forge, "--detailed-exitcode")
	assert.Equal(t, 2, code)
	assert.Contains(t, out, "would revoke team intruders (admin, not in the persona matrix)")
	code, out, _ = cli(t, "apply", "--control", exampleControl, "--forge", forge)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "did revoke team intruders")
	code, _, _ = cli(t, "plan", "--control", exampleControl, "--forge", forge, "--detailed-exitcode")
	assert.Equal(t, 0, code)
}

// TestCheckControlTeamsFromGitHub: without --author-teams, --forge github
// looks the author's teams up on GitHub (here the fake).
func TestCheckControlTeamsFromGitHub(t *testing.T) {
	dir := controlClone(t, map[string][3]string{
		"ws-apps": {"workspaces/payments.yaml", `podinfo_replicas: "2"`, `podinfo_replicas: "4"`},
	})
	srv := githubtest.NewServer(t)
	srv.CreateTeam("acme", "platform", "alice")
	srv.CreateTeam("acme", "payments-devs", "bob")
	t.Setenv("GITHUB_API_URL", srv.APIURL())
	t.Setenv("GITHUB_TOKEN", githubtest.DefaultToken)
	t.Setenv("FLEETBOT_APP_ID", "")
	for author, want := range map[string]string{"bob": "allowed", "alice": "allowed", "mallory": "needs platform admin review"} {
		code, out, errOut := cli(t, "check", "control", "--control", dir, "--forge", "github", "--base", "main", "--head", "ws-apps",
			"--author", author, "--format", "json")
		require.Equal(t, 0, code, errOut)
		var doc struct {
			Review struct {
				Verdict string `json:"verdict"`
			} `json:"review"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &doc))
		assert.Equal(t, want, doc.Review.Verdict, author)
	}
}

// TestCheckControlInAMonorepo: the control repo is a directory of a larger repository
// (platform/fleet/ beside other code); check control reviews that directory's change.
func TestCheckControlInAMonorepo(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	root := t.TempDir()
	fleet := filepath.Join(root, "platform", "fleet")
	require.NoError(t, os.CopyFS(fleet, os.DirFS(exampleControl)))
	writeFile(t, filepath.Join(root, "services", "api", "main.go"), "package main\n")
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	git("checkout", "-q", "-b", "change")
	replaceIn(t, filepath.Join(fleet, "workspaces", "payments.yaml"), `podinfo_replicas: "2"`, `podinfo_replicas: "4"`)
	writeFile(t, filepath.Join(root, "services", "api", "main.go"), "package main // changed\n")
	git("commit", "-q", "-am", "change")

	code, out, errOut := cli(t, "check", "control", "--control", fleet, "--base", "main", "--head", "change",
		"--author", "someone", "--author-teams", "payments-devs", "--format", "json")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	var doc struct {
		Review struct {
			Verdict string `json:"verdict"`
			Targets []struct {
				Repo string `json:"repo"`
			} `json:"targets"`
		} `json:"review"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	rep := doc.Review
	assert.Equal(t, "allowed", rep.Verdict, "the workspace admin changed its own apps; the service code is not the control repo's")
	require.Len(t, rep.Targets, 1)
	assert.Equal(t, "acme/workspace-payments", rep.Targets[0].Repo)

	// Another directory of the same repository is no control repo: a clear failure.
	code, _, errOut = cli(t, "check", "control", "--control", filepath.Join(root, "services"), "--base", "main", "--head", "change",
		"--author-teams", "platform")
	assert.Equal(t, 1, code, "services/ is no control repo: %s", errOut)
}

// TestAttackOversizeFileInTargetRepo: check cluster and check workspace run in CI on the
// admins' pull requests; a 16 GiB (sparse) file in the repo is refused by name before it is
// read, and nothing is checked.
func TestAttackOversizeFileInTargetRepo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "resources: [huge.yaml]\n")
	writeFile(t, filepath.Join(dir, "clusters", "a", "kustomization.yaml"), "resources: [../../apps]\n")
	f, err := os.Create(filepath.Join(dir, "apps", "huge.yaml"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(16<<30))
	require.NoError(t, f.Close())
	for _, args := range [][]string{{"check", "cluster", "--dir", dir}, {"check", "workspace", "--dir", dir, "--workspace", "payments"}} {
		code, out, errOut := cli(t, args...)
		assert.Equal(t, 1, code, out)
		assert.Contains(t, errOut, "apps/huge.yaml: 17179869184 bytes, more than the 4194304 a file may have; nothing was checked")
	}
}
