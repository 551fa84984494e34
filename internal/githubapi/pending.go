package githubapi

import (
	"context"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
)

// PendingChecks implements the webhook service's PendingChecks with the REST API on the control repo: what a
// resync reads to find the control pull requests whose head has no completed fleetbot check.
// Its client is the control repo's, whose GETs are conditional (ETag): an unchanged list of open
// pull requests is a 304, which GitHub does not count against the rate limit.
type PendingChecks struct {
	api         *gh.Client
	owner, name string
	checkName   string
	appID       int64
}

// maxOpenPulls bounds the open pull requests one resync looks at (10 pages of 100).
const maxOpenPulls = 1000

// NewPendingChecks returns the reader of the control repo "owner/name" for check runs named
// checkName (default checkrun.DefaultCheckName) made by the GitHub App appID (0: any App).
func NewPendingChecks(api *gh.Client, fullName, checkName string, appID int64) (*PendingChecks, error) {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" {
		return nil, fmt.Errorf("control repo %q: want owner/name", fullName)
	}
	if checkName == "" {
		checkName = checkrun.DefaultCheckName
	}
	return &PendingChecks{api: api, owner: owner, name: name, checkName: checkName, appID: appID}, nil
}

// OpenPullRequests lists the control repo's open pull requests, 100 a page, at most 1,000.
//
// GitHub API docs: https://docs.github.com/rest/pulls/pulls#list-pull-requests
func (p *PendingChecks) OpenPullRequests(ctx context.Context) ([]checkrun.OpenPullRequest, error) {
	opts := &gh.PullRequestListOptions{State: "open", ListOptions: gh.ListOptions{PerPage: 100}}
	var out []checkrun.OpenPullRequest
	for len(out) < maxOpenPulls {
		page, resp, err := p.api.PullRequests.List(ctx, p.owner, p.name, opts)
		if err != nil {
			return out, fmt.Errorf("listing the open pull requests of %s/%s: %w", p.owner, p.name, err)
		}
		for _, pr := range page {
			out = append(out, checkrun.OpenPullRequest{Number: pr.GetNumber(), Head: pr.GetHead().GetSHA(),
				Base: pr.GetBase().GetSHA(), Author: pr.GetUser().GetLogin()})
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nil
}

// LatestCheck returns the newest check run named checkName of the App on commit sha (the
// highest id: GitHub's ids grow with time), from one page of 100.
//
// GitHub API docs: https://docs.github.com/rest/checks/runs#list-check-runs-for-a-git-reference
func (p *PendingChecks) LatestCheck(ctx context.Context, sha string) (checkrun.State, bool, error) {
	opts := &gh.ListCheckRunsOptions{CheckName: gh.String(p.checkName), ListOptions: gh.ListOptions{PerPage: 100}}
	if p.appID != 0 {
		opts.AppID = gh.Int64(p.appID)
	}
	res, _, err := p.api.Checks.ListCheckRunsForRef(ctx, p.owner, p.name, sha, opts)
	if err != nil {
		return checkrun.State{}, false, fmt.Errorf("listing the check runs of %s/%s@%s: %w", p.owner, p.name, sha, err)
	}
	var newest *gh.CheckRun
	for _, cr := range res.CheckRuns {
		if cr.GetName() != p.checkName || (p.appID != 0 && cr.GetApp().GetID() != p.appID) {
			continue
		}
		if newest == nil || cr.GetID() > newest.GetID() {
			newest = cr
		}
	}
	if newest == nil {
		return checkrun.State{}, false, nil
	}
	return checkrun.State{ID: newest.GetID(), Status: newest.GetStatus(), StartedAt: newest.GetStartedAt().Time}, true, nil
}
