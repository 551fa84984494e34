package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sample is a plan over a fleet in every state a report shows.
func sample() *Document {
	d := New(CommandPlan, "0123456789abcdef0123", []Repo{
		{Repo: "acme/cluster-a", Kind: "cluster", Name: "a", Action: "open", Outcome: Done, Writes: true, Changed: true,
			Reason: "new PR", PR: &PR{Number: 2, URL: "https://github.com/acme/cluster-a/pull/2"},
			Files:      Files{Added: 1, Changed: 1, List: []File{{Path: "platform/metallb.yaml", Op: "added"}, {Path: "README.md", Op: "changed"}}},
			Objects:    map[string]Counts{"Deployment": {Added: 1}, "Service": {Changed: 2}},
			Access:     &Access{Changed: true, Steps: []string{"grant team payments-sre push"}, Notes: []string{"kept: team ops (additive mode)"}},
			Codeowners: []Problem{{File: ".github/CODEOWNERS", Line: 3, Kind: "Unknown owner", Message: "@acme/ghosts does not exist"}},
			Warnings:   []string{"branch protection of main is not enforced"}},
		{Repo: "acme/cluster-b", Kind: "cluster", Name: "b", Action: ActionBlocked,
			Outcome: Outcome{Class: ClassNeedsHuman, Reason: ReasonHumanCommitOnBranch},
			Reason:  "commit 1234567 on fleetbot/sync was not made by fleetbot", Blocked: "commit 1234567 on fleetbot/sync was not made by fleetbot",
			PR: &PR{Number: 4}},
		{Repo: "acme/cluster-c", Kind: "cluster", Name: "c", Action: ActionFailed, Planned: "update", Writes: true, Changed: true,
			Outcome: Outcome{Class: ClassRetryable, Reason: ReasonUnavailable},
			Error:   &Problem{File: "flux/fleetbot.yaml", Line: 12, Message: "rendered object does not decode as a Flux v1 Kustomization"}},
		{Repo: "acme/cluster-d", Kind: "cluster", Name: "d", Action: ActionDeferred, Planned: "open", Writes: true, Changed: true,
			Outcome:  Outcome{Class: ClassDeferred, Reason: ReasonBudgetExhausted, RetryAt: time.Date(2026, 5, 1, 12, 1, 0, 0, time.UTC)},
			Deferred: "acme/cluster-d: write budget exhausted (80 content writes a minute)"},
		{Repo: "acme/control", Kind: "control", Name: "control", Action: "noop", Outcome: Done, Reason: "control repo: access only"},
	})
	d.Removals, d.MaxRemovals = 0, 1
	return d
}

// TestRoundTrip: a document written as JSON and decoded is the same document.
func TestRoundTrip(t *testing.T) {
	d := sample()
	var buf bytes.Buffer
	require.NoError(t, d.WriteJSON(&buf))
	assert.Contains(t, buf.String(), `"format_version": 2,`)
	got, err := Decode(buf.Bytes())
	require.NoError(t, err)
	assert.Equal(t, d, got)
	assert.Contains(t, buf.String(), `"outcome": {
        "class": "deferred",
        "reason": "BudgetExhausted",
        "retryAt": "2026-05-01T12:01:00Z"
      }`)
}

// TestDocumentClassAndRetry: a document is as urgent as its most urgent repo, and is retried at
// the earliest known time.
func TestDocumentClassAndRetry(t *testing.T) {
	d := sample()
	assert.Equal(t, ClassNeedsHuman, d.Class())
	assert.Equal(t, time.Date(2026, 5, 1, 12, 1, 0, 0, time.UTC), d.RetryAt())
	assert.Equal(t, ClassDone, New(CommandApply, "", nil).Class())
}

// TestDecodeRefusesOtherVersions: a document of another format_version (or none) is refused
// with what to do, not misread.
func TestDecodeRefusesOtherVersions(t *testing.T) {
	for _, in := range []string{`{"format_version": 1, "command": "plan"}`, `{"format_version": 3, "command": "plan"}`, `{"command": "plan"}`} {
		_, err := Decode([]byte(in))
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), "this fleetbot reads 2", in)
	}
	_, err := Decode([]byte(`{"format_version": "2"}`))
	assert.ErrorContains(t, err, "decoding a fleetbot report")
}

