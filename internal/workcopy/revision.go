package workcopy

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5"
)

// Revision returns the commit checked out in the control repo's git work tree, or "" when
// dir is not inside one. When files under dir differ from that commit (edited, added or
// deleted and not committed) it is "<sha>-dirty", as git describe --dirty says: what is
// rendered is not that commit, and PR bodies must not claim it is. It only reads .git and the
// work tree: rendering itself never uses git.
func Revision(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	r, err := Open(abs)
	if err != nil {
		return ""
	}
	head, err := r.Head()
	if err != nil {
		return ""
	}
	sha := head.Hash().String()
	if dirty(r, abs) {
		sha += "-dirty"
	}
	return sha
}

// dirty reports whether any file under dir differs from the checked-out commit (ignored
// files aside). An unreadable status counts as dirty: claiming a commit is worse.
func dirty(r *git.Repository, dir string) bool {
	sub, err := DirIn(r, dir)
	if err != nil {
		return true
	}
	wt, err := r.Worktree()
	if err != nil {
		return false // bare: nothing to edit
	}
	st, err := wt.Status()
	if err != nil {
		return true
	}
	prefix := sub + "/"
	for path, s := range st {
		if s.Worktree == git.Unmodified && s.Staging == git.Unmodified {
			continue
		}
		if sub == "." || strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

// DirIn is dir relative to the root of the git work tree holding it ("." at the root).
func DirIn(repo *git.Repository, dir string) (string, error) {
	wt, err := repo.Worktree()
	if err != nil {
		return ".", nil // a bare clone: its tree is the control repo
	}
	root, err := filepath.EvalSymlinks(wt.Filesystem.Root())
	if err != nil {
		return "", fmt.Errorf("locating the git work tree of %s: %w", dir, err)
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", fmt.Errorf("--control %s: %w", dir, err)
	}
	rel, err := filepath.Rel(root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("--control %s is outside its git work tree %s", dir, root)
	}
	return filepath.ToSlash(rel), nil
}
