// Package workcopy reads git working copies and clones of the control repo and of target
// repos: the commit a work tree holds (and whether it is dirty), a commit's tree as an fs.FS
// straight from git objects, a directory's place in its clone, and a checkout's files read
// into memory within the control repo's bounds; and it commits one file alone in a work tree
// (FileCommit, the CLI's rollout records). It holds no product rules.
package workcopy

import (
	"fmt"
	"io/fs"
	"testing/fstest"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// SubTrees narrows the trees of a commit pair to dir, the control repo's directory inside the
// clone (unchanged when dir is the clone's root).
func SubTrees(repo *git.Repository, dir string, base, head fs.FS) (fs.FS, fs.FS, error) {
	sub, err := DirIn(repo, dir)
	if err != nil || sub == "." {
		return base, head, err
	}
	if base, err = fs.Sub(base, sub); err != nil {
		return nil, nil, err
	}
	head, err = fs.Sub(head, sub)
	return base, head, err
}

// TreeFS reads the tree of a commit of repo as an fs.FS, straight from git objects: no
// checkout, no work tree; it returns the commit's hash too. Symlinks stay links (their target
// as content) for control.Load's one symlink policy; submodules are skipped.
func TreeFS(repo *git.Repository, ref string) (fs.FS, string, error) {
	h, err := repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return nil, "", fmt.Errorf("resolving %q in the control repo: %w", ref, err)
	}
	c, err := repo.CommitObject(*h)
	if err != nil {
		return nil, "", fmt.Errorf("reading commit %s: %w", h, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, "", fmt.Errorf("reading the tree of %s: %w", h, err)
	}
	out := fstest.MapFS{}
	err = tree.Files().ForEach(func(f *object.File) error {
		switch f.Mode {
		case filemode.Submodule:
			return nil
		case filemode.Symlink:
			// The link's target, for control.Load's one symlink policy.
			target, err := f.Contents()
			if err != nil {
				return fmt.Errorf("reading symlink %s at %s: %w", f.Name, h, err)
			}
			out[f.Name] = &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
			return nil
		}
		data, err := f.Contents()
		if err != nil {
			return fmt.Errorf("reading %s at %s: %w", f.Name, h, err)
		}
		out[f.Name] = &fstest.MapFile{Data: []byte(data), Mode: 0o644}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, h.String(), nil
}

// Open opens the git clone holding dir (dir may be a directory inside it, and a linked
// worktree), for reading commits of the control repo straight from git objects.
func Open(dir string) (*git.Repository, error) {
	return git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true, EnableDotGitCommonDir: true})
}

// MergeParent returns the first parent of commit sha when it is a merge commit: the base
// GitHub merged a pull request into when sha is the pull request's merge commit.
func MergeParent(repo *git.Repository, sha string) (string, bool) {
	c, err := repo.CommitObject(plumbing.NewHash(sha))
	if err != nil || c.NumParents() != 2 {
		return "", false
	}
	return c.ParentHashes[0].String(), true
}
