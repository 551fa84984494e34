package githubapi

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
)

// GitHubChecks implements webhook.CheckRuns with the Checks API on one repo.
type GitHubChecks struct {
	api         *gh.Client
	owner, name string
	checkName   string
	now         func() time.Time

	// mu guards rollouts: the rollout check run last written per commit, so that an
	// unchanged verdict (every resync) writes nothing.
	mu       sync.Mutex
	rollouts []rolloutRun
}

// rolloutRun is the rollout check run fleetbot last wrote on a commit.
type rolloutRun struct {
	sha       string
	id        int64
	completed bool
	result    string // what was written: the conclusion, title and summary
}

// rolloutMemo is how many commits' rollout check runs are remembered (the rollout in
// progress, the one it superseded, a few before).
const rolloutMemo = 8

// NewGitHubChecks returns check runs named checkName (default
// checkrun.DefaultCheckName) on the repo "owner/name".
func NewGitHubChecks(api *gh.Client, fullName, checkName string) (*GitHubChecks, error) {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" {
		return nil, fmt.Errorf("control repo %q: want owner/name", fullName)
	}
	if checkName == "" {
		checkName = checkrun.DefaultCheckName
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
func (c *GitHubChecks) Finish(ctx context.Context, id int64, r checkrun.Result) error {
	out := checkOutput(r, r.Annotations[:min(len(r.Annotations), checkrun.MaxAnnotations)])
	_, _, err := c.api.Checks.UpdateCheckRun(ctx, c.owner, c.name, id, gh.UpdateCheckRunOptions{
		Name: c.checkName, Status: gh.String("completed"), Conclusion: gh.String(r.Conclusion),
		CompletedAt: &gh.Timestamp{Time: c.now()}, Output: out,
	})
	if err != nil {
		return fmt.Errorf("completing check run %d on %s/%s: %w", id, c.owner, c.name, err)
	}
	return nil
}

// checkOutput is r's output with the annotations anns, every text within GitHub's limits: the
// summary and text cut to checkrun.MaxCheckText bytes as Markdown, each annotation's message to
// checkrun.MaxAnnotationMessage bytes and its title to checkrun.MaxAnnotationTitle characters. The
// control repo's check and the tenant check share it.
//
// GitHub API docs: https://docs.github.com/rest/checks/runs#update-a-check-run
func checkOutput(r checkrun.Result, anns []checkrun.Annotation) *gh.CheckRunOutput {
	out := &gh.CheckRunOutput{Title: gh.String(r.Title), Summary: gh.String(checkrun.TruncateMarkdown(r.Summary, checkrun.MaxCheckText))}
	if r.Text != "" {
		out.Text = gh.String(checkrun.TruncateMarkdown(r.Text, checkrun.MaxCheckText))
	}
	for _, a := range anns {
		line := max(a.Line, 1)
		out.Annotations = append(out.Annotations, &gh.CheckRunAnnotation{
			Path: gh.String(a.Path), StartLine: gh.Int(line), EndLine: gh.Int(line), AnnotationLevel: gh.String(a.Level),
			Message: gh.String(checkrun.TruncateBytes(a.Message, checkrun.MaxAnnotationMessage)),
			Title:   gh.String(checkrun.TruncateRunes(a.Title, checkrun.MaxAnnotationTitle)),
		})
	}
	return out
}

// Progress creates or updates the rollout check run (checkrun.RolloutCheckName) on commit sha:
// in progress while r.Conclusion is empty, completed with it otherwise. An unchanged r writes
// nothing; a check run already completed is never reopened: a changed verdict gets a new
// check run, which GitHub shows in its place. After a restart the run is found again by name
// on the commit (one request).
//
// GitHub API docs: https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference
func (c *GitHubChecks) Progress(ctx context.Context, sha string, r checkrun.Result) error {
	key := r.Conclusion + "\x00" + r.Title + "\x00" + r.Summary
	run, known := c.rolloutRun(sha)
	if known && run.result == key {
		return nil
	}
	if !known {
		name := checkrun.RolloutCheckName
		runs, _, err := c.api.Checks.ListCheckRunsForRef(ctx, c.owner, c.name, sha, &gh.ListCheckRunsOptions{CheckName: &name, Filter: gh.String("latest")})
		if err != nil {
			return fmt.Errorf("finding the rollout check run on %s/%s@%s: %w", c.owner, c.name, sha, err)
		}
		for _, cr := range runs.CheckRuns {
			if cr.GetName() == name && cr.GetID() > run.id {
				run = rolloutRun{sha: sha, id: cr.GetID(), completed: cr.GetStatus() == "completed"}
			}
		}
	}
	out := &gh.CheckRunOutput{Title: gh.String(r.Title), Summary: gh.String(checkrun.TruncateMarkdown(r.Summary, checkrun.MaxCheckText))}
	status, conclusion := gh.String("in_progress"), (*string)(nil)
	var completedAt *gh.Timestamp
	if r.Conclusion != "" {
		status, conclusion, completedAt = gh.String("completed"), gh.String(r.Conclusion), &gh.Timestamp{Time: c.now()}
	}
	if run.id == 0 || run.completed {
		cr, _, err := c.api.Checks.CreateCheckRun(ctx, c.owner, c.name, gh.CreateCheckRunOptions{
			Name: checkrun.RolloutCheckName, HeadSHA: sha, Status: status, Conclusion: conclusion,
			StartedAt: &gh.Timestamp{Time: c.now()}, CompletedAt: completedAt, Output: out,
		})
		if err != nil {
			return fmt.Errorf("creating the rollout check run on %s/%s@%s: %w", c.owner, c.name, sha, err)
		}
		run.id = cr.GetID()
	} else {
		_, _, err := c.api.Checks.UpdateCheckRun(ctx, c.owner, c.name, run.id, gh.UpdateCheckRunOptions{
			Name: checkrun.RolloutCheckName, Status: status, Conclusion: conclusion, CompletedAt: completedAt, Output: out,
		})
		if err != nil {
			return fmt.Errorf("updating rollout check run %d on %s/%s: %w", run.id, c.owner, c.name, err)
		}
	}
	run.sha, run.completed, run.result = sha, r.Conclusion != "", key
	c.remember(run)
	return nil
}

// rolloutRun returns what was last written on sha's rollout check run.
func (c *GitHubChecks) rolloutRun(sha string) (rolloutRun, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.rollouts {
		if r.sha == sha {
			return r, true
		}
	}
	return rolloutRun{}, false
}

// remember keeps run as sha's, most recent first, forgetting the oldest beyond rolloutMemo.
func (c *GitHubChecks) remember(run rolloutRun) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := []rolloutRun{run}
	for _, r := range c.rollouts {
		if r.sha != run.sha && len(out) < rolloutMemo {
			out = append(out, r)
		}
	}
	c.rollouts = out
}
