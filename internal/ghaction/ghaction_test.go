package ghaction

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func runnerEnv(t *testing.T) map[string]string {
	dir := t.TempDir()
	return map[string]string{
		"GITHUB_EVENT_NAME":   "pull_request",
		"GITHUB_EVENT_PATH":   filepath.Join(dir, "event.json"),
		"GITHUB_REPOSITORY":   "acme/control",
		"GITHUB_SHA":          "0123456789abcdef",
		"GITHUB_REF":          "refs/pull/7/merge",
		"GITHUB_API_URL":      "https://api.github.com",
		"GITHUB_WORKSPACE":    dir,
		"GITHUB_OUTPUT":       filepath.Join(dir, "output"),
		"GITHUB_STEP_SUMMARY": filepath.Join(dir, "summary"),
		"RUNNER_TEMP":         dir,
	}
}

func TestFromEnv(t *testing.T) {
	m := runnerEnv(t)
	m["INPUT_CONTROL-DIR"] = " control \n"
	m["INPUT_ALLOW_REMOVALS"] = "True"
	m["INPUT_BAD"] = "yes"
	e, err := FromEnv(envOf(m))
	require.NoError(t, err)
	assert.Equal(t, "acme", e.Owner())
	assert.Equal(t, "control", e.Repo())
	assert.Equal(t, "refs/pull/7/merge", e.Ref)
	assert.Equal(t, "control", e.Input("control-dir"), "the runner's INPUT_CONTROL-DIR, trimmed")
	assert.Equal(t, "", e.Input("app-id"))
	b, err := e.BoolInput("allow-removals", false)
	require.NoError(t, err)
	assert.True(t, b, "INPUT_ALLOW_REMOVALS (underscore form)")
	b, err = e.BoolInput("missing", true)
	require.NoError(t, err)
	assert.True(t, b, "empty input is the default")
	_, err = e.BoolInput("bad", false)
	assert.ErrorContains(t, err, `input bad: "yes" is not a boolean`)
}

func TestFromEnvOutsideRunner(t *testing.T) {
	_, err := FromEnv(envOf(map[string]string{"GITHUB_REPOSITORY": "acme/control"}))
	require.ErrorIs(t, err, ErrNotRunner)
	assert.ErrorContains(t, err, "GITHUB_EVENT_NAME, GITHUB_WORKSPACE not set")

	m := runnerEnv(t)
	m["GITHUB_REPOSITORY"] = "control"
	_, err = FromEnv(envOf(m))
	assert.ErrorContains(t, err, "want owner/repo")
}

func TestReadEvent(t *testing.T) {
	m := runnerEnv(t)
	e, err := FromEnv(envOf(m))
	require.NoError(t, err)
	_, err = e.ReadEvent()
	require.Error(t, err, "missing payload file")

	require.NoError(t, os.WriteFile(e.EventPath, []byte(`{
		"action": "synchronize", "number": 7,
		"pull_request": {"number": 7, "html_url": "https://github.com/acme/control/pull/7",
			"user": {"login": "alice"},
			"base": {"ref": "main", "sha": "aaa", "repo": {"full_name": "acme/control"}},
			"head": {"ref": "feature", "sha": "bbb", "repo": {"full_name": "alice/control"}}},
		"repository": {"full_name": "acme/control", "default_branch": "main"},
		"unknown": {"ignored": true}}`), 0o644))
	ev, err := e.ReadEvent()
	require.NoError(t, err)
	require.NotNil(t, ev.PullRequest)
	assert.Equal(t, 7, ev.PullRequest.Number)
	assert.Equal(t, "aaa", ev.PullRequest.Base.SHA)
	assert.Equal(t, "alice", ev.PullRequest.User.Login)
	assert.Equal(t, "main", ev.Repository.DefaultBranch)
	assert.True(t, ev.PullRequest.FromFork())

	require.NoError(t, os.WriteFile(e.EventPath, []byte(`{"ref": 3}`), 0o644))
	_, err = e.ReadEvent()
	assert.ErrorContains(t, err, "decoding the pull_request event payload")
}

