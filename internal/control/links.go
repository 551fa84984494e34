package control

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// maxLinkHops bounds how many symlinks one path may go through (Linux allows 40): a longer
// chain is taken for a loop.
const maxLinkHops = 40

// linkError is why a symlink of the control repo is refused; the loader records it as an
// issue at the link's path.
type linkError struct {
	target string // the link's own target, as written in the repo
	msg    string
	hint   string
}

// The one symlink policy of the control repo, whatever reads it (a directory, a git tree, the
// GitHub API): a symlink is followed when it resolves, inside the repo, to a regular file; a
// symlink that leaves the repo (an absolute target, a ../ escape), a dangling link, a loop
// and a link to a directory are refused, each with the path and the link's target. Targets
// are resolved component by component with Lstat and ReadLink on fsys, so no link anywhere on
// the way is followed unchecked. fsys must implement fs.ReadLinkFS (os.DirFS, os.Root.FS and
// fstest.MapFS do; a MapFile with fs.ModeSymlink holds its target as Data).
//
// resolveLink returns the slash-separated path, relative to the repo root, of the regular file
// the symlink at name resolves to.
func resolveLink(fsys fs.FS, name string) (string, *linkError) {
	first, err := fs.ReadLink(fsys, name)
	if err != nil {
		return "", &linkError{msg: fmt.Sprintf("symlink cannot be read: %v", err),
			hint: "replace the symlink with the file itself"}
	}
	hops := 0
	var resolve func(dir, target string, rest []string) (string, *linkError)
	resolve = func(dir, target string, rest []string) (string, *linkError) {
		hops++
		switch {
		case hops > maxLinkHops:
			return "", &linkError{target: first, msg: "symlink loop: more than 40 links to follow",
				hint: "point the symlink straight at a file inside the control repo"}
		case target == "":
			return "", &linkError{target: first, msg: "symlink with an empty target",
				hint: "point the symlink at a file inside the control repo, or replace it with the file"}
		case strings.HasPrefix(target, "/") || (len(target) > 1 && target[1] == ':'):
			return "", &linkError{target: first, msg: fmt.Sprintf("symlink leaves the control repo: its target %q is absolute", first),
				hint: "the control repo must be self-contained: copy the file into the repo instead of linking to it"}
		}
		joined := path.Join(append([]string{dir, target}, rest...)...)
		if joined == ".." || strings.HasPrefix(joined, "../") {
			return "", &linkError{target: first, msg: fmt.Sprintf("symlink leaves the control repo: its target %q resolves outside it", first),
				hint: "the control repo must be self-contained: copy the file into the repo instead of linking to it"}
		}
		if joined == "." {
			return "", &linkError{target: first, msg: fmt.Sprintf("symlink to the control repo's root (target %q)", first),
				hint: "point the symlink at a file inside the control repo, or replace it with the file"}
		}
		parts := strings.Split(joined, "/")
		cur := ""
		for i, p := range parts {
			cur = path.Join(cur, p)
			fi, err := fs.Lstat(fsys, cur)
			if errors.Is(err, fs.ErrNotExist) {
				return "", &linkError{target: first, msg: fmt.Sprintf("symlink target %q does not exist in the control repo", first),
					hint: "point the symlink at an existing file inside the control repo, or replace it with the file"}
			}
			if err != nil {
				return "", &linkError{target: first, msg: fmt.Sprintf("symlink target %q cannot be read: %v", first, err),
					hint: "replace the symlink with the file itself"}
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				next, err := fs.ReadLink(fsys, cur)
				if err != nil {
					return "", &linkError{target: first, msg: fmt.Sprintf("symlink %s on the way to %q cannot be read: %v", cur, first, err),
						hint: "replace the symlink with the file itself"}
				}
				return resolve(path.Dir(cur), next, parts[i+1:])
			}
			last := i == len(parts)-1
			switch {
			case !last && !fi.IsDir():
				return "", &linkError{target: first, msg: fmt.Sprintf("symlink target %q does not exist in the control repo (%s is not a directory)", first, cur),
					hint: "point the symlink at an existing file inside the control repo, or replace it with the file"}
			case last && fi.IsDir():
				return "", &linkError{target: first, msg: fmt.Sprintf("symlinked directories are not followed (target %q)", first),
					hint: fmt.Sprintf("replace the link with a real directory (its target is %s)", cur)}
			case last && !fi.Mode().IsRegular():
				return "", &linkError{target: first, msg: fmt.Sprintf("symlink to something that is not a regular file (target %q)", first),
					hint: "remove it from the control repo"}
			}
		}
		return joined, nil
	}
	return resolve(path.Dir(name), first, nil)
}
