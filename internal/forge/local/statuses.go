package local

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

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
