package githubtest

import (
	"fmt"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// gqlCommit is a Commit of the GraphQL graph: its oid and the statusCheckRollup a status view
// reads (the combined state of the commit's statuses and check runs).
type gqlCommit struct {
	s   *Server
	rm  *repoMeta
	oid string
}

func (c *gqlCommit) typename() string { return "Commit" }

func (c *gqlCommit) field(name string, args map[string]any) (any, error) {
	switch name {
	case "oid":
		return c.oid, nil
	case "statusCheckRollup":
		state := c.s.rollupState(c.rm, c.oid)
		if state == "" {
			return gqlObject(nil), nil // GitHub: null when the commit has no status and no check run
		}
		return &gqlPlain{name: "StatusCheckRollup", fields: map[string]any{"state": state}}, nil
	case "status":
		return c.status(), nil
	case "checkSuites":
		return c.checkSuites(args)
	case "tree":
		// Commit.tree: the commit's root tree (non-null).
		// https://docs.github.com/graphql/reference/objects#commit
		return c.tree()
	}
	return nil, fmt.Errorf("fake github: Commit.%s is not implemented", name)
}

// tree is the commit's Commit.tree.
func (c *gqlCommit) tree() (any, error) {
	g, err := c.s.openRepoGit(c.rm)
	if err != nil {
		return nil, err
	}
	commit, err := g.commit(plumbing.NewHash(c.oid))
	if err != nil {
		return nil, fmt.Errorf("fake github: commit %s: %w", c.oid, err)
	}
	return &gqlPlain{name: "Tree", fields: map[string]any{"oid": commit.TreeHash.String()}}, nil
}

// rollupState combines, as GitHub's StatusCheckRollup.state does, the newest status of each
// context and every check run of a commit: FAILURE when one failed, ERROR when one errored,
// PENDING while one runs, else SUCCESS; "" when there is none.
func (s *Server) rollupState(rm *repoMeta, sha string) string {
	var failed, errored, pending, found bool
	seen := map[string]bool{}
	for i := len(rm.Statuses) - 1; i >= 0; i-- {
		st := rm.Statuses[i]
		if st.SHA != sha || seen[st.Context] {
			continue
		}
		seen[st.Context] = true
		found = true
		switch st.State {
		case "failure":
			failed = true
		case "error":
			errored = true
		case "pending":
			pending = true
		}
	}
	key := repoKey(rm.Owner, rm.Name)
	for _, cr := range s.st.CheckRuns {
		if cr.Repo != key || cr.HeadSHA != sha {
			continue
		}
		found = true
		switch {
		case cr.Status != "completed":
			pending = true
		case cr.Conclusion == "failure" || cr.Conclusion == "timed_out" || cr.Conclusion == "cancelled" ||
			cr.Conclusion == "action_required" || cr.Conclusion == "startup_failure":
			failed = true
		}
	}
	switch {
	case !found:
		return ""
	case failed:
		return "FAILURE"
	case errored:
		return "ERROR"
	case pending:
		return "PENDING"
	}
	return "SUCCESS"
}

// reviewDecision is a pull request's PullRequest.reviewDecision while the base branch's
// protection requires reviews: APPROVED once the approvals it requires are there (its number,
// a code owner's), REVIEW_REQUIRED until then; null when no review is required.
func (s *Server) reviewDecision(rm *repoMeta, is *issue) any {
	p := rm.Protection[is.Pull.Base]
	if p == nil || !p.RequirePRReviews {
		return nil
	}
	if len(s.reviewBlockersLocked(rm, is, p)) > 0 {
		return "REVIEW_REQUIRED"
	}
	return "APPROVED"
}

// gqlDateTime formats a time as GitHub's DateTime scalar (ISO 8601, UTC).
func gqlDateTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// status is the commit's Status (GitHub: null when it has no commit status): the combined
// state of the newest status of each context, and those statuses, the newest first.
func (c *gqlCommit) status() gqlObject {
	var contexts []gqlObject
	seen := map[string]bool{}
	var failed, errored, pending bool
	for i := len(c.rm.Statuses) - 1; i >= 0; i-- {
		st := c.rm.Statuses[i]
		if st.SHA != c.oid || seen[st.Context] {
			continue
		}
		seen[st.Context] = true
		switch st.State {
		case "failure":
			failed = true
		case "error":
			errored = true
		case "pending":
			pending = true
		}
		contexts = append(contexts, &gqlPlain{name: "StatusContext", fields: map[string]any{
			"context": st.Context, "state": strings.ToUpper(st.State), "createdAt": gqlDateTime(st.CreatedAt),
			"description": st.Description, "targetUrl": st.TargetURL,
		}})
	}
	if len(contexts) == 0 {
		return nil
	}
	state := "SUCCESS"
	switch {
	case failed:
		state = "FAILURE"
	case errored:
		state = "ERROR"
	case pending:
		state = "PENDING"
	}
	return &gqlPlain{name: "Status", fields: map[string]any{"state": state, "contexts": contexts}}
}

// gqlMergedAt is a pull request's PullRequest.mergedAt: null until it is merged.
func gqlMergedAt(is *issue) any {
	if !is.Pull.Merged {
		return nil
	}
	return gqlDateTime(is.Pull.MergedAt)
}

// mergeCommit is a pull request's PullRequest.mergeCommit: null until it is merged.
func (r *gqlRepo) mergeCommit(is *issue) gqlObject {
	if !is.Pull.Merged || is.Pull.MergeCommitSHA == "" {
		return nil
	}
	return &gqlCommit{s: r.s, rm: r.rm, oid: is.Pull.MergeCommitSHA}
}
