package workcopy

import (
	"fmt"
	"path"
	"path/filepath"

	"github.com/go-git/go-git/v5"
)

// FileCommit commits one file of a git work tree alone (the rollout records the CLI writes into
// the control repo). The zero value, and one prepared without a commit or outside a work tree,
// commits nothing.
type FileCommit struct {
	repo *git.Repository
	wt   *git.Worktree
	path string // the file relative to the work tree's root
	opts *git.CommitOptions
}

// PrepareFileCommit checks, before anything is written, that file (relative to dir) can be
// committed alone: dir is in a git work tree (else no commit is made), nothing else is staged
// (a commit would take it along), and git knows who commits (user.name and user.email). With
// commit false it prepares no commit.
func PrepareFileCommit(dir, file string, commit bool) (*FileCommit, error) {
	if !commit {
		return &FileCommit{}, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r, err := Open(abs)
	if err != nil {
		return &FileCommit{}, nil // not in a git work tree: the file alone
	}
	wt, err := r.Worktree()
	if err != nil {
		return nil, fmt.Errorf("--control %s is a bare git repo: pass --no-commit and record the pause in a work tree", dir)
	}
	sub, err := DirIn(r, abs)
	if err != nil {
		return nil, err
	}
	rel := path.Join(sub, file)
	st, err := wt.Status()
	if err != nil {
		return nil, fmt.Errorf("reading the git status of %s: %w", dir, err)
	}
	for p, s := range st {
		if p != rel && s.Staging != git.Unmodified && s.Staging != git.Untracked {
			return nil, fmt.Errorf("%s has staged changes (%s, ...): commit or unstage them first, or pass --no-commit and commit %s yourself; nothing was written", dir, p, file)
		}
	}
	opts := &git.CommitOptions{}
	if err := opts.Validate(r); err != nil {
		return nil, fmt.Errorf("committing %s in %s: %w (set git config user.name and user.email, or pass --no-commit); nothing was written", file, dir, err)
	}
	return &FileCommit{repo: r, wt: wt, path: rel, opts: opts}, nil
}

// Commits reports whether c makes a commit (a work tree was found and a commit asked for).
func (c *FileCommit) Commits() bool { return c.wt != nil }

// Commit records the file's change (removed: its removal, which also deletes it from the work
// tree) as one commit, returning the commit and its branch ("" when HEAD is detached); a
// FileCommit that commits nothing returns "", "", nil.
func (c *FileCommit) Commit(msg string, removed bool) (commit, branch string, err error) {
	if c.wt == nil {
		return "", "", nil
	}
	if removed {
		_, err = c.wt.Remove(c.path)
	} else {
		_, err = c.wt.Add(c.path)
	}
	if err != nil {
		return "", "", fmt.Errorf("staging %s: %w", c.path, err)
	}
	h, err := c.wt.Commit(msg, c.opts)
	if err != nil {
		return "", "", fmt.Errorf("committing %s: %w", c.path, err)
	}
	if head, err := c.repo.Head(); err == nil && head.Name().IsBranch() {
		branch = head.Name().Short()
	}
	return h.String(), branch, nil
}
