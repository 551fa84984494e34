package local

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// status is one entry of PATH/owner/repo.statuses.json: a commit status as GitHub keeps them
// (Flux's notification-controller posts one per Kustomization on the commit it applied).
type status struct {
	SHA       string    `json:"sha"`
	Context   string    `json:"context"`
	State     string    `json:"state"`
	CreatedAt time.Time `json:"createdAt"`
	// Description and TargetURL are GitHub's description and target_url: what the poster
	// says (Flux: the object's message) and links.
	Description string `json:"description,omitempty"`
	TargetURL   string `json:"targetUrl,omitempty"`
}

// ErrCorruptStatuses is returned when a statuses.json file cannot be decoded. The file is left
// exactly as it is.
var ErrCorruptStatuses = errors.New("corrupt statuses file")

func readStatuses(name string) ([]status, error) {
	var out []status
	_, err := decodeJSONFile(name, &out, true, ErrCorruptStatuses,
		"fleetbot left it untouched: fix the JSON (an array of commit statuses) or move it away to start with none")
	return out, err
}

// SetStatus posts a commit status on commit sha of owner/repo, as GitHub's
// POST /repos/{owner}/{repo}/statuses/{sha} does: for tests and demos standing in for Flux.
// state is success, pending, failure or error.
func (f *Forge) SetStatus(owner, repo, sha, context, state string) error {
	return f.PostStatus(owner, repo, sha, pr.CommitStatus{Context: context, State: state})
}

// PostStatus posts a commit status with its description and target URL (SetStatus).
func (f *Forge) PostStatus(owner, repo, sha string, st pr.CommitStatus) error {
	context, state := st.Context, st.State
	switch state {
	case pr.StatusSuccess, pr.StatusPending, pr.StatusFailure, pr.StatusError:
	default:
		return fmt.Errorf("repo %s/%s: commit status state %q: want success, pending, failure or error", owner, repo, state)
	}
	if sha == "" || context == "" {
		return fmt.Errorf("repo %s/%s: a commit status needs a commit and a context", owner, repo)
	}
	p, err := f.paths(owner, repo)
	if err != nil {
		return err
	}
	unlock := f.lockRepo(owner, repo)
	defer unlock()
	all, err := readStatuses(p.statuses)
	if err != nil {
		return err
	}
	all = append(all, status{SHA: sha, Context: context, State: state, CreatedAt: f.opts.Now().UTC(),
		Description: st.Description, TargetURL: st.TargetURL})
	b, err := encodeJSON(all)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", p.statuses, err)
	}
	if err := writeAtomic(p.statuses, b); err != nil {
		return fmt.Errorf("writing %s: %w", p.statuses, err)
	}
	return nil
}

// RolloutPRs implements pr.RolloutReader from pulls.json and statuses.json.
func (f *Forge) RolloutPRs(ctx context.Context, owner string, repos []string, defaultBranch, botBranch string) (map[string]pr.RolloutPR, error) {
	out := map[string]pr.RolloutPR{}
	for _, repo := range repos {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p, pulls, unlock, err := f.lockedPulls(owner, repo)
		var all []status
		head := ""
		if err == nil {
			all, err = readStatuses(p.statuses)
			head = f.headSHA(p, defaultBranch)
		}
		unlock()
		if err != nil {
			return nil, err
		}
		sort.Slice(pulls, func(a, b int) bool { return pulls[a].Number > pulls[b].Number })
		for _, q := range pulls {
			if q.Head != botBranch || q.State == pr.StateClosed || !pr.HasMarker(q.Body) {
				continue
			}
			rp := pr.RolloutPR{Number: q.Number, State: q.State, Source: pr.SourceOf(q.Body), Tree: pr.TreeOf(q.Body), Waves: pr.WavesOf(q.Body)}
			rp.RollbackOf, rp.FailedTree = pr.RollbackOf(q.Body)
			if q.State == pr.StateMerged {
				if q.Merged != nil {
					rp.MergedAt = *q.Merged
				}
				rp.MergeCommit = q.MergeCommit
				rp.Statuses = newestStatuses(all, q.MergeCommit)
				if head != "" && head != q.MergeCommit {
					rp.Head, rp.HeadStatuses = head, newestStatuses(all, head)
				}
			}
			out[repo] = rp
			break
		}
	}
	return out, nil
}

// newestStatuses returns the newest status of each context on sha, by context.
func newestStatuses(all []status, sha string) []pr.CommitStatus {
	if sha == "" {
		return nil
	}
	seen := map[string]bool{}
	var out []pr.CommitStatus
	for i := len(all) - 1; i >= 0; i-- {
		s := all[i]
		if s.SHA != sha || seen[s.Context] {
			continue
		}
		seen[s.Context] = true
		out = append(out, pr.CommitStatus{Context: s.Context, State: s.State, CreatedAt: s.CreatedAt,
			Description: s.Description, TargetURL: s.TargetURL})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Context < out[b].Context })
	return out
}

