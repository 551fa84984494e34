package report

import (
	"bytes"
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
			Warnings:   []string{"branch protection of main in acme/cluster-a is not enforced"}},
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
	assert.Contains(t, buf.String(), `"format_version": 1,`)
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
	for _, in := range []string{`{"format_version": 2, "command": "plan"}`, `{"command": "plan"}`} {
		_, err := Decode([]byte(in))
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), "this fleetbot reads 1", in)
	}
	_, err := Decode([]byte(`{"format_version": "1"}`))
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
	assert.Contains(t, md, "| `acme/cluster-b` | cluster | blocked | #4 | +0 ~0 -0 | - | commit 1234567 on fleetbot/sync was not made by fleetbot |\n")
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
	assert.Contains(t, md, "| `acme/cluster-c` | cluster | **failed** | - | +0 ~0 -0 | - | flux/fleetbot.yaml:12: rendered object does not decode as a Flux v1 Kustomization |\n")
	assert.Contains(t, md, "| `acme/cluster-d` | cluster | **deferred** | - | +0 ~0 -0 | - | waits for the next run: acme/cluster-d: write budget exhausted (80 content writes a minute) |\n")
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

// TestText: the terminal table, its summary, the access lines and a refusal.
func TestText(t *testing.T) {
	d := sample()
	d.Repos[0].Access.Applied = true
	d.Refused = "too many removals: 3 of 6 target repos would be removed"
	d.Scope = "every repo: platform.yaml changed"
	var buf bytes.Buffer
	require.NoError(t, d.WriteText(&buf))
	want := `REPO            KIND     ACTION    PR  FILES     OBJECTS   DETAIL
acme/cluster-a  cluster  open      #2  +1 ~1 -0  +1 ~2 -0  new PR; access drift (2); 1 CODEOWNERS error(s)
acme/cluster-b  cluster  blocked   #4  +0 ~0 -0  -         commit 1234567 on fleetbot/sync was not made by fleetbot
acme/cluster-c  cluster  failed    -   +0 ~0 -0  -         flux/fleetbot.yaml:12: rendered object does not decode as a Flux v1 Kustomization
acme/cluster-d  cluster  deferred  -   +0 ~0 -0  -         waits for the next run: acme/cluster-d: write budget exhausted (80 content writes a minute)
acme/control    control  noop      -   +0 ~0 -0  -         control repo: access only

5 repos: 1 blocked, 1 deferred, 1 failed, 1 noop, 1 open (source 0123456789ab)
Scope: every repo: platform.yaml changed

Access:
  acme/cluster-a
    did grant team payments-sre push
    kept: team ops (additive mode)
    CODEOWNERS error: .github/CODEOWNERS:3: Unknown owner: @acme/ghosts does not exist
REFUSED: too many removals: 3 of 6 target repos would be removed
`
	assert.Equal(t, want, buf.String())
}

// TestLine: progress lines say the same word and counts as the table.
func TestLine(t *testing.T) {
	d := sample()
	want := []string{
		"acme/cluster-a: open PR #2 (+1 ~1 -0 files), access converged, 1 CODEOWNERS error(s)\n  WARNING: branch protection of main in acme/cluster-a is not enforced",
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