func TestCommands(t *testing.T) {
	var b bytes.Buffer
	c := NewCommands(&b)
	c.Mask("-----BEGIN RSA PRIVATE KEY-----\r\nMIIEow\nAAA%B\n\n-----END RSA PRIVATE KEY-----\n")
	c.Mask("ghs_token")
	c.Annotate(Annotation{File: "control/clusters/a,b.yaml", Line: 4, Title: "fleetbot: value", Message: "bad value\nhint: 100%"})
	c.Annotate(Annotation{Level: LevelWarning, Message: "no file"})
	c.Annotate(Annotation{Level: LevelNotice, File: "x.yaml", Line: 2, EndLine: 5, Message: "range"})
	c.Group("plan")
	c.EndGroup()
	assert.Equal(t, `::add-mask::MIIEow
::add-mask::AAA%25B
::add-mask::ghs_token
::error file=control/clusters/a%2Cb.yaml,line=4,title=fleetbot%3A value::bad value%0Ahint: 100%25
::warning::no file
::notice file=x.yaml,line=2,endLine=5::range
::group::plan
::endgroup::
`, b.String())
}

// TestAnnotationsPastGitHubsLimit: GitHub shows ten annotations of a level per step; past nine,
// Annotate holds them back and Overflow's tenth counts them, once.
func TestAnnotationsPastGitHubsLimit(t *testing.T) {
	var b bytes.Buffer
	c := NewCommands(&b)
	for i := range 25 {
		c.Annotate(Annotation{Message: fmt.Sprintf("error %d", i)})
	}
	c.Annotate(Annotation{Level: LevelWarning, Message: "one warning"})
	c.Overflow("the job summary")
	c.Overflow("the job summary")
	out := b.String()
	assert.Equal(t, MaxAnnotations, strings.Count("\n"+out, "\n::error"), out)
	assert.Contains(t, out, "::error::error 8\n::warning::one warning\n")
	assert.NotContains(t, out, "error 9\n")
	assert.True(t, strings.HasSuffix(out, "::error title=fleetbot::16 more error annotations not shown (GitHub shows 10 per step): the job summary has them all\n"), out)
}

func TestOutputsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "output")
	require.NoError(t, SetOutput(path, "changed-repos", `["acme/a","acme/b"]`))
	require.NoError(t, SetOutput(path, "body", "line 1\nline 2\n"))
	require.NoError(t, SetOutput(path, "empty", ""))
	// A step may also have written the short form itself.
	require.NoError(t, appendFile(path, "plain=value=with=equals\n"))
	got, err := ReadOutputs(path)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"changed-repos": `["acme/a","acme/b"]`,
		"body":          "line 1\nline 2\n",
		"empty":         "",
		"plain":         "value=with=equals",
	}, got)

	for _, name := range []string{"", "a\nb", "a<<b", "a=b"} {
		assert.Error(t, SetOutput(path, name, "v"), "name %q", name)
	}
	assert.ErrorContains(t, SetOutput("", "x", "v"), "GITHUB_OUTPUT not set")

	require.NoError(t, os.WriteFile(path, []byte("x<<EOF\nunterminated\n"), 0o644))
	_, err = ReadOutputs(path)
	assert.ErrorContains(t, err, "delimiter EOF not found")
	_, err = ReadOutputs(filepath.Join(t.TempDir(), "none"))
	assert.True(t, errors.Is(err, os.ErrNotExist))
}

func TestAppendSummaryStaysUnderLimit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "summary")
	require.NoError(t, AppendSummary(path, "### one\n"))
	require.NoError(t, AppendSummary(path, "### two\n"))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "### one\n### two\n", string(b))

	big := strings.Repeat("| `acme/cluster-x` | cluster | open |\n", MaxSummaryBytes/30)
	require.NoError(t, AppendSummary(path, big))
	b, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.LessOrEqual(t, len(b), MaxSummaryBytes)
	assert.True(t, strings.HasSuffix(string(b), "summary limit._\n"), "ends with the note")
	require.NoError(t, AppendSummary(path, strings.Repeat("more\n", 20)), "a full summary takes nothing more, silently")
	b2, _ := os.ReadFile(path)
	assert.Equal(t, len(b), len(b2))
	assert.ErrorContains(t, AppendSummary("", "x"), "GITHUB_STEP_SUMMARY not set")
}

func TestTruncate(t *testing.T) {
	assert.Equal(t, "short", Truncate("short", 10, "…"))
	assert.Equal(t, "a\nb\n[cut]", Truncate("a\nb\nccccccc", 10, "[cut]"))
	assert.Equal(t, "", Truncate("abcdef", 2, "[cut]"), "no room even for the note")
	// Never splits a rune.
	got := Truncate("ééééé", 6, "!")
	assert.Equal(t, "éé!", got)
}
