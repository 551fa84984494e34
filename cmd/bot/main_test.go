package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/report"
)

// exampleControl is the example control repo every CLI test starts from.
var exampleControl = filepath.Join("..", "..", "testdata", "control")

// goldenDir holds the expected render of exampleControl, one folder per repo.
var goldenDir = filepath.Join("..", "..", "testdata", "golden")

// cli runs fleetbot with args and returns its exit status and output.
func cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// copyControl copies the example control repo into a temp dir tests may edit.
func copyControl(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "control")
	require.NoError(t, os.CopyFS(dst, os.DirFS(exampleControl)))
	return dst
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, _ := cli(t, "version")
	assert.Equal(t, 0, code)
	assert.Equal(t, "fleetbot "+version+"\n", out)

	// --version is cobra's flag on the root command and prints the same line.
	code, flagOut, errOut := cli(t, "--version")
	assert.Equal(t, 0, code, errOut)
	assert.Equal(t, out, flagOut, "fleetbot --version prints what fleetbot version prints")
}

func TestValidateExample(t *testing.T) {
	t.Parallel()
	code, out, errOut := cli(t, "validate", "--control", exampleControl)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "is valid: 4 cluster repo(s), 2 workspace repo(s), 4 app(s)")
}

// TestValidateJSON: validate -o json is the report (command validate): what a valid repo
// renders and its warnings; for an invalid one every problem with file:line and hint, and exit 1.
func TestValidateJSON(t *testing.T) {
	t.Parallel()
	ctl := copyControl(t)
	// A component whose selector matches no cluster: a warning.
	writeFile(t, filepath.Join(ctl, "catalog", "extra", "app.yaml"), "apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata:\n  name: extra\nspec:\n  scope: cluster\n")
	writeFile(t, filepath.Join(ctl, "catalog", "extra", "kustomization.yaml"), "resources: [cm.yaml]\n")
	writeFile(t, filepath.Join(ctl, "catalog", "extra", "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra, namespace: kube-system}\n")
	replaceIn(t, filepath.Join(ctl, "platform.yaml"), "  components:\n", "  components:\n    - app: extra\n      clusterSelector: {matchLabels: {env: nowhere}}\n")
	code, out, errOut := cli(t, "validate", "--control", ctl, "-o", "json")
	require.Equal(t, 0, code, errOut)
	d, err := report.Decode([]byte(out))
	require.NoError(t, err, out)
	assert.Equal(t, report.CommandValidate, d.Command)
	assert.Equal(t, &report.Validated{Clusters: 4, Workspaces: 2, Apps: 5}, d.Validated)
	require.NotEmpty(t, d.Warnings)
	assert.Contains(t, d.Warnings[0].Message, "clusterSelector matches none")
	assert.Equal(t, "platform.yaml", d.Warnings[0].File)
	assert.Positive(t, d.Warnings[0].Line)
	assert.Empty(t, errOut, "the warnings are in the report, not on stderr")

	code, out, _ = cli(t, "validate", "--control", ctl, "-o", "json", "--strict")
	assert.Equal(t, 1, code, "--strict: warnings are errors")
	d, err = report.Decode([]byte(out))
	require.NoError(t, err, out)
	assert.NotEmpty(t, d.Errors)
	assert.Nil(t, d.Validated)

	replaceIn(t, filepath.Join(ctl, "clusters", "prod-eu-1.yaml"), "metallb_range:", "metallb_rnage:")
	code, out, _ = cli(t, "validate", "--control", ctl, "-o", "json")
	assert.Equal(t, 1, code)
	d, err = report.Decode([]byte(out))
	require.NoError(t, err, out)
	require.NotEmpty(t, d.Errors)
	assert.Equal(t, "clusters/prod-eu-1.yaml", d.Errors[0].File)
	assert.Positive(t, d.Errors[0].Line)
	assert.NotEmpty(t, d.Errors[0].Hint)
	assert.Nil(t, d.Validated, "nothing validated")
}

func TestRenderProducesGoldenTrees(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, errOut := cli(t, "render", "--control", exampleControl, "--out", out)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, stdout, "rendered 6 repo(s)")

	got := readFiles(t, out)
	want := readFiles(t, goldenDir)
	delete(want, "targets.json")
	delete(got, renderMarker)
	require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), "rendered file set differs from testdata/golden (refresh with go test ./internal/fanout -update)")
	for p, w := range want {
		assert.Equal(t, w, got[p], "rendered %s differs from golden", p)
	}

	// A second render replaces its own earlier output.
	code, _, errOut = cli(t, "render", "--control", exampleControl, "--out", out)
	require.Equal(t, 0, code, errOut)
}