// combined is the combined state of a commit's statuses, as GitHub's combined status and
// StatusCheckRollup.state say it: failure when one failed, error when one errored, pending
// while one is pending, else success; "" when the commit has none.
func combined(statuses []pr.CommitStatus) string {
	if len(statuses) == 0 {
		return ""
	}
	var failed, errored, pending bool
	for _, s := range statuses {
		switch s.State {
		case pr.StatusFailure:
			failed = true
		case pr.StatusError:
			errored = true
		case pr.StatusPending:
			pending = true
		}
	}
	switch {
	case failed:
		return pr.StatusFailure
	case errored:
		return pr.StatusError
	case pending:
		return pr.StatusPending
	}
	return pr.StatusSuccess
}

// MergeHistory implements pr.Restorer from pulls.json and statuses.json: each repo's newest
// merged fleetbot pull requests (at most pr.HistoryDepth), oldest first, with the tree of the
// commit each left on the default branch.
func (f *Forge) MergeHistory(ctx context.Context, owner string, repos []string, defaultBranch, botBranch string) (map[string][]pr.MergedPR, error) {
	out := map[string][]pr.MergedPR{}
	for _, repo := range repos {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		merged, err := f.mergeHistory(owner, repo, defaultBranch, botBranch)
		if err != nil {
			return nil, err
		}
		if len(merged) > 0 {
			out[repo] = merged
		}
	}
	return out, nil
}

func (f *Forge) mergeHistory(owner, repo, defaultBranch, botBranch string) ([]pr.MergedPR, error) {
	p, pulls, unlock, err := f.lockedPulls(owner, repo)
	defer unlock()
	if err != nil {
		return nil, err
	}
	var merged []pull
	for _, q := range pulls {
		if q.Head == botBranch && q.Base == defaultBranch && q.State == pr.StateMerged && pr.HasMarker(q.Body) && q.MergeCommit != "" {
			merged = append(merged, q)
		}
	}
	if len(merged) == 0 {
		return nil, nil
	}
	sort.Slice(merged, func(a, b int) bool { return merged[a].Number < merged[b].Number })
	merged = merged[max(0, len(merged)-pr.HistoryDepth):]
	all, err := readStatuses(p.statuses)
	if err != nil {
		return nil, err
	}
	s, err := f.openStore(p)
	if err != nil {
		return nil, err
	}
	out := make([]pr.MergedPR, 0, len(merged))
	for _, q := range merged {
		m := pr.MergedPR{Number: q.Number, Source: pr.SourceOf(q.Body), Tree: pr.TreeOf(q.Body), MergeCommit: q.MergeCommit,
			Statuses: newestStatuses(all, q.MergeCommit)}
		m.RollbackOf, _ = pr.RollbackOf(q.Body)
		if q.Merged != nil {
			m.MergedAt = *q.Merged
		}
		c, err := object.GetCommit(s, plumbing.NewHash(q.MergeCommit))
		if err != nil {
			return nil, fmt.Errorf("repo %s: merge commit %s of PR #%d: %w", p.full, q.MergeCommit, q.Number, err)
		}
		m.MergeTree = c.TreeHash.String()
		out = append(out, m)
	}
	return out, nil
}

// CommitTree implements pr.Restorer: a commit of a tree the repo holds, on parent.
func (f *Forge) CommitTree(ctx context.Context, owner, repo string, tc pr.TreeCommit) (pr.Commit, error) {
	if err := ctx.Err(); err != nil {
		return pr.Commit{}, err
	}
	p, err := f.paths(owner, repo)
	if err != nil {
		return pr.Commit{}, err
	}
	defer f.lockRepo(owner, repo)()
	s, err := f.openStore(p)
	if err != nil {
		return pr.Commit{}, err
	}
	th := plumbing.NewHash(tc.Tree)
	if _, err := object.GetTree(s, th); err != nil {
		return pr.Commit{}, fmt.Errorf("repo %s: tree %s: %w", p.full, tc.Tree, err)
	}
	c := &object.Commit{Author: f.signature(), Committer: f.signature(), Message: tc.Message, TreeHash: th}
	if tc.Parent != "" {
		ph := plumbing.NewHash(tc.Parent)
		if _, err := object.GetCommit(s, ph); err != nil {
			return pr.Commit{}, fmt.Errorf("repo %s: parent %s: %w", p.full, tc.Parent, err)
		}
		c.ParentHashes = []plumbing.Hash{ph}
	}
	obj := s.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return pr.Commit{}, fmt.Errorf("repo %s: encoding commit: %w", p.full, err)
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return pr.Commit{}, fmt.Errorf("repo %s: writing commit: %w", p.full, err)
	}
	c.Hash = h
	return *toCommit(c), nil
}
