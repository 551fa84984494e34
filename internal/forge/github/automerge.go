package github

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// ErrAutoMerge is returned (wrapped) when pullRequests.merge: auto cannot be honoured on a pull
// request: the message says why and what to do.
var ErrAutoMerge = errors.New("auto-merge not possible")

// GitHub's GraphQL messages for enablePullRequestAutoMerge refusals (its doubled "Pull request"
// included): the repository setting is off, and the pull request is already mergeable.
const (
	autoMergeNotAllowed = "auto merge is not allowed for this repository"
	autoMergeClean      = "is in clean status"
)

// graphQLError is an error GitHub's GraphQL API answered with (HTTP 200).
type graphQLError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (e *graphQLError) Error() string { return "GraphQL: " + e.Message }

// autoMerge carries out pullRequests.merge: auto for a pull request fleetbot just opened:
//   - the repo's "Allow auto-merge" setting is a managed setting: turned on when off (a repo
//     fleetbot adopted, or one whose setting someone turned off);
//   - auto-merge is enabled with the repo's merge method (a merge commit when allowed, else
//     squash, else rebase);
//   - GitHub refuses auto-merge on a pull request that is already mergeable ("clean": no
//     required review or check to wait for), so that one is merged at once, with the same
//     method and pinned to the head fleetbot wrote.
//
// It reports whether the pull request was merged. Every refusal is an error wrapping
// ErrAutoMerge that says which repo, what GitHub answered and what to do.
//
// GitHub API docs: https://docs.github.com/graphql/reference/mutations#enablepullrequestautomerge,
// https://docs.github.com/rest/repos/repos#update-a-repository and
// https://docs.github.com/rest/pulls/pulls#merge-a-pull-request
func (f *Forge) autoMerge(ctx context.Context, owner, repo string, p *gh.PullRequest) (bool, error) {
	full := owner + "/" + repo
	n := p.GetNumber()
	r, _, err := f.api.Repositories.Get(ctx, owner, repo)
	if err != nil {
		return false, errf(err, "reading the merge settings of", full)
	}
	method := mergeMethod(r)
	if !r.GetAllowAutoMerge() {
		if _, _, err := f.api.Repositories.Edit(ctx, owner, repo, &gh.Repository{AllowAutoMerge: gh.Bool(true)}); err != nil {
			return false, fmt.Errorf("%w: pull request #%d of %s: the repo does not allow auto-merge and fleetbot could not allow it (the App needs administration: write, or an org admin turns on \"Allow auto-merge\"): %w",
				ErrAutoMerge, n, full, Wrap(err, "allowing auto-merge on", full))
		}
		f.log.Info("allowed auto-merge (pullRequests.merge: auto)", "repo", full)
	}
	err = f.enableAutoMerge(ctx, p.GetNodeID(), method)
	var ge *graphQLError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &ge) && strings.Contains(strings.ToLower(ge.Message), autoMergeClean):
		res, _, merr := f.api.PullRequests.Merge(ctx, owner, repo, n, "", &gh.PullRequestOptions{MergeMethod: method, SHA: p.GetHead().GetSHA()})
		if merr == nil && !res.GetMerged() {
			merr = errors.New(res.GetMessage())
		}
		if merr != nil {
			return false, fmt.Errorf("%w: pull request #%d of %s is already mergeable, so GitHub refuses auto-merge (%q), and merging it at once (%s) failed: %w; merge it by hand, or require a review on %s so that auto-merge has something to wait for",
				ErrAutoMerge, n, full, ge.Message, method, merr, p.GetBase().GetRef())
		}
		f.log.Info("pull request already mergeable: merged it (pullRequests.merge: auto)", "repo", full, "number", n, "method", method)
		return true, nil
	case errors.As(err, &ge) && strings.Contains(strings.ToLower(ge.Message), autoMergeNotAllowed):
		return false, fmt.Errorf("%w: pull request #%d of %s: GitHub still says %q after fleetbot allowed auto-merge on the repo; check the organization's policy on auto-merge",
			ErrAutoMerge, n, full, ge.Message)
	case ge != nil:
		return false, fmt.Errorf("%w: pull request #%d of %s: GitHub refused auto-merge: %q", ErrAutoMerge, n, full, ge.Message)
	}
	return false, errf(err, fmt.Sprintf("enabling auto-merge of pull request #%d in", n), full)
}

// mergeMethod is the merge method the repo allows, preferring a merge commit (GitHub's default
// for auto-merge), then squash, then rebase. A setting GitHub does not show counts as allowed.
func mergeMethod(r *gh.Repository) string {
	switch {
	case r.AllowMergeCommit == nil || r.GetAllowMergeCommit():
		return "merge"
	case r.GetAllowSquashMerge():
		return "squash"
	case r.GetAllowRebaseMerge():
		return "rebase"
	}
	return "merge"
}

// enableAutoMerge turns on GitHub auto-merge for a pull request with method (GraphQL only); a
// refusal is a *graphQLError.
//
// GitHub API docs: https://docs.github.com/graphql/reference/mutations#enablepullrequestautomerge
func (f *Forge) enableAutoMerge(ctx context.Context, nodeID, method string) error {
	u := *f.api.BaseURL
	if strings.HasSuffix(u.Path, "/api/v3/") {
		u.Path = strings.TrimSuffix(u.Path, "v3/") + "graphql"
	} else {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/graphql"
	}
	body := map[string]any{
		"query":     `mutation($id: ID!, $method: PullRequestMergeMethod!) { enablePullRequestAutoMerge(input: {pullRequestId: $id, mergeMethod: $method}) { pullRequest { number } } }`,
		"variables": map[string]any{"id": nodeID, "method": strings.ToUpper(method)},
	}
	req, err := f.api.NewRequest("POST", u.String(), body)
	if err != nil {
		return err
	}
	var out struct {
		Errors []graphQLError `json:"errors"`
	}
	if _, err := f.api.Do(ctx, req, &out); err != nil {
		return err
	}
	if len(out.Errors) > 0 {
		return &out.Errors[0]
	}
	return nil
}