func TestRenderRefusesForeignNonEmptyDir(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	writeFile(t, filepath.Join(out, "keep.txt"), "mine")
	code, _, errOut := cli(t, "render", "--control", exampleControl, "--out", out)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "not written by fleetbot render")
	assert.FileExists(t, filepath.Join(out, "keep.txt"))
}

func TestRenderNeedsOut(t *testing.T) {
	t.Parallel()
	code, _, errOut := cli(t, "render", "--control", exampleControl)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--out is required")
}

// TestBadInputWritesNothing covers every bad input of the foundation issue
// through the CLI: a non-zero exit, a message naming the file (and line) or
// the object, and no output directory at all.
func TestBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		edit  func(t *testing.T, dir string)
		wants []string
	}{
		{"unknown field", func(t *testing.T, dir string) {
			appendTo(t, filepath.Join(dir, "clusters", "edge-1.yaml"), "  workspce: payments\n")
		}, []string{"clusters/edge-1.yaml:", "workspce"}},
		{"yaml syntax error", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "clusters", "broken.yaml"), "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: [oops\n")
		}, []string{"clusters/broken.yaml:"}},
		{"missing platform.yaml", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "platform.yaml")))
		}, []string{"platform.yaml"}},
		{"two platforms", func(t *testing.T, dir string) {
			b, err := os.ReadFile(filepath.Join(dir, "platform.yaml"))
			require.NoError(t, err)
			writeFile(t, filepath.Join(dir, "clusters", "platform2.yaml"), string(b))
		}, []string{"clusters/platform2.yaml:", "Platform"}},
		{"duplicate names", func(t *testing.T, dir string) {
			b, err := os.ReadFile(filepath.Join(dir, "clusters", "edge-1.yaml"))
			require.NoError(t, err)
			writeFile(t, filepath.Join(dir, "clusters", "edge-1-copy.yaml"), string(b))
		}, []string{"clusters/edge-1-copy.yaml:", "edge-1"}},
		{"invalid name", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "clusters", "edge-1.yaml"), "name: edge-1", "name: Edge_1")
		}, []string{"clusters/edge-1.yaml:", "Edge_1"}},
		{"unknown workspace", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "clusters", "prod-eu-1.yaml"), "workspace: payments", "workspace: paymnts")
		}, []string{"clusters/prod-eu-1.yaml:", "paymnts"}},
		{"unknown app", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "workspaces", "payments.yaml"), "app: redis", "app: rediss")
		}, []string{"workspaces/payments.yaml:", "rediss"}},
		{"cluster-scoped app in a workspace", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "workspaces", "payments.yaml"), "app: redis", "app: monitoring")
		}, []string{"workspaces/payments.yaml:", "monitoring"}},
		{"remote kustomize resource", func(t *testing.T, dir string) {
			appendTo(t, filepath.Join(dir, "catalog", "redis", "kustomization.yaml"), "  - https://github.com/evil/repo//deploy?ref=main\n")
		}, []string{"catalog/redis/kustomization.yaml", "remote"}},
		{"escaping kustomize resource", func(t *testing.T, dir string) {
			appendTo(t, filepath.Join(dir, "catalog", "redis", "kustomization.yaml"), "  - ../podinfo/service.yaml\n")
		}, []string{"catalog/redis/kustomization.yaml", ".."}},
		{"symlink leaving the control repo", func(t *testing.T, dir string) {
			outside := filepath.Join(t.TempDir(), "secret.yaml")
			writeFile(t, outside, "apiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n")
			require.NoError(t, os.Symlink(outside, filepath.Join(dir, "catalog", "redis", "stolen.yaml")))
		}, []string{"catalog/redis/stolen.yaml", "symlink"}},
		{"undeclared value", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "catalog", "redis", "service.yaml"), "name: redis", "name: redis-${redis_sufix}")
		}, []string{"catalog/redis/service.yaml", "redis_sufix"}},
		{"missing required value", func(t *testing.T, dir string) {
			replaceIn(t, filepath.Join(dir, "clusters", "prod-eu-1.yaml"), "metallb_range: 10.10.0.0/24", "monitoring_retention_days: 3")
		}, []string{"clusters/prod-eu-1.yaml", "metallb_range", "metallb"}},
		{"kustomize build failure", func(t *testing.T, dir string) {
			appendTo(t, filepath.Join(dir, "catalog", "redis", "kustomization.yaml"), "  - missing.yaml\n")
		}, []string{"redis", "missing.yaml"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyControl(t)
			tc.edit(t, dir)
			out := filepath.Join(t.TempDir(), "out")
			code, _, errOut := cli(t, "render", "--control", dir, "--out", out)
			assert.Equal(t, 1, code, "render must fail on %s", tc.name)
			for _, w := range tc.wants {
				assert.Contains(t, errOut, w, "error for %s must mention %q", tc.name, w)
			}
			assert.NoDirExists(t, out, "render must write nothing on %s", tc.name)

			code, _, _ = cli(t, "validate", "--control", dir)
			assert.Equal(t, 1, code, "validate must fail on %s", tc.name)
		})
	}
}

