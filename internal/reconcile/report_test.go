package reconcile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
)

// TestOneVocabularyInEveryOutput: a repo's outcome reads the same word in the progress line,
// the text table, the Markdown table, the summary counts and the JSON action, and the counts
// add up to the rows (issue 19: "no change" in text and "noop" in JSON disagreed).
func TestOneVocabularyInEveryOutput(t *testing.T) {
	t.Parallel()
	results := []Result{
		{Repo: "acme/cluster-a", Kind: "cluster", Action: pr.ActionNoop, Reason: "PR #1 already carries the desired tree", PR: 1, FilesAdded: 2},
		{Repo: "acme/cluster-b", Kind: "cluster", Action: pr.ActionOpen, PR: 2, FilesAdded: 1},
		{Repo: "acme/cluster-c", Kind: "cluster", Action: pr.ActionUpdate, PR: 3, FilesChanged: 1},
		{Repo: "acme/cluster-d", Kind: "cluster", Action: pr.ActionBlocked, Reason: "commit 1234567 on fleetbot/sync was not made by fleetbot", PR: 4},
		{Repo: "acme/cluster-e", Kind: "cluster", Action: pr.ActionCreate},
		{Repo: "acme/cluster-f", Kind: "cluster", Action: pr.ActionClose, PR: 6},
		{Repo: "acme/cluster-g", Kind: "cluster", Action: pr.ActionRemove},
		{Repo: "acme/cluster-h", Kind: "cluster", Action: pr.ActionOpen, Err: fmt.Errorf("acme/cluster-h: %w", pr.ErrDeferred)},
		{Repo: "acme/cluster-i", Kind: "cluster", Action: pr.ActionUpdate, Err: errors.New("acme/cluster-i: 502 from GitHub")},
		{Repo: "acme/cluster-j", Kind: "cluster", Skipped: "archived"},
	}
	want := []string{"noop", "open", "update", "blocked", "create", "close", "remove", "deferred", "failed", "skipped"}
	rep := &Report{Source: "0123456789abcdef", Results: results}

	var text, md, js bytes.Buffer
	require.NoError(t, rep.WriteText(&text))
	require.NoError(t, rep.WriteMarkdown(&md))
	require.NoError(t, json.NewEncoder(&js).Encode(rep))
	var doc struct {
		FormatVersion int `json:"format_version"`
		Repos         []struct {
			Repo, Action, Planned, Deferred, Skipped string
			Error                                    *struct{ Message string }
		}
	}
	require.NoError(t, json.Unmarshal(js.Bytes(), &doc))
	assert.Equal(t, report.FormatVersion, doc.FormatVersion)

	for i, res := range results {
		w := want[i]
		assert.Equal(t, w, res.Word(), res.Repo)
		assert.True(t, strings.HasPrefix(res.Line(), res.Repo+": "+w), "progress line of %s: %q", res.Repo, res.Line())
		assert.Regexp(t, `(?m)^`+res.Repo+`\s+cluster\s+`+w+`\s`, text.String(), "text table row of %s", res.Repo)
		assert.Regexp(t, "(?m)^\\| `"+res.Repo+"` \\| cluster \\| (\\*\\*)?"+w+"(\\*\\*)? \\|", md.String(), "markdown row of %s", res.Repo)
		// JSON says the same word in "action", why in its own field, and the action that did
		// not happen in "planned".
		j := doc.Repos[i]
		assert.Equal(t, w, j.Action, "JSON action of %s", res.Repo)
		switch w {
		case "deferred":
			assert.Contains(t, j.Deferred, "deferred", res.Repo)
			assert.Equal(t, "open", j.Planned, res.Repo)
		case "failed":
			require.NotNil(t, j.Error, res.Repo)
			assert.Contains(t, j.Error.Message, "502 from GitHub", res.Repo)
			assert.Equal(t, "update", j.Planned, res.Repo)
		case "skipped":
			assert.Equal(t, "archived", j.Skipped)
		}
		assert.Equal(t, w, outcomeWordsForMetrics(res), res.Repo)
	}
	summary := "10 repos: 1 blocked, 1 close, 1 create, 1 deferred, 1 failed, 1 noop, 1 open, 1 remove, 1 skipped, 1 update (source 0123456789ab)"
	assert.Contains(t, text.String(), summary)
	assert.Contains(t, md.String(), strings.TrimSuffix(strings.SplitN(summary, " (", 2)[0], "")+"\n")
	for _, old := range []string{"no change", "DEFERRED (", "FAILED"} {
		assert.NotContains(t, text.String(), old)
		assert.NotContains(t, md.String(), old)
		for _, res := range results {
			assert.NotContains(t, res.Line(), old)
		}
	}
}

// outcomeWordsForMetrics is what serve counts in fleetbot_reconcile_outcomes_total: the Word.
func outcomeWordsForMetrics(r Result) string { return r.Word() }

// TestLineMerged: a pull request merged at once in this run reads as merged, not as open.
func TestLineMerged(t *testing.T) {
	t.Parallel()
	r := Result{Repo: "acme/cluster-a", Action: pr.ActionOpen, PR: 2, Merged: true, FilesChanged: 1}
	if got, want := r.Line(), "acme/cluster-a: open PR #2 (merged) (+0 ~1 -0 files)"; got != want {
		t.Errorf("Line() = %q, want %q", got, want)
	}
}

// TestReportJSONIsTheDocument: a Report marshals as the report's Document wherever it is
// embedded (the Action's plan-json holds one under "report"), with its format_version, its
// command, and the control repo errors with their file:line.
func TestReportJSONIsTheDocument(t *testing.T) {
	t.Parallel()
	rep := &Report{Command: report.CommandApply, Source: "abc", Results: []Result{{Repo: "acme/cluster-a", Kind: "cluster", Action: pr.ActionNoop}},
		Refused: errors.New("too many removals"),
		Issues:  control.Issues{{Pos: control.Position{File: "clusters/a.yaml", Line: 3}, Message: "unknown team", Hint: "create it"}}}
	b, err := json.Marshal(struct {
		Valid  bool    `json:"valid"`
		Report *Report `json:"report"`
	}{true, rep})
	require.NoError(t, err)
	var out struct {
		Report json.RawMessage `json:"report"`
	}
	require.NoError(t, json.Unmarshal(b, &out))
	d, err := report.Decode(out.Report)
	require.NoError(t, err)
	assert.Equal(t, rep.Document(), d)
	assert.Equal(t, "apply", d.Command)
	assert.Equal(t, "too many removals", d.Refused)
	assert.Equal(t, []report.Problem{{File: "clusters/a.yaml", Line: 3, Message: "unknown team", Hint: "create it"}}, d.Errors)
	assert.Equal(t, []report.Repo{{Repo: "acme/cluster-a", Kind: "cluster", Action: "noop", Outcome: report.Done, Files: report.Files{}}}, d.Repos)

	// A decoder of the old Report type (the Action's own tests read plan-json back) meets
	// no field it cannot hold.
	var back struct {
		Report *Report `json:"report"`
	}
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, "abc", back.Report.Source)
}