func TestSummary(t *testing.T) {
	s := sample().Summary
	assert.Equal(t, Summary{Repos: 5, Actions: map[string]int{"open": 1, "blocked": 1, "failed": 1, "deferred": 1, "noop": 1},
		Changed: true, Failed: 1, Blocked: 1, Deferred: 1}, s)
	empty := New(CommandApply, "", nil)
	assert.NotNil(t, empty.Repos, "an empty run has repos: [], not null")
	var buf bytes.Buffer
	require.NoError(t, empty.WriteText(&buf))
	assert.Equal(t, "0 repos: nothing to plan\n", buf.String())
}

// TestMarkdownBlockedRepo: a repo blocked on a human reads blocked in the table, with the
// commit that blocks it, and lists no files to review.
func TestMarkdownBlockedRepo(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, sample().WriteMarkdown(&buf))
	md := buf.String()
	assert.Contains(t, md, "### fleetbot — source `0123456789ab`\n\n5 repos: 1 blocked, 1 deferred, 1 failed, 1 noop, 1 open\n\n")
	assert.Contains(t, md, "| `acme/cluster-b` | cluster | blocked | #4 | - | - | commit 1234567 on fleetbot/sync was not made by fleetbot |\n")
	assert.NotContains(t, md, "<code>acme/cluster-b</code>")
	assert.Contains(t, md, "<details><summary><code>acme/cluster-a</code>: 2 files</summary>\n\n- added `platform/metallb.yaml`\n- changed `README.md`\n\n</details>\n")
	assert.Equal(t, "acme/cluster-b: blocked PR #4: commit 1234567 on fleetbot/sync was not made by fleetbot", sample().Repos[1].Line())
}

// TestMarkdownScope: a run that planned only some repos says so under its counts.
func TestMarkdownScope(t *testing.T) {
	d := sample()
	d.Scope = "incremental: 1 of 1020 target repos changed since 0123456789ab"
	var buf bytes.Buffer
	require.NoError(t, d.WriteMarkdown(&buf))
	assert.Contains(t, buf.String(), "5 repos: 1 blocked, 1 deferred, 1 failed, 1 noop, 1 open\n\nScope: incremental: 1 of 1020 target repos changed since 0123456789ab\n\n")
}

// TestMarkdownErrorWithFileLine: a failure, a CODEOWNERS error and a control repo error keep
// their file:line in the Markdown, in bold for a failed or deferred repo.
func TestMarkdownErrorWithFileLine(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, sample().WriteMarkdown(&buf))
	md := buf.String()
	assert.Contains(t, md, "| `acme/cluster-c` | cluster | **failed** | - | - | - | flux/fleetbot.yaml:12: rendered object does not decode as a Flux v1 Kustomization |\n")
	assert.Contains(t, md, "| `acme/cluster-d` | cluster | **deferred** | - | - | - | waits for the next run: acme/cluster-d: write budget exhausted (80 content writes a minute) |\n")
	assert.Contains(t, md, "#### Access\n\n- `acme/cluster-a`\n  - would grant team payments-sre push\n  - kept: team ops (additive mode)\n  - CODEOWNERS error: .github/CODEOWNERS:3: Unknown owner: @acme/ghosts does not exist\n")
	assert.Contains(t, md, "access drift (2); 1 CODEOWNERS error(s)")

	d := New(CommandPlan, "", nil)
	d.Errors = []Problem{{File: "control/clusters/prod-eu-1.yaml", Line: 9, Message: `team "ghosts" does not exist in org acme`, Hint: "create the team | fix the name"}}
	buf.Reset()
	require.NoError(t, d.WriteMarkdown(&buf))
	assert.Equal(t, "### fleetbot\n\n> [!CAUTION]\n> The control repo does not match the org: nothing was planned or written.\n\n"+
		"- `control/clusters/prod-eu-1.yaml:9`: team \"ghosts\" does not exist in org acme (create the team \\| fix the name)\n", buf.String())
	buf.Reset()
	require.NoError(t, d.WriteText(&buf))
	assert.Equal(t, "fleetbot: the control repo does not match the org; nothing was planned or written.\n1 problem(s) in the control repo:\n"+
		"  control/clusters/prod-eu-1.yaml:9: team \"ghosts\" does not exist in org acme\n      hint: create the team | fix the name\n", buf.String())
}