// TestBadInputListsEveryProblem: several problems at once are all reported.
func TestBadInputListsEveryProblem(t *testing.T) {
	t.Parallel()
	dir := copyControl(t)
	appendTo(t, filepath.Join(dir, "clusters", "edge-1.yaml"), "  colour: blue\n")
	replaceIn(t, filepath.Join(dir, "clusters", "prod-eu-1.yaml"), "workspace: payments", "workspace: nope")
	replaceIn(t, filepath.Join(dir, "workspaces", "search.yaml"), "app: podinfo", "app: podinfoo")
	code, _, errOut := cli(t, "validate", "--control", dir)
	require.Equal(t, 1, code)
	for _, w := range []string{"clusters/edge-1.yaml:", "colour", "clusters/prod-eu-1.yaml:", "nope", "workspaces/search.yaml:", "podinfoo"} {
		assert.Contains(t, errOut, w)
	}
}

func TestUnreadableControlRepo(t *testing.T) {
	t.Parallel()
	code, _, errOut := cli(t, "validate", "--control", filepath.Join(t.TempDir(), "missing"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "unreadable")
	assert.Contains(t, errOut, "hint")
}

// TestPlanOffline: the offline plan is one row per repo, what the clusters must provide folded
// by component, and the summary line last; --detail lists every file; -o json and markdown.
func TestPlanOffline(t *testing.T) {
	t.Parallel()
	code, out, errOut := cli(t, "plan", "--control", exampleControl)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^acme/cluster-prod-eu-1 +cluster +9 +2 +23 +payments-devs=pull, payments-sre=push, platform=admin +metallb$`, out)
	assert.Contains(t, out, "\nNeeds (CRDs the cluster must already have):\n  metallb: IPAddressPool.metallb.io, L2Advertisement.metallb.io from the cluster (neither it nor a component it depends on renders the CRD; until the cluster has it, Kustomization platform-metallb fails, and what depends on it waits) [3 repos: acme/cluster-edge-1, acme/cluster-prod-eu-1, acme/cluster-prod-us-1]\n")
	assert.NotContains(t, out, "platform/metallb/metallb.yaml", "files only with --detail")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Regexp(t, `^6 target repos \(4 cluster, 2 workspace\): \d+ managed files, 13 scaffolds, \d+ objects; desired state of .*--detail lists every file$`, lines[len(lines)-1], "the summary ends it")

	code, out, errOut = cli(t, "plan", "--control", exampleControl, "--detail")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "acme/cluster-prod-eu-1  (cluster prod-eu-1)")
	assert.Contains(t, out, "platform/metallb/metallb.yaml")
	assert.Contains(t, out, "payments-sre=push")
	assert.Contains(t, out, "needs:    metallb: IPAddressPool.metallb.io, L2Advertisement.metallb.io from the cluster (neither it nor a component it depends on renders the CRD; until the cluster has it, Kustomization platform-metallb fails")

	code, out, errOut = cli(t, "plan", "--control", exampleControl, "--format", "json")
	require.Equal(t, 0, code, errOut)
	var p struct {
		FormatVersion int                  `json:"format_version"`
		Repos         []report.DesiredRepo `json:"desired"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	assert.Equal(t, report.FormatVersion, p.FormatVersion)
	require.Len(t, p.Repos, 6)
	assert.Equal(t, "acme/cluster-edge-1", p.Repos[0].Repo)
	// Which kinds each component needs the cluster to have (metallb's pool
	// and advertisement CRDs); monitoring needs nothing, nor do workspaces.
	for _, r := range p.Repos {
		switch r.Repo {
		case "acme/cluster-edge-1", "acme/cluster-prod-eu-1", "acme/cluster-prod-us-1":
			assert.Equal(t, map[string][]string{"metallb": {"IPAddressPool.metallb.io", "L2Advertisement.metallb.io"}}, r.Needs, r.Repo)
		default:
			assert.Empty(t, r.Needs, r.Repo)
		}
	}

	code, out, errOut = cli(t, "plan", "--control", exampleControl, "--format", "markdown")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "| `acme/workspace-payments` | workspace |")

	code, _, errOut = cli(t, "plan", "--control", exampleControl, "--format", "yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "want one of text, markdown, json")
}

// TestApplyThenPlanAgainstLocalForge runs the main job on the embedded
// default and checks plan's --detailed-exitcode on both sides of it.
func TestApplyThenPlanAgainstLocalForge(t *testing.T) {
	t.Parallel()
	forge := "local:" + filepath.Join(t.TempDir(), "forge")

	code, out, errOut := cli(t, "plan", "--control", exampleControl, "--forge", forge, "--detailed-exitcode")
	require.Equal(t, 2, code, "changes are pending before the first apply: %s", errOut)
	assert.Contains(t, out, "create")

	code, out, errOut = cli(t, "apply", "--control", exampleControl, "--forge", forge)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^acme/cluster-prod-eu-1 +cluster +create +#1 +\+11 ~0 -0 +\+23 ~0 -0 +new repo$`, out)
	assert.Equal(t, 1, strings.Count(out, "acme/cluster-prod-eu-1"), "one table, no progress lines before it")
	assert.Regexp(t, `\n6 repos: 6 create \(source [0-9a-f]+(-dirty)?\)\n$`, out, "the summary ends it")
	assert.Empty(t, errOut, "stderr is no terminal: no progress")

	code, out, errOut = cli(t, "plan", "--control", exampleControl, "--forge", forge, "--detailed-exitcode")
	require.Equal(t, 0, code, "nothing is pending after apply: %s\n%s", out, errOut)

	code, out, errOut = cli(t, "apply", "--control", exampleControl, "--forge", forge, "--format", "json")
	require.Equal(t, 0, code, errOut)
	var report struct {
		Results []struct {
			Repo   string `json:"repo"`
			Action string `json:"action"`
		} `json:"repos"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &report))
	require.Len(t, report.Results, 6)
	for _, r := range report.Results {
		assert.Equal(t, "noop", r.Action, "second apply must not change %s", r.Repo)
	}
}

func TestUnknownForge(t *testing.T) {
	t.Parallel()
	code, _, errOut := cli(t, "apply", "--control", exampleControl, "--forge", "gitlab")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `want "local:PATH" or "github"`)
}

func appendTo(t *testing.T, path, text string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	writeFile(t, path, string(b)+text)
}

func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Contains(t, string(b), old, "fixture %s changed; update the test", path)
	writeFile(t, path, strings.Replace(string(b), old, new, 1))
}

// TestInvalidFlagValuesAreRefused: a typo in a flag's value is an error naming the allowed
// values, before anything runs, whether given on the command line or in FLEETBOT_*.
func TestInvalidFlagValuesAreRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"validate", "--log-level", "verbose"}, `invalid argument "verbose" for "--log-level" flag: want one of debug, info, warn, error`},
		{[]string{"apply", "--concurrency", "0"}, `invalid argument "0" for "--concurrency" flag: want at least 1`},
		{[]string{"apply", "--concurrency", "-3"}, `want at least 1`},
		{[]string{"apply", "--concurrency", "many"}, `want a whole number`},
		{[]string{"plan", "--format", "yaml"}, `invalid argument "yaml" for "-o, --format" flag: want one of text, markdown, json`},
		{[]string{"version", "-o", "markdown"}, `invalid argument "markdown" for "-o, --format" flag: want one of text, json`},
		{[]string{"check", "workspace", "--format", "html"}, `want one of text, markdown, json`},
		{[]string{"apply", "--content-per-minute", "0"}, `want at least 1`},
		{[]string{"apply", "--content-transport", "ftp"}, `invalid argument "ftp" for "--content-transport" flag: want one of api, git`},
		{[]string{"serve", "--workers", "0"}, `want at least 1`},
		{[]string{"apply", "--max-wait", "-1s"}, `invalid argument "-1s" for "--max-wait" flag: want more than 0s`},
		{[]string{"apply", "--max-wait", "soon"}, `want a duration such as 90s, 10m or 1h`},
		{[]string{"serve", "--resync-interval", "0"}, `invalid argument "0" for "--resync-interval" flag: want more than 0s`},
		{[]string{"serve", "--shutdown-grace", "-1s"}, `want more than 0s`},
		{[]string{"serve", "--max-body", "0"}, `invalid argument "0" for "--max-body" flag: want at least 1`},
		{[]string{"serve", "--drift-delay", "-1s"}, `invalid argument "-1s" for "--drift-delay" flag: want 0s or more`},
		{[]string{"serve", "--drift-delay", "later"}, `want a duration such as 100ms or 1s (0: none)`},
	} {
		code, _, stderr := cli(t, c.args...)
		assert.Equal(t, 1, code, "%v", c.args)
		assert.Contains(t, stderr, c.want, "%v", c.args)
	}
	t.Setenv("FLEETBOT_CONCURRENCY", "0")
	code, _, stderr := cli(t, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `FLEETBOT_CONCURRENCY="0": invalid argument "0" for "--concurrency" flag: want at least 1`)
}

// TestHelpListsEveryCommand: nothing a user can run is hidden from --help.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	code, stdout, _ := cli(t, "--help")
	require.Equal(t, 0, code)
	for _, c := range []string{"validate", "render", "plan", "apply", "check", "serve", "action", "dev", "status", "version"} {
		assert.Regexp(t, `(?m)^\s+`+c+`\s`, stdout, c)
	}
}

// TestDetailedExitCodes: plan and apply say with their exit status what a pipeline needs to
// know: 0 nothing to do, 1 error, 2 changes pending, 3 a repo waits for a human. Offline,
// plan cannot know and says so.
func TestDetailedExitCodes(t *testing.T) {
	t.Parallel()
	forgeDir := filepath.Join(t.TempDir(), "forge")
	forge := "local:" + forgeDir
	code, _, errOut := cli(t, "plan", "--control", exampleControl, "--detailed-exitcode")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--detailed-exitcode needs --forge")

	code, _, errOut = cli(t, "plan", "--control", exampleControl, "--forge", forge, "--detailed-exitcode")
	assert.Equal(t, 2, code, errOut)
	code, _, errOut = cli(t, "apply", "--control", exampleControl, "--forge", forge, "--detailed-exitcode")
	assert.Equal(t, 0, code, errOut)

	// A human pushes to one repo's bot branch: that repo is blocked until a human acts.
	work := t.TempDir()
	gitRun := func(args ...string) {
		t.Helper()
		c := exec.Command("git", args...)
		c.Dir = work
		c.Env = append(os.Environ(), "GIT_AUTHOR_NAME=Alice", "GIT_AUTHOR_EMAIL=alice@example.com",
			"GIT_COMMITTER_NAME=Alice", "GIT_COMMITTER_EMAIL=alice@example.com")
		out, err := c.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	gitRun("clone", "-q", "--branch", "fleetbot/sync", filepath.Join(forgeDir, "acme", "cluster-edge-1.git"), ".")
	writeFile(t, filepath.Join(work, "apps", "mine.yaml"), "# a human's edit\n")
	gitRun("add", "-A")
	gitRun("commit", "-q", "-m", "my own change")
	gitRun("push", "-q", "origin", "fleetbot/sync")

	code, out, errOut := cli(t, "plan", "--control", exampleControl, "--forge", forge, "--detailed-exitcode")
	assert.Equal(t, 3, code, "%s\n%s", out, errOut)
	assert.Regexp(t, `acme/cluster-edge-1 +cluster +blocked +#1 .*not made by fleetbot`, out)
	code, _, errOut = cli(t, "apply", "--control", exampleControl, "--forge", forge, "--detailed-exitcode")
	assert.Equal(t, 3, code, errOut)
	code, _, errOut = cli(t, "apply", "--control", exampleControl, "--forge", forge)
	assert.Equal(t, 0, code, "without the flag a blocked repo is not an error: %s", errOut)
}

// TestDirtyControlRepoIsMarked: uncommitted edits under the control repo are rendered as
// "<sha>-dirty", never under the commit's SHA as if committed; edits elsewhere in the same
// repository do not count.
func TestDirtyControlRepoIsMarked(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	root := t.TempDir()
	ctl := filepath.Join(root, "fleet")
	require.NoError(t, os.CopyFS(ctl, os.DirFS(exampleControl)))
	writeFile(t, filepath.Join(root, "notes.md"), "x\n")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=T", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("add", "-A")
	git("commit", "-q", "-m", "base")
	sha := git("rev-parse", "HEAD")
	source := func() string {
		t.Helper()
		code, out, errOut := cli(t, "plan", "--control", ctl, "--format", "json")
		require.Equal(t, 0, code, errOut)
		var p struct {
			Source string `json:"source"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &p))
		return p.Source
	}
	assert.Equal(t, sha, source(), "clean")
	writeFile(t, filepath.Join(root, "notes.md"), "y\n")
	assert.Equal(t, sha, source(), "an edit outside the control repo")
	replaceIn(t, filepath.Join(ctl, "clusters", "edge-1.yaml"), "192.168.50.0/28", "192.168.60.0/28")
	assert.Equal(t, sha+"-dirty", source(), "an uncommitted edit")
	forge := filepath.Join(t.TempDir(), "forge")
	code, out, errOut := cli(t, "apply", "--control", ctl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "(source "+sha[:12]+"-dirty)", "the apply's summary does not claim the commit either")
	msg, err := exec.Command("git", "--git-dir", filepath.Join(forge, "acme", "cluster-edge-1.git"), "log", "-1", "--format=%B", "fleetbot/sync").Output()
	require.NoError(t, err)
	assert.Contains(t, string(msg), "fleetbot: sync from "+sha[:7]+"-dirty\n", "commit subject")
	assert.Contains(t, string(msg), "Fleetbot-Source: "+sha+"-dirty\n", "commit trailer")
	pulls, err := os.ReadFile(filepath.Join(forge, "acme", "cluster-edge-1.pulls.json"))
	require.NoError(t, err)
	assert.Contains(t, string(pulls), sha+"-dirty", "PR body")
	git("checkout", "-q", "--", ".")
	writeFile(t, filepath.Join(ctl, "clusters", "edge-2.yaml"), "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: edge-2}\n")
	assert.Equal(t, sha+"-dirty", source(), "an untracked file")
}

// TestRenderInterruptedLeavesOutUnchanged: a render stopped by SIGINT/SIGTERM (the context)
// writes nothing that looks complete: an earlier render in --out stays as it was, and no
// scratch directory is left beside it.
func TestRenderInterruptedLeavesOutUnchanged(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	code, _, errOut := cli(t, "render", "--control", exampleControl, "--out", out)
	require.Equal(t, 0, code, errOut)
	before, err := os.ReadDir(out)
	require.NoError(t, err)
	writeFile(t, filepath.Join(out, "cluster-edge-1", "README.md"), "the earlier render\n")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stdout, stderr bytes.Buffer
	code = run(ctx, []string{"render", "--control", exampleControl, "--out", out}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "render interrupted")
	assert.Contains(t, stderr.String(), "is unchanged")
	after, err := os.ReadDir(out)
	require.NoError(t, err)
	assert.Equal(t, len(before), len(after))
	b, err := os.ReadFile(filepath.Join(out, "cluster-edge-1", "README.md"))
	require.NoError(t, err)
	assert.Equal(t, "the earlier render\n", string(b))
	left, err := os.ReadDir(parent)
	require.NoError(t, err)
	assert.Len(t, left, 1, "no scratch directory left beside --out")

	// Not interrupted, the new render replaces the old one whole.
	code, _, errOut = cli(t, "render", "--control", exampleControl, "--out", out)
	require.Equal(t, 0, code, errOut)
	b, err = os.ReadFile(filepath.Join(out, "cluster-edge-1", "README.md"))
	require.NoError(t, err)
	assert.NotEqual(t, "the earlier render\n", string(b))
	left, err = os.ReadDir(parent)
	require.NoError(t, err)
	assert.Len(t, left, 1)
}

// TestAttackSelectorMatchingNoClusterIsSilent: a component selector with a typo matches no cluster and
// would quietly remove the component from every cluster: validate and plan warn with
// file:line, and --strict refuses.
func TestAttackSelectorMatchingNoClusterIsSilent(t *testing.T) {
	t.Parallel()
	ctl := copyControl(t)
	replaceIn(t, filepath.Join(ctl, "platform.yaml"), "      clusterSelector: {}", "      clusterSelector: {matchLabels: {env: prd}}")
	replaceIn(t, filepath.Join(ctl, "clusters", "prod-eu-1.yaml"), "monitoring_retention: 30d", "")
	code, out, errOut := cli(t, "validate", "--control", ctl)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "is valid")
	assert.Contains(t, errOut, "warning: platform.yaml:22: component monitoring: clusterSelector matches none of the 4 clusters")
	assert.Contains(t, errOut, "hint: check the labels against clusters/*.yaml")

	code, _, errOut = cli(t, "validate", "--control", ctl, "--strict")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "--strict: 1 problem(s)")
	assert.Contains(t, errOut, "platform.yaml:22")
	code, _, errOut = cli(t, "plan", "--control", ctl, "--strict")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "clusterSelector matches none")
}

// mergeLocal merges every open fleetbot PR of a local forge by hand (main fast-forwarded to
// the bot branch) and lets apply record it.
func mergeLocal(t *testing.T, forgeDir, ctl string) {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(forgeDir, "acme", "*.git"))
	require.NoError(t, err)
	for _, d := range dirs {
		out, err := exec.Command("git", "--git-dir", d, "update-ref", "refs/heads/main", "refs/heads/fleetbot/sync").CombinedOutput()
		if err != nil && !strings.Contains(string(out), "not a valid SHA1") && !strings.Contains(string(out), "fleetbot/sync") {
			require.NoError(t, err, "%s", out)
		}
	}
	code, _, errOut := cli(t, "apply", "--control", ctl, "--forge", "local:"+forgeDir)
	require.Equal(t, 0, code, errOut)
}

// TestAttackSelectorTypoRemovesComponentEverywhere: a typo in a component's clusterSelector
// would remove it from every cluster; the removal guard counts those removals and refuses
// without --allow-removals.
func TestAttackSelectorTypoRemovesComponentEverywhere(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	ctl := copyControl(t)
	forgeDir := filepath.Join(t.TempDir(), "forge")
	code, _, errOut := cli(t, "apply", "--control", ctl, "--forge", "local:"+forgeDir)
	require.Equal(t, 0, code, errOut)
	mergeLocal(t, forgeDir, ctl)

	replaceIn(t, filepath.Join(ctl, "platform.yaml"), "      clusterSelector: {}", "      clusterSelector: {matchLabels: {env: prd}}")
	replaceIn(t, filepath.Join(ctl, "clusters", "prod-eu-1.yaml"), "monitoring_retention: 30d", "")
	code, _, errOut = cli(t, "apply", "--control", ctl, "--forge", "local:"+forgeDir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "4 of 4 cluster repos would lose a platform component")
	assert.Contains(t, errOut, "re-run with --allow-removals")
	code, _, errOut = cli(t, "apply", "--control", ctl, "--forge", "local:"+forgeDir, "--allow-removals")
	assert.Equal(t, 0, code, errOut)
}

// TestAttackEmptyClustersOnOneClusterFleet: emptying clusters/ of a one-cluster fleet would
// remove its only cluster (maxRemovals is at least 1); it needs --allow-removals.
func TestAttackEmptyClustersOnOneClusterFleet(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	ctl := copyControl(t)
	for _, c := range []string{"prod-eu-1", "prod-us-1", "staging-eu-1"} {
		require.NoError(t, os.Remove(filepath.Join(ctl, "clusters", c+".yaml")))
	}
	forgeDir := filepath.Join(t.TempDir(), "forge")
	code, _, errOut := cli(t, "apply", "--control", ctl, "--forge", "local:"+forgeDir)
	require.Equal(t, 0, code, errOut)
	mergeLocal(t, forgeDir, ctl)

	require.NoError(t, os.Remove(filepath.Join(ctl, "clusters", "edge-1.yaml")))
	code, _, errOut = cli(t, "apply", "--control", ctl, "--forge", "local:"+forgeDir)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "every cluster repo (1) would be removed")
	code, _, errOut = cli(t, "apply", "--control", ctl, "--forge", "local:"+forgeDir, "--allow-removals")
	assert.Equal(t, 0, code, errOut)
}

// TestLogDurationsForPeopleAndMachines: a duration in a log line reads "43ms" in text and
// 0.043 (seconds) in JSON — serve's logs are JSON and used to carry nanoseconds.
func TestLogDurationsForPeopleAndMachines(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		json bool
		want string
	}{
		{false, `took=43ms latency=1m30s`},
		{true, `"took":0.043,"latency":90`},
	} {
		var stderr bytes.Buffer
		a := &frontend{stderr: &stderr, logLevel: "info", logJSON: c.json}
		log, err := a.logger()
		require.NoError(t, err)
		log.Info("job done", "took", 43*time.Millisecond, "latency", 90*time.Second, "repos", 6)
		assert.Contains(t, stderr.String(), c.want, "json=%v: %s", c.json, stderr.String())
		assert.NotContains(t, stderr.String(), "43000000", "never nanoseconds")
	}
}
