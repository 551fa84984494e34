package main

import (
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/report"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden reports in testdata/report/ from what the commands print")

// reportGoldenDir holds the golden -o json documents of TestReportJSONGolden.
const reportGoldenDir = "testdata/report"

// reportSchema is the committed JSON Schema of the report (internal/report's schema test writes
// it).
var reportSchema = filepath.Join("..", "..", "schema", "report.json")

// smallFleet is the example control repo cut to three target repos (clusters edge-1 and
// prod-eu-1, workspace payments), committed in a git clone.
func smallFleet(t *testing.T) (dir, rev string) {
	t.Helper()
	dir = controlClone(t, nil)
	gitIn(t, dir, "rm", "-q", "clusters/prod-us-1.yaml", "clusters/staging-eu-1.yaml", "workspaces/search.yaml")
	gitIn(t, dir, "commit", "-q", "-m", "a small fleet")
	return dir, gitIn(t, dir, "rev-parse", "HEAD")
}

// volatile are the parts of a report that change from run to run: times and ages.
var volatile = []struct {
	re  *regexp.Regexp
	new string
}{
	{regexp.MustCompile(`"(generatedAt|checkedAt|opened)": "[^"]*"`), `"$1": "TIME"`},
	{regexp.MustCompile(`\n *"ageSeconds": [0-9]+,`), ``},
	{regexp.MustCompile(`PR #([0-9]+) open [^ ,"]+`), `PR #$1 open AGE`},
	{regexp.MustCompile(`"(go|os|arch)": "[^"]*"`), `"$1": "X"`},
	{regexp.MustCompile(`"revision": "[0-9a-f]{40}(-dirty)?"`), `"revision": "X"`},
}

// normalize replaces the commits of the run (named by revs) and the volatile parts.
func normalize(out string, revs map[string]string) string {
	for rev, name := range revs {
		out = strings.ReplaceAll(out, rev, name)
		out = strings.ReplaceAll(out, rev[:12], name)
		out = strings.ReplaceAll(out, rev[:7], name)
	}
	for _, v := range volatile {
		out = v.re.ReplaceAllString(out, v.new)
	}
	return out
}