// TestText: the terminal table (files and objects only where the run writes them), the access
// lines, the warnings, the scope, a refusal, and last the summary line.
func TestText(t *testing.T) {
	d := sample()
	d.Repos[0].Access.Applied = true
	d.Refused = "too many removals: 3 of 6 target repos would be removed"
	d.Scope = "every repo: platform.yaml changed"
	var buf bytes.Buffer
	require.NoError(t, d.WriteText(&buf))
	want := `REPO            KIND     ACTION    PR  FILES     OBJECTS   DETAIL
acme/cluster-a  cluster  open      #2  +1 ~1 -0  +1 ~2 -0  new PR; access drift (2); 1 CODEOWNERS error(s)
acme/cluster-b  cluster  blocked   #4  -         -         commit 1234567 on fleetbot/sync was not made by fleetbot
acme/cluster-c  cluster  failed    -   -         -         flux/fleetbot.yaml:12: rendered object does not decode as a Flux v1 Kustomization
acme/cluster-d  cluster  deferred  -   -         -         waits for the next run: acme/cluster-d: write budget exhausted (80 content writes a minute)
acme/control    control  noop      -   -         -         control repo: access only

Access:
  acme/cluster-a
    did grant team payments-sre push
    kept: team ops (additive mode)
    CODEOWNERS error: .github/CODEOWNERS:3: Unknown owner: @acme/ghosts does not exist

Warnings:
  WARNING (acme/cluster-a): branch protection of main is not enforced

Scope: every repo: platform.yaml changed
REFUSED: too many removals: 3 of 6 target repos would be removed
5 repos: 1 blocked, 1 deferred, 1 failed, 1 noop, 1 open (source 0123456789ab)
`
	assert.Equal(t, want, buf.String())
}

// fleet is a run over n quiet repos (noop; every third a cleanup of a merged PR's branch) and
// one that opens a pull request, each with the same protection warning.
func fleet(n int) *Document {
	repos := []Repo{{Repo: "acme/cluster-000", Kind: "cluster", Action: "open", Writes: true, Changed: true, Outcome: Done,
		Reason: "desired state differs from main", PR: &PR{Number: 3}, Files: Files{Changed: 1}, Warnings: []string{"protection is not enforced"}}}
	for i := 1; i <= n; i++ {
		r := Repo{Repo: fmt.Sprintf("acme/cluster-%03d", i), Kind: "cluster", Action: ActionNoop, Outcome: Done,
			Reason: "PR #1 already carries the desired tree", PR: &PR{Number: 1}, Files: Files{Added: 7},
			Warnings: []string{"protection is not enforced"}}
		if i%3 == 0 {
			r.Action, r.Reason, r.PR = ActionCleanup, "main already matches; delete branch fleetbot/sync of merged PR #1", &PR{Number: 1}
		}
		repos = append(repos, r)
	}
	return New(CommandApply, "0123456789abcdef", repos)
}

// TestTextAtScale: at a thousand repos the default table lists what changed, counts the quiet
// repos in one line, folds a warning every repo has into one line naming a few, and ends with
// the summary; --detail (View.Detail) lists every repo. A noop row never counts its open PR's
// files as this run's.
func TestTextAtScale(t *testing.T) {
	d := fleet(1000)
	var buf bytes.Buffer
	require.NoError(t, d.WriteTextView(&buf, View{}))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	assert.Equal(t, []string{
		"REPO              KIND     ACTION  PR  FILES     OBJECTS  DETAIL",
		"acme/cluster-000  cluster  open    #3  +0 ~1 -0  -        desired state differs from main",
		"not listed: 1000 repos with nothing to do (333 cleanup, 667 noop); --detail lists every repo",
		"",
		"Warnings:",
		"  WARNING (1001 repos: acme/cluster-000, acme/cluster-001, acme/cluster-002 and 998 more): protection is not enforced",
		"",
		"1001 repos: 333 cleanup, 667 noop, 1 open (source 0123456789ab)",
	}, lines)

	buf.Reset()
	require.NoError(t, d.WriteTextView(&buf, View{Detail: true}))
	out := buf.String()
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			rows[f[0]] = strings.Join(f, " ")
		}
	}
	assert.Equal(t, "acme/cluster-001 cluster noop #1 - - PR #1 already carries the desired tree", rows["acme/cluster-001"])
	assert.Equal(t, "acme/cluster-003 cluster cleanup #1 - - main already matches; delete branch fleetbot/sync of merged PR #1", rows["acme/cluster-003"])
	assert.Equal(t, 1, strings.Count(out, "protection is not enforced"), "the warning is folded")
	assert.True(t, strings.HasSuffix(out, "\n1001 repos: 333 cleanup, 667 noop, 1 open (source 0123456789ab)\n"), "ends with the summary")
	assert.Equal(t, "acme/cluster-001: noop PR #1\n  WARNING: protection is not enforced", d.Repos[1].Line(), "a noop's line counts no files")

	buf.Reset()
	require.NoError(t, d.WriteMarkdownView(&buf, View{}))
	md := buf.String()
	assert.Contains(t, md, "| `acme/cluster-000` | cluster | open | #3 | +0 ~1 -0 | - | desired state differs from main |\n\nnot listed: 1000 repos with nothing to do (333 cleanup, 667 noop); --detail lists every repo.\n")
	assert.NotContains(t, md, "acme/cluster-001`")
	assert.Contains(t, md, "#### Warnings\n\n- protection is not enforced (1001 repos: acme/cluster-000, acme/cluster-001, acme/cluster-002 and 998 more)\n")
}

