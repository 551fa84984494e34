package githubapi

import (
	"context"
	"fmt"

	gh "github.com/google/go-github/v62/github"
)

// CommitStatuses posts commit statuses through the installation on a repo's owner: serve's
// /health endpoint records a cluster's health verdict with it, as a github Provider would.
type CommitStatuses struct {
	client ClientFunc
}

// NewCommitStatuses returns the writer of commit statuses over client.
func NewCommitStatuses(client ClientFunc) *CommitStatuses { return &CommitStatuses{client: client} }

// Post creates a commit status on commit sha of owner/repo: state is success, pending,
// failure or error; description at most 140 characters.
//
// GitHub API docs: https://docs.github.com/rest/commits/statuses#create-a-commit-status
func (c *CommitStatuses) Post(ctx context.Context, owner, repo, sha, context, state, description string) error {
	client, err := c.client(ctx, owner, true)
	if err != nil {
		return err
	}
	st := &gh.RepoStatus{State: gh.String(state), Context: gh.String(context)}
	if description != "" {
		st.Description = gh.String(description)
	}
	if _, _, err := client.Repositories.CreateStatus(ctx, owner, repo, sha, st); err != nil {
		return fmt.Errorf("posting commit status %s on %s/%s@%s: %w", context, owner, repo, sha, err)
	}
	return nil
}
