package githubapi

import (
	"context"
	"fmt"
	"strings"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// GitHubChecks implements webhook.CheckRuns with the Checks API on one repo.
type GitHubChecks struct {
	api         *gh.Client
	owner, name string
	checkName   string
	now         func() time.Time
}

// NewGitHubChecks returns check runs named checkName (default
// webhook.DefaultCheckName) on the repo "owner/name".
func NewGitHubChecks(api *gh.Client, fullName, checkName string) (*GitHubChecks, error) {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" {
		return nil, fmt.Errorf("control repo %q: want owner/name", fullName)
	}
	if checkName == "" {
		checkName = webhook.DefaultCheckName
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
func (c *GitHubChecks) Finish(ctx context.Context, id int64, r webhook.CheckResult) error {
	out := &gh.CheckRunOutput{
		Title:   gh.String(r.Title),
		Summary: gh.String(webhook.TruncateMarkdown(r.Summary, webhook.MaxCheckText)),
	}
	if r.Text != "" {
		out.Text = gh.String(webhook.TruncateMarkdown(r.Text, webhook.MaxCheckText))
	}
	for i, a := range r.Annotations {
		if i == webhook.MaxAnnotations {
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