// TestQuietRepos: a repo is left out of the compact table only when it has nothing to say.
func TestQuietRepos(t *testing.T) {
	for _, c := range []struct {
		r     Repo
		quiet bool
	}{
		{Repo{Action: ActionNoop}, true},
		{Repo{Action: ActionCleanup}, true},
		{Repo{Action: ActionNoop, Changed: true, Access: &Access{Changed: true}}, false},
		{Repo{Action: ActionNoop, Codeowners: []Problem{{Message: "unknown owner"}}}, false},
		{Repo{Action: ActionFailed, Error: &Problem{Message: "502"}}, false},
		{Repo{Action: ActionBlocked}, false},
		{Repo{Action: "open", Writes: true, Changed: true}, false},
	} {
		assert.Equal(t, c.quiet, c.r.Quiet(), "%+v", c.r)
	}
}

// TestFold: a text found at many places is one entry naming the first three and counting the
// rest, in the order first seen.
func TestFold(t *testing.T) {
	f := Fold([]string{"a", "b", "a", "a", "a"}, []string{"r1", "r2", "r3", "r4", "r5"}, "repos")
	require.Len(t, f, 2)
	assert.Equal(t, "4 repos: r1, r3, r4 and 1 more", f[0].Where())
	assert.Equal(t, "r2", f[1].Where())
	ps := FoldProblems([]Problem{
		{File: "clusters/a.yaml", Line: 4, Message: "in hub mode", Hint: "bootstrap Flux"},
		{File: "clusters/b.yaml", Line: 4, Message: "in hub mode", Hint: "bootstrap Flux"},
		{File: "platform.yaml", Line: 9, Message: "selector matches none"},
	})
	require.Len(t, ps, 2)
	assert.Equal(t, "2 places: clusters/a.yaml:4, clusters/b.yaml:4: in hub mode\n    hint: bootstrap Flux", ps[0].String())
	assert.Equal(t, "platform.yaml:9: selector matches none", ps[1].String())
}

// TestRolloutText: the rollout verdict as a table, ending with its summary line.
func TestRolloutText(t *testing.T) {
	r := &Rollout{Revision: "0123456", State: RolloutInProgress, Waves: []RolloutWave{
		{Name: "canary", State: "done", Total: 1, Changed: 1, Merged: 1, Healthy: 1},
		{Name: "eu", State: "active", Total: 2, Changed: 2},
		{Name: "(rest)", State: "waiting", Total: 3, Changed: 3},
	}, Held: []HeldCluster{{Cluster: "us-1", Reason: "wave (rest) waits for wave eu"}}}
	var buf bytes.Buffer
	require.NoError(t, r.WriteText(&buf))
	assert.Equal(t, `rollout of 0123456: in progress
  WAVE    STATE    CLUSTERS  CHANGED  MERGED  HEALTHY  SOAK UNTIL
  canary  done     1         1        1       1        -
  eu      active   2         2        0       0        -
  (rest)  waiting  3         3        0       0        -
held:
  us-1: wave (rest) waits for wave eu
rollout in progress: 3 waves: 1 done, 1 active, 1 waiting; 1 cluster held
`, buf.String())
}

