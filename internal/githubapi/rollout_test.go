package githubapi

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// TestRolloutCheckRunProgress: the rollout check run is created once per commit and updated in
// place while in progress; an unchanged verdict writes nothing; a restarted service finds the
// run by name instead of adding one; a completed run is never reopened: a changed verdict gets
// a new run, which GitHub shows in its place.
func TestRolloutCheckRunProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "control", map[string]string{"platform.yaml": "kind: Platform\n"})
	sha := srv.Branch("acme", "control", "main")
	checks, err := NewGitHubChecks(srv.ClientWithToken(srv.InstallationToken("acme")), "acme/control", "")
	require.NoError(t, err)
	runs := func() []*gh.CheckRun {
		name := checkrun.RolloutCheckName
		res, _, err := srv.Client().Checks.ListCheckRunsForRef(ctx, "acme", "control", sha, &gh.ListCheckRunsOptions{CheckName: &name})
		require.NoError(t, err)
		return res.CheckRuns
	}
	writes := func() int {
		n := 0
		for _, r := range srv.Requests() {
			if r.Class != githubtest.Read {
				n++
			}
		}
		return n
	}

	wave1 := checkrun.Result{Title: "wave 1 of 3 (canary): 0 of 1 clusters done", Summary: "| 1 | canary | **active** | 0 / 1 |"}
	require.NoError(t, checks.Progress(ctx, sha, wave1))
	got := runs()
	require.Len(t, got, 1)
	assert.Equal(t, checkrun.RolloutCheckName, got[0].GetName())
	assert.Equal(t, "in_progress", got[0].GetStatus())
	assert.Equal(t, wave1.Title, got[0].GetOutput().GetTitle())
	assert.Equal(t, wave1.Summary, got[0].GetOutput().GetSummary())

	srv.ResetLog()
	require.NoError(t, checks.Progress(ctx, sha, wave1))
	assert.Empty(t, srv.Requests(), "an unchanged verdict (every resync) asks nothing of GitHub")

	// A restarted service: one lookup by name, then the same run updated.
	restarted, err := NewGitHubChecks(srv.ClientWithToken(srv.InstallationToken("acme")), "acme/control", "")
	require.NoError(t, err)
	wave2 := checkrun.Result{Title: "wave 2 of 3 (eu): 0 of 1 clusters done", Summary: "| 2 | eu | **active** | 0 / 1 |"}
	require.NoError(t, restarted.Progress(ctx, sha, wave2))
	assert.Equal(t, 1, writes(), "one update")
	got = runs()
	require.Len(t, got, 1, "the run was found again, not duplicated")
	assert.Equal(t, wave2.Title, got[0].GetOutput().GetTitle())

	halted := checkrun.Result{Conclusion: checkrun.ConclusionFailure, Title: "rollout halted on prod-eu-1: Flux reported a failure for the merge of #3",
		Summary: "**Halted on prod-eu-1** (wave eu)"}
	require.NoError(t, restarted.Progress(ctx, sha, halted))
	got = runs()
	require.Len(t, got, 1)
	assert.Equal(t, "completed", got[0].GetStatus())
	assert.Equal(t, "failure", got[0].GetConclusion())
	assert.Equal(t, halted.Title, got[0].GetOutput().GetTitle())

	// Flux reported healthy after all: the rollout goes on, on a new run.
	require.NoError(t, restarted.Progress(ctx, sha, wave2))
	got = runs()
	require.Len(t, got, 2)
	newest := got[0]
	if got[1].GetID() > newest.GetID() {
		newest = got[1]
	}
	assert.Equal(t, "in_progress", newest.GetStatus())
	assert.Equal(t, wave2.Title, newest.GetOutput().GetTitle())

	// A commit that does not exist is an error naming it; nothing is remembered for it.
	bad := "0123456789abcdef0123456789abcdef01234567"
	err = restarted.Progress(ctx, bad, wave1)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "acme/control@"+bad)
}

// TestCheckOutputFitsGitHubsByteLimit: a plan summary under 65,535 characters but over 65,535
// bytes (fleetbot's Markdown is full of → ✅ — …) was sent whole, and GitHub refuses it with
// 422 "summary exceeds a maximum bytesize of 65535"; the fake refuses it as GitHub does, and
// fleetbot now cuts it by bytes. So are 60 annotations (50 a request) and an annotation's
// 64 KB message.
func TestCheckOutputFitsGitHubsByteLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := githubtest.NewServer(t)
	srv.CreateOrg("acme")
	srv.CreateRepo("acme", "control", map[string]string{"platform.yaml": "kind: Platform\n"})
	sha := srv.Branch("acme", "control", "main")
	checks, err := NewGitHubChecks(srv.ClientWithToken(srv.InstallationToken("acme")), "acme/control", "")
	require.NoError(t, err)
	var b strings.Builder
	for utf8.RuneCountInString(b.String()) < checkrun.MaxCheckText-2000 {
		b.WriteString("- ✅ `cluster-a` → apply — 3 files …\n")
	}
	summary := b.String()
	require.Greater(t, len(summary), checkrun.MaxCheckText, "over the limit in bytes, not in characters")
	var annotations []checkrun.Annotation
	for i := range 60 {
		annotations = append(annotations, checkrun.Annotation{Path: "platform.yaml", Line: i + 1, Level: "failure",
			Message: strings.Repeat("→", 30000), Title: strings.Repeat("é", 300)})
	}

	id, err := checks.Start(ctx, sha)
	require.NoError(t, err)
	require.NoError(t, checks.Finish(ctx, id, checkrun.Result{Conclusion: checkrun.ConclusionFailure, Title: "plan",
		Summary: summary, Text: summary, Annotations: annotations}))
	require.NoError(t, checks.Progress(ctx, sha, checkrun.Result{Title: "rollout", Summary: summary}))
}
