package webhook

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"
)

// Check-run limits GitHub enforces.
const (
	// MaxCheckText is the most characters GitHub accepts in a check run's
	// output summary or text.
	MaxCheckText = 65535
	// MaxAnnotations is the most annotations one check run request carries.
	MaxAnnotations = 50
)

// DefaultCheckName is the name of fleetbot's check run on control-repo
// pull requests.
const DefaultCheckName = "fleetbot plan"

// Check conclusions fleetbot uses.
const (
	ConclusionSuccess   = "success"
	ConclusionNeutral   = "neutral"
	ConclusionFailure   = "failure"
	ConclusionCancelled = "cancelled"
)

// CheckResult is the completed state of a check run.
type CheckResult struct {
	Conclusion string
	Title      string
	// Summary and Text are markdown; they are truncated to MaxCheckText.
	Summary, Text string
	// Annotations point at control repo files (at most MaxAnnotations are sent).
	Annotations []Annotation
}

// Annotation is a remark on a line of a control repo file.
type Annotation struct {
	Path    string
	Line    int
	Level   string // notice, warning or failure
	Message string
	Title   string
}

// CheckRuns creates and completes check runs on the control repo.
type CheckRuns interface {
	// Start creates an in-progress check run on commit sha.
	Start(ctx context.Context, sha string) (int64, error)
	// Finish completes check run id with r.
	Finish(ctx context.Context, id int64, r CheckResult) error
}

// GitHubChecks implements CheckRuns with the Checks API on one repo.
type GitHubChecks struct {
	api         *gh.Client
	owner, name string
	checkName   string
	now         func() time.Time
}

// NewGitHubChecks returns check runs named checkName (default
// DefaultCheckName) on the repo "owner/name".
func NewGitHubChecks(api *gh.Client, fullName, checkName string) (*GitHubChecks, error) {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" {
		return nil, fmt.Errorf("control repo %q: want owner/name", fullName)
	}
	if checkName == "" {
		checkName = DefaultCheckName
	}
	return &GitHubChecks{api: api, owner: owner, name: name, checkName: checkName, now: time.Now}, nil
}

// Start creates an in-progress check run.
//
// GitHub API docs: https://docs.github.com/rest/checks/runs#create-a-check-run
func (c *GitHubChecks) Start(ctx context.Context, sha string) (int64, error) {
	cr, _, err := c.api.Checks.CreateCheckRun(ctx, c.owner, c.name, gh.CreateCheckRunOptions{
		Name: c.checkName, HeadSHA: sha, Status: gh.String("in_progress"),
		StartedAt: &gh.Timestamp{Time: c.now()},
	})
	if err != nil {
		return 0, fmt.Errorf("creating check run on %s/%s@%s: %w", c.owner, c.name, sha, err)
	}
	return cr.GetID(), nil
}

// Finish completes a check run, truncating its output to GitHub's limits.
//
// GitHub API docs: https://docs.github.com/rest/checks/runs#update-a-check-run
func (c *GitHubChecks) Finish(ctx context.Context, id int64, r CheckResult) error {
	out := &gh.CheckRunOutput{
		Title:   gh.String(r.Title),
		Summary: gh.String(TruncateMarkdown(r.Summary, MaxCheckText)),
	}
	if r.Text != "" {
		out.Text = gh.String(TruncateMarkdown(r.Text, MaxCheckText))
	}
	for i, a := range r.Annotations {
		if i == MaxAnnotations {
			break
		}
		line := max(a.Line, 1)
		out.Annotations = append(out.Annotations, &gh.CheckRunAnnotation{
			Path: gh.String(a.Path), StartLine: gh.Int(line), EndLine: gh.Int(line),
			AnnotationLevel: gh.String(a.Level), Message: gh.String(a.Message), Title: gh.String(a.Title),
		})
	}
	_, _, err := c.api.Checks.UpdateCheckRun(ctx, c.owner, c.name, id, gh.UpdateCheckRunOptions{
		Name: c.checkName, Status: gh.String("completed"), Conclusion: gh.String(r.Conclusion),
		CompletedAt: &gh.Timestamp{Time: c.now()}, Output: out,
	})
	if err != nil {
		return fmt.Errorf("completing check run %d on %s/%s: %w", id, c.owner, c.name, err)
	}
	return nil
}

// truncationNote ends a truncated check run text.
const truncationNote = "\n\n… truncated to fit GitHub's check run limit; run `fleetbot plan` for the full plan.\n"

// TruncateMarkdown returns s if it has at most limit characters; otherwise
// a prefix cut at a line boundary, with open <details> blocks and code
// fences closed and a note appended, within limit characters.
func TruncateMarkdown(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	// Room for the note and for closing what the cut leaves open.
	budget := limit - utf8.RuneCountInString(truncationNote) - 64
	if budget <= 0 {
		return string([]rune(truncationNote)[:max(limit, 0)])
	}
	cut := string([]rune(s)[:budget])
	if i := strings.LastIndexByte(cut, '\n'); i > 0 {
		cut = cut[:i]
	}
	var closing strings.Builder
	if strings.Count(cut, "```")%2 == 1 {
		closing.WriteString("\n```")
	}
	// reconcile's markdown never nests <details>; close at most four.
	open := strings.Count(cut, "<details") - strings.Count(cut, "</details>")
	for range min(max(open, 0), 4) {
		closing.WriteString("\n</details>")
	}
	return cut + closing.String() + truncationNote
}
