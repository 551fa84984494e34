package local

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/fleetbot-io/fleetbot/internal/pr"
)

// pull is one entry of PATH/owner/repo.pulls.json.
type pull struct {
	Number   int        `json:"number"`
	State    string     `json:"state"`
	Head     string     `json:"head"`
	Base     string     `json:"base"`
	Title    string     `json:"title"`
	Body     string     `json:"body"`
	HeadSHA  string     `json:"headSha,omitempty"`
	Labels   []string   `json:"labels,omitempty"`
	Comments []comment  `json:"comments,omitempty"`
	Created  time.Time  `json:"createdAt"`
	Updated  time.Time  `json:"updatedAt"`
	Closed   *time.Time `json:"closedAt,omitempty"`
	Merged   *time.Time `json:"mergedAt,omitempty"`
	// MergeCommit is the default-branch head when the merge was recorded: the commit Flux
	// applies with the change (what a rollout wave reads statuses of).
	MergeCommit string `json:"mergeCommit,omitempty"`
}

type comment struct {
	Body string    `json:"body"`
	At   time.Time `json:"createdAt"`
}

func (q *pull) toPR(full string) *pr.PullRequest {
	return &pr.PullRequest{
		Number: q.Number, State: q.State, Head: q.Head, Base: q.Base,
		Title: q.Title, Body: q.Body, HeadSHA: q.HeadSHA, URL: fmt.Sprintf("%s#%d", full, q.Number),
		CreatedAt: q.Created,
	}
}

// ErrCorruptPulls is returned when a pulls.json file cannot be decoded. The
// file is left exactly as it is.
var ErrCorruptPulls = errors.New("corrupt pulls file")

func readPulls(name string) ([]pull, error) {
	var pulls []pull
	found, err := decodeJSONFile(name, &pulls, true, ErrCorruptPulls,
		"fleetbot left it untouched: fix the JSON (an array of pull requests) or move it away to start with no pull requests")
	if !found || err != nil {
		return nil, err
	}
	seen := map[int]bool{}
	for _, q := range pulls {
		switch {
		case q.Number <= 0 || seen[q.Number]:
			return nil, fmt.Errorf("%w %s: invalid or duplicate number %d; fleetbot left it untouched", ErrCorruptPulls, name, q.Number)
		case q.State != pr.StateOpen && q.State != pr.StateClosed && q.State != pr.StateMerged:
			return nil, fmt.Errorf("%w %s: #%d has state %q, want open, closed or merged; fleetbot left it untouched", ErrCorruptPulls, name, q.Number, q.State)
		}
		seen[q.Number] = true
	}
	return pulls, nil
}

