package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v62/github"

	"github.com/fleetbot-io/fleetbot/internal/policy"
	"github.com/fleetbot-io/fleetbot/internal/pr"
	"github.com/fleetbot-io/fleetbot/internal/report"
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
//   - a pull request whose head is not the commit fleetbot pushed (np.HeadSHA: someone pushed
//     to the bot branch) gets neither auto-merge nor a merge;
//   - the repo's "Allow auto-merge" setting is a managed setting: turned on when off (a repo
//     fleetbot adopted, or one whose setting someone turned off);
//   - auto-merge is enabled with the repo's merge method (a merge commit when allowed, else
//     squash, else rebase), pinned to fleetbot's head (expectedHeadOid);
//   - GitHub refuses auto-merge on a pull request that is already mergeable ("clean": no
//     required review or check to wait for). A fleetbot pull request is only clean when the
//     base branch's protection is missing or weaker than fleetbot's (drifted, or not enforced
//     on the repo's plan): then it is left open for a human, with an error that says why. Only
//     when the protection is what fleetbot wants is a clean pull request merged at once, with
//     the same method and pinned to fleetbot's head (GitHub answers 409 on a race).
//
// It reports whether the pull request was merged. Every refusal is an error wrapping
// ErrAutoMerge that says which repo, what GitHub answered and what to do.
//
// GitHub API docs: https://docs.github.com/graphql/reference/mutations#enablepullrequestautomerge,
// https://docs.github.com/rest/repos/repos#update-a-repository,
// https://docs.github.com/rest/branches/branch-protection#get-branch-protection and
// https://docs.github.com/rest/pulls/pulls#merge-a-pull-request
func (f *Forge) autoMerge(ctx context.Context, owner, repo string, p *gh.PullRequest, np pr.NewPR) (bool, error) {
	full := owner + "/" + repo
	n := p.GetNumber()
	if got := p.GetHead().GetSHA(); np.HeadSHA == "" || got != np.HeadSHA {
		return false, fmt.Errorf("%w: pull request #%d of %s: its head is %s, not %s, the commit fleetbot pushed to %s (someone else pushed to the branch): fleetbot neither merges it nor enables auto-merge; review and merge it by hand, or close it and fleetbot opens a new one",
			ErrAutoMerge, n, full, report.ShortSHA(got), report.ShortSHA(np.HeadSHA), np.Head)
	}
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
	err = f.enableAutoMerge(ctx, p.GetNodeID(), method, np.HeadSHA)
	var ge *graphQLError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &ge) && strings.Contains(strings.ToLower(ge.Message), autoMergeClean):
		if err := f.checkCleanProtection(ctx, owner, repo, n, np, ge.Message); err != nil {
			return false, err
		}
		res, _, merr := f.api.PullRequests.Merge(ctx, owner, repo, n, "", &gh.PullRequestOptions{MergeMethod: method, SHA: np.HeadSHA})
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

// checkCleanProtection returns nil when a pull request GitHub reports mergeable at once
// ("clean") may be merged directly: its base branch's protection is at least np.Protection.
// Otherwise the error says why it is left for a human: protection not enforced on the repo's
// plan, the branch unprotected, or its protection weaker than fleetbot's.
func (f *Forge) checkCleanProtection(ctx context.Context, owner, repo string, n int, np pr.NewPR, answer string) error {
	full := owner + "/" + repo
	if np.Protection == nil {
		return fmt.Errorf("%w: pull request #%d of %s is mergeable without review (GitHub: %q) and fleetbot has no protection to check %s against: merge it by hand",
			ErrAutoMerge, n, full, answer, np.Base)
	}
	p, resp, err := f.api.Repositories.GetBranchProtection(ctx, owner, repo, np.Base)
	var observed *policy.Protection
	switch {
	case planLacksProtection(resp, err):
		return fmt.Errorf("%w: pull request #%d of %s is clean because protection is not enforced; merge by hand (GitHub cannot protect %s on this repo's plan: %q)",
			ErrAutoMerge, n, full, np.Base, errMessage(err))
	case errors.Is(err, gh.ErrBranchNotProtected), IsNotFound(err):
	case err != nil:
		return fmt.Errorf("%w: pull request #%d of %s is mergeable without review (GitHub: %q), and reading the protection of %s failed, so fleetbot does not merge it: %w",
			ErrAutoMerge, n, full, answer, np.Base, errf(err, "reading the protection of "+np.Base+" in", full))
	default:
		observed = fromProtection(np.Base, p)
	}
	if drift := policy.ProtectionDrift(*np.Protection, observed); len(drift) > 0 {
		return fmt.Errorf("%w: pull request #%d of %s is mergeable without review (GitHub: %q) because the protection of %s is weaker than fleetbot's (%s): fleetbot does not merge it; review and merge it by hand; fleetbot restores the protection once it reads the repo's access again (at most accessMaxAge later)",
			ErrAutoMerge, n, full, answer, np.Base, strings.Join(drift, "; "))
	}
	return nil
}

// planLacksProtection reports whether reading a branch's protection failed with GitHub's
// "not on this plan" refusal (a private repo on the free plan), not a missing permission.
func planLacksProtection(resp *gh.Response, err error) bool {
	_, unavailable := protectionUnavailable(err)
	return unavailable || statusOf(resp) == 403 && strings.Contains(strings.ToLower(errMessage(err)), "upgrade to github pro")
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

// enableAutoMerge turns on GitHub auto-merge for a pull request with method, as long as its
// head is head (GraphQL only); a refusal is a *graphQLError.
//
// GitHub API docs: https://docs.github.com/graphql/reference/mutations#enablepullrequestautomerge
func (f *Forge) enableAutoMerge(ctx context.Context, nodeID, method, head string) error {
	u := *f.api.BaseURL
	if strings.HasSuffix(u.Path, "/api/v3/") {
		u.Path = strings.TrimSuffix(u.Path, "v3/") + "graphql"
	} else {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/graphql"
	}
	if !isHexSHA(head) {
		return fmt.Errorf("head %q is not a commit id", head)
	}
	// expectedHeadOid is written into the document (a checked hex commit id): GitHub then
	// refuses auto-merge when the head moved since fleetbot pushed it.
	body := map[string]any{
		"query":     `mutation($id: ID!, $method: PullRequestMergeMethod!) { enablePullRequestAutoMerge(input: {pullRequestId: $id, mergeMethod: $method, expectedHeadOid: "` + head + `"}) { pullRequest { number } } }`,
		"variables": map[string]any{"id": nodeID, "method": strings.ToUpper(method)},
	}
	req, err := f.api.NewRequest("POST", u.String(), body)
	if err != nil {
		return err
	}
	var raw bytes.Buffer
	resp, err := f.postGraphQL(ctx, req, &raw)
	if err != nil {
		return err
	}
	var out struct {
		Errors []graphQLError `json:"errors"`
	}
	if err := json.Unmarshal(raw.Bytes(), &out); err != nil {
		return fmt.Errorf("GraphQL: decoding the answer: %w", err)
	}
	if len(out.Errors) > 0 {
		if out.Errors[0].Type == "RATE_LIMITED" {
			return graphQLRateLimited(req, resp)
		}
		return &out.Errors[0]
	}
	return nil
}

// isHexSHA reports whether s is a full SHA-1 or SHA-256 commit id in lower-case hex.
func isHexSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