// TestDesiredText: the offline plan is one row per repo, the CRDs clusters must have folded by
// component, and with Detail every file.
func TestDesiredText(t *testing.T) {
	d := New(CommandPlan, "", nil)
	for _, n := range []string{"a", "b"} {
		d.Desired = append(d.Desired, DesiredRepo{Repo: "acme/cluster-" + n, Kind: "cluster", Name: n,
			Files: []string{"README.md", "platform/metallb/metallb.yaml"}, Scaffolds: []string{"apps/kustomization.yaml"},
			Objects: map[string]int{"IPAddressPool": 1, "Namespace": 1}, Teams: map[string]string{"platform": "admin"},
			Reviewers: []string{"platform"}, Needs: map[string][]string{"metallb": {"IPAddressPool.metallb.io"}}})
	}
	var buf bytes.Buffer
	require.NoError(t, d.WriteDesiredText(&buf, View{}))
	assert.Equal(t, `REPO            KIND     FILES  SCAFFOLDS  OBJECTS  ACCESS          NEEDS
acme/cluster-a  cluster  2      1          2        platform=admin  metallb
acme/cluster-b  cluster  2      1          2        platform=admin  metallb

Needs (CRDs the cluster must already have):
  metallb: IPAddressPool.metallb.io from the cluster (neither it nor a component it depends on renders the CRD; until the cluster has it, Kustomization platform-metallb fails, and what depends on it waits) [2 repos: acme/cluster-a, acme/cluster-b]
`, buf.String())
	assert.Equal(t, "2 target repos (2 cluster): 4 managed files, 2 scaffolds, 4 objects; desired state of working tree (not a git checkout), offline: --forge diffs against the target repos, --detail lists every file",
		d.DesiredSummaryLine(View{}))
	buf.Reset()
	require.NoError(t, d.WriteDesiredText(&buf, View{Detail: true}))
	assert.Contains(t, buf.String(), "acme/cluster-b  (cluster b)\n  files:    2 managed, 1 scaffold\n            README.md\n            platform/metallb/metallb.yaml\n")
}

// TestLine: progress lines say the same word and counts as the table.
func TestLine(t *testing.T) {
	d := sample()
	want := []string{
		"acme/cluster-a: open PR #2 (+1 ~1 -0 files), access converged, 1 CODEOWNERS error(s)\n  WARNING: branch protection of main is not enforced",
		"acme/cluster-b: blocked PR #4: commit 1234567 on fleetbot/sync was not made by fleetbot",
		"acme/cluster-c: failed: flux/fleetbot.yaml:12: rendered object does not decode as a Flux v1 Kustomization",
		"acme/cluster-d: deferred (open waits for the next run): acme/cluster-d: write budget exhausted (80 content writes a minute)",
		"acme/control: noop",
	}
	for i, r := range d.Repos {
		assert.Equal(t, want[i], r.Line())
		assert.True(t, strings.HasPrefix(r.Line(), r.Repo+": "+r.Action))
	}
}

func TestProblemString(t *testing.T) {
	assert.Equal(t, "apps/rbac.yaml:2: ClusterRole/god: is cluster-scoped", Problem{File: "apps/rbac.yaml", Line: 2, Object: "ClusterRole/god", Message: "is cluster-scoped"}.String())
	assert.Equal(t, "platform.yaml: no owner", Problem{File: "platform.yaml", Message: "no owner"}.String())
	assert.Equal(t, "502 from GitHub", Problem{Message: "502 from GitHub"}.String())
}

// TestShortSHAKeepsDirty: the short form of a render of uncommitted edits still says so.
func TestShortSHAKeepsDirty(t *testing.T) {
	t.Parallel()
	sha := "0123456789abcdef0123456789abcdef01234567"
	assert.Equal(t, "0123456", ShortSHA(sha))
	assert.Equal(t, "0123456-dirty", ShortSHA(sha+"-dirty"))
	assert.Equal(t, "0123456789ab-dirty", ShortSHA12(sha+"-dirty"))
	assert.Equal(t, "abc", ShortSHA("abc"))
	assert.Equal(t, "", ShortSHA(""))
}