func writePulls(name string, pulls []pull) error {
	if pulls == nil {
		pulls = []pull{}
	}
	b, err := encodeJSON(pulls)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	if err := writeAtomic(name, b); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// lockedPulls locks the repo and reads its pull requests. Callers defer
// unlock even when err is set (it is a no-op when nothing was locked).
func (f *Forge) lockedPulls(owner, repo string) (p repoPaths, pulls []pull, unlock func(), err error) {
	p, err = f.paths(owner, repo)
	if err != nil {
		return p, nil, func() {}, err
	}
	unlock = f.lockRepo(owner, repo)
	pulls, err = readPulls(p.pulls)
	return p, pulls, unlock, err
}

// editPull loads pulls.json, lets fn change the pull request numbered n
// (fn reports whether it changed anything) and writes the file back only on
// a change.
func (f *Forge) editPull(owner, repo string, n int, fn func(q *pull, p repoPaths) (bool, error)) error {
	p, pulls, unlock, err := f.lockedPulls(owner, repo)
	defer unlock()
	if err != nil {
		return err
	}
	for i := range pulls {
		if pulls[i].Number != n {
			continue
		}
		changed, err := fn(&pulls[i], p)
		if err != nil {
			return fmt.Errorf("repo %s: PR #%d: %w", p.full, n, err)
		}
		if !changed {
			return nil
		}
		pulls[i].Updated = f.opts.Now().UTC()
		return writePulls(p.pulls, pulls)
	}
	return fmt.Errorf("repo %s: PR #%d: %w", p.full, n, pr.ErrNotFound)
}

// headSHA is the commit a branch points at, or "".
func (f *Forge) headSHA(p repoPaths, branch string) string {
	s, err := f.openStore(p)
	if err != nil {
		return ""
	}
	c, err := resolveBranch(s, branch)
	if err != nil || c == nil {
		return ""
	}
	return c.Hash.String()
}

// OpenPR implements pr.Forge. Like GitHub, it refuses a second open pull
// request for the same head and base.
func (f *Forge) OpenPR(ctx context.Context, owner, repo string, np pr.NewPR) (*pr.PullRequest, error) {
	p, pulls, unlock, err := f.lockedPulls(owner, repo)
	defer unlock()
	if err != nil {
		return nil, err
	}
	max := 0
	for _, q := range pulls {
		if q.State == pr.StateOpen && q.Head == np.Head && q.Base == np.Base {
			return nil, fmt.Errorf("repo %s: a pull request from %s to %s is already open (#%d)", p.full, np.Head, np.Base, q.Number)
		}
		if q.Number > max {
			max = q.Number
		}
	}
	head := f.headSHA(p, np.Head)
	if head == "" {
		return nil, fmt.Errorf("repo %s: opening PR: branch %s: %w", p.full, np.Head, pr.ErrNotFound)
	}
	now := f.opts.Now().UTC()
	q := pull{
		Number: max + 1, State: pr.StateOpen, Head: np.Head, Base: np.Base, Title: np.Title, Body: np.Body,
		HeadSHA: head, Labels: np.Labels, Created: now, Updated: now,
	}
	pulls = append(pulls, q)
	if err := writePulls(p.pulls, pulls); err != nil {
		return nil, err
	}
	return q.toPR(p.full), nil
}

// EnableAutoMerge implements pr.Forge. The local forge has no auto-merge (a human merges the
// bot branch with git; OpenPR ignores NewPR.AutoMerge too), so it enables nothing and never
// merges; it checks what GitHub would: the pull request is open and its branch is still at
// a.HeadSHA (a moved head is ErrRefMoved, as GitHub refuses expectedHeadOid).
func (f *Forge) EnableAutoMerge(ctx context.Context, owner, repo string, number int, a pr.AutoMergeRequest) (bool, error) {
	return false, f.editPull(owner, repo, number, func(q *pull, p repoPaths) (bool, error) {
		if q.State != pr.StateOpen {
			return false, fmt.Errorf("cannot enable auto-merge on a %s pull request", q.State)
		}
		if head := f.headSHA(p, q.Head); head != a.HeadSHA {
			return false, fmt.Errorf("auto-merge not enabled: %s is at %s, not %s, the commit fleetbot pushed: %w; review and merge it by hand",
				q.Head, head[:min(len(head), 7)], a.HeadSHA[:min(len(a.HeadSHA), 7)], pr.ErrRefMoved)
		}
		return false, nil
	})
}

// UpdatePR implements pr.Forge.
func (f *Forge) UpdatePR(ctx context.Context, owner, repo string, number int, title, body string) error {
	return f.editPull(owner, repo, number, func(q *pull, p repoPaths) (bool, error) {
		if q.State != pr.StateOpen {
			return false, fmt.Errorf("cannot update a %s pull request", q.State)
		}
		head := f.headSHA(p, q.Head)
		if q.Title == title && q.Body == body && q.HeadSHA == head {
			return false, nil
		}
		q.Title, q.Body, q.HeadSHA = title, body, head
		return true, nil
	})
}

// ClosePR implements pr.Forge.
func (f *Forge) ClosePR(ctx context.Context, owner, repo string, number int, text string) error {
	return f.editPull(owner, repo, number, func(q *pull, p repoPaths) (bool, error) {
		if q.State != pr.StateOpen {
			return false, fmt.Errorf("cannot close a %s pull request", q.State)
		}
		now := f.opts.Now().UTC()
		if text != "" {
			q.Comments = append(q.Comments, comment{Body: text, At: now})
		}
		if h := f.headSHA(p, q.Head); h != "" {
			q.HeadSHA = h
		}
		q.State, q.Closed = pr.StateClosed, &now
		return true, nil
	})
}

// Comment implements pr.Forge.
func (f *Forge) Comment(ctx context.Context, owner, repo string, number int, text string) error {
	return f.editPull(owner, repo, number, func(q *pull, _ repoPaths) (bool, error) {
		q.Comments = append(q.Comments, comment{Body: text, At: f.opts.Now().UTC()})
		return true, nil
	})
}

// RecordMerged implements pr.MergeRecorder: it records a merge done with
// plain git, and the head commit that was merged.
func (f *Forge) RecordMerged(ctx context.Context, owner, repo string, number int) error {
	return f.editPull(owner, repo, number, func(q *pull, p repoPaths) (bool, error) {
		if q.State == pr.StateMerged {
			return false, nil
		}
		if h := f.headSHA(p, q.Head); h != "" {
			q.HeadSHA = h
		}
		now := f.opts.Now().UTC()
		q.State, q.Merged, q.Closed = pr.StateMerged, &now, &now
		q.MergeCommit = f.headSHA(p, q.Base)
		return true, nil
	})
}

// PullRequests returns every pull request of a repo, in file order: for
// tests and status output.
func (f *Forge) PullRequests(owner, repo string) ([]*pr.PullRequest, error) {
	p, pulls, unlock, err := f.lockedPulls(owner, repo)
	defer unlock()
	if err != nil {
		return nil, err
	}
	out := make([]*pr.PullRequest, 0, len(pulls))
	for i := range pulls {
		out = append(out, pulls[i].toPR(p.full))
	}
	return out, nil
}

// Comments returns the comments of one pull request.
func (f *Forge) Comments(owner, repo string, number int) ([]string, error) {
	p, pulls, unlock, err := f.lockedPulls(owner, repo)
	defer unlock()
	if err != nil {
		return nil, err
	}
	for _, q := range pulls {
		if q.Number == number {
			out := make([]string, 0, len(q.Comments))
			for _, c := range q.Comments {
				out = append(out, c.Body)
			}
			return out, nil
		}
	}
	return nil, fmt.Errorf("repo %s: PR #%d: %w", p.full, number, pr.ErrNotFound)
}

// MergeMethod is how Merge lands a pull request.
type MergeMethod string

// Merge methods, as on GitHub.
const (
	MergeFastForward MergeMethod = "fast-forward"
	MergeCommit      MergeMethod = "merge"
	MergeSquash      MergeMethod = "squash"
)

// ErrBaseMoved is returned by Merge when the default branch moved since the
// pull request was built.
var ErrBaseMoved = errors.New("base branch moved since the pull request was built")

// Merge merges an open pull request the way the GitHub button would (for
// tests, demos and the README's "merge by hand"): the head branch is kept,
// the PR is recorded merged. It only merges a PR built on the current head
// of its base branch; anything else needs git.
func (f *Forge) Merge(ctx context.Context, owner, repo string, number int, method MergeMethod) error {
	p, err := f.paths(owner, repo)
	if err != nil {
		return err
	}
	unlock := f.lockRepo(owner, repo)
	var q *pull
	pulls, err := readPulls(p.pulls)
	if err == nil {
		for i := range pulls {
			if pulls[i].Number == number {
				q = &pulls[i]
			}
		}
		if q == nil {
			err = fmt.Errorf("repo %s: PR #%d: %w", p.full, number, pr.ErrNotFound)
		} else if q.State != pr.StateOpen {
			err = fmt.Errorf("repo %s: PR #%d is %s", p.full, number, q.State)
		}
	}
	if err == nil {
		err = f.land(p, q, method)
	}
	unlock()
	if err != nil {
		return err
	}
	return f.RecordMerged(ctx, owner, repo, number)
}

func (f *Forge) land(p repoPaths, q *pull, method MergeMethod) error {
	s, err := f.openStore(p)
	if err != nil {
		return err
	}
	head, err := resolveBranch(s, q.Head)
	if err != nil {
		return err
	}
	base, err := resolveBranch(s, q.Base)
	if err != nil {
		return err
	}
	if head == nil || base == nil {
		return fmt.Errorf("repo %s: PR #%d: branch %s or %s is missing", p.full, q.Number, q.Head, q.Base)
	}
	ok, err := base.IsAncestor(head)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("repo %s: PR #%d: %w; run fleetbot apply to rebuild it, or merge with git", p.full, q.Number, ErrBaseMoved)
	}
	target := head.Hash
	if method != MergeFastForward {
		sig := object.Signature{Name: "merger", Email: "merger@users.noreply.local", When: f.opts.Now()}
		c := &object.Commit{Author: sig, Committer: sig, TreeHash: head.TreeHash, ParentHashes: []plumbing.Hash{base.Hash}}
		switch method {
		case MergeCommit:
			c.ParentHashes = append(c.ParentHashes, head.Hash)
			c.Message = fmt.Sprintf("Merge pull request #%d from %s\n\n%s\n", q.Number, q.Head, q.Title)
		case MergeSquash:
			c.Message = fmt.Sprintf("%s (#%d)\n", q.Title, q.Number)
		default:
			return fmt.Errorf("unknown merge method %q", method)
		}
		obj := s.NewEncodedObject()
		if err := c.Encode(obj); err != nil {
			return err
		}
		if target, err = s.SetEncodedObject(obj); err != nil {
			return err
		}
	}
	return setBranch(s, p.full, q.Base, target.String(), base.Hash.String())
}