// TestReportJSONGolden: plan, apply, status, check (control, workspace, cluster), version,
// validate and rollout status print one JSON shape (internal/report's Document) on a small fleet, each
// document equal to its golden file, valid against schema/report.json, decoded by
// report.Decode and written again unchanged; exit codes stay those of the README.
func TestReportJSONGolden(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	ctl, rev := smallFleet(t)
	gitIn(t, ctl, "checkout", "-q", "-b", "more-replicas")
	replaceIn(t, filepath.Join(ctl, "workspaces", "payments.yaml"), `podinfo_replicas: "2"`, `podinfo_replicas: "4"`)
	gitIn(t, ctl, "commit", "-q", "-am", "more replicas")
	head := gitIn(t, ctl, "rev-parse", "HEAD")
	gitIn(t, ctl, "checkout", "-q", "main")
	revs := map[string]string{rev: "SOURCE", head: "HEAD"}
	path := filepath.Join(t.TempDir(), "forge")
	forge := "local:" + path

	type step struct {
		name string
		args []string
		code int
	}
	run := func(s step) {
		t.Helper()
		code, out, errOut := cli(t, s.args...)
		require.Equal(t, s.code, code, "%s: %s%s", s.name, out, errOut)
		checkReport(t, s.name, out, normalize(out, revs))
	}

	run(step{"plan", []string{"plan", "--control", ctl, "--forge", forge, "-o", "json", "--detailed-exitcode"}, 2})
	run(step{"plan-offline", []string{"plan", "--control", ctl, "-o", "json"}, 0})
	run(step{"apply", []string{"apply", "--control", ctl, "--forge", forge, "--format", "json"}, 0})

	// A platform admin merges prod-eu-1's PR (a fast-forward of main); a human pushes to
	// edge-1's bot branch, which blocks it.
	git := filepath.Join(path, "acme")
	gitIn(t, t.TempDir(), "--git-dir", filepath.Join(git, "cluster-prod-eu-1.git"), "update-ref", "refs/heads/main", "refs/heads/fleetbot/sync")
	clone := filepath.Join(t.TempDir(), "edge")
	gitIn(t, t.TempDir(), "clone", "-q", "-b", "fleetbot/sync", filepath.Join(git, "cluster-edge-1.git"), clone)
	writeFile(t, filepath.Join(clone, "apps", "mine.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine}\n")
	gitIn(t, clone, "add", "-A")
	gitIn(t, clone, "-c", "user.name=Human", "-c", "user.email=human@example.com", "commit", "-q", "-m", "hand edit")
	gitIn(t, clone, "push", "-q", "origin", "fleetbot/sync")
	human := gitIn(t, clone, "rev-parse", "HEAD")
	revs[human] = "HUMAN"

	run(step{"plan-blocked", []string{"plan", "--control", ctl, "--forge", forge, "-o", "json", "--detailed-exitcode"}, 3})
	run(step{"status", []string{"status", "--control", ctl, "--forge", forge, "-o", "json"}, exitBlocked})
	run(step{"check-control", []string{"check", "control", "--control", ctl, "--base", "main", "--head", "more-replicas", "--author", "alice", "--author-teams", "payments-devs", "-o", "json"}, 0})

	ws := filepath.Join(t.TempDir(), "ws")
	writeFile(t, filepath.Join(ws, "clusters", "prod-eu-1", "kustomization.yaml"), "resources:\n- rbac.yaml\n")
	writeFile(t, filepath.Join(ws, "clusters", "prod-eu-1", "rbac.yaml"), "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: god\n")
	run(step{"check-workspace", []string{"check", "workspace", "--dir", ws, "--workspace", "payments", "-o", "json"}, 1})
	run(step{"version", []string{"version", "-o", "json"}, 0})
	run(step{"validate", []string{"validate", "--control", ctl, "-o", "json"}, 0})

	// Waves: prod-eu-1 first, then the rest; rollout status reports the gate's verdict.
	platform := filepath.Join(ctl, "platform.yaml")
	b, err := os.ReadFile(platform)
	require.NoError(t, err)
	writeFile(t, platform, string(b)+"  rollout:\n    waves:\n      - name: eu\n        clusterSelector: {matchLabels: {region: eu}}\n")
	gitIn(t, ctl, "commit", "-q", "-am", "waves")
	revs[gitIn(t, ctl, "rev-parse", "HEAD")] = "WAVES"
	run(step{"rollout-status", []string{"rollout", "status", "--control", ctl, "--forge", forge, "-o", "json"}, 0})
}

// checkReport compares one command's JSON (raw, and normalized: its commits and times
// replaced) with its golden file (rewritten with -update) and checks what every report must be.
func checkReport(t *testing.T, name, raw, out string) {
	t.Helper()
	golden := filepath.Join(reportGoldenDir, name+".json")
	if *updateGolden {
		require.NoError(t, os.MkdirAll(reportGoldenDir, 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "%s: no golden file (go test ./cmd/bot -run TestReportJSONGolden -update writes it)", name)
	assert.Equal(t, string(want), out, "%s: -o json differs from %s (-update rewrites it)", name, golden)

	var top map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &top), name)
	assert.EqualValues(t, report.FormatVersion, top["format_version"], "%s: format_version", name)
	assert.NotEmpty(t, top["command"], name)

	d, err := report.Decode([]byte(raw))
	require.NoError(t, err, name)
	var again strings.Builder
	require.NoError(t, d.WriteJSON(&again), name)
	assert.JSONEq(t, raw, again.String(), "%s: decoding and writing the document again changes it", name)

	c := sjs.NewCompiler()
	schema, err := c.Compile(reportSchema)
	require.NoError(t, err)
	inst, err := sjs.UnmarshalJSON(strings.NewReader(raw))
	require.NoError(t, err)
	assert.NoError(t, schema.Validate(inst), "%s: the document does not match %s", name, reportSchema)
}
