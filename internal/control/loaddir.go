package control

import (
	"os"
)

// LoadDir reads the control repo in dir and loads it with Load, so rendering never touches
// the disk again (every file read is copied into the Repo).
//
// Only platform.yaml, clusters/, workspaces/ and catalog/ are read, through an os.Root, so no
// path can escape dir, and symlinks follow the one policy of every reader (see Load): a link
// to a regular file inside dir is read as that file; a link leaving dir, dangling, looping or
// naming a directory is an issue naming the link and its target, and is never read. A missing
// or unreadable dir is an error wrapping ErrUnreadable, never an empty repo.
func LoadDir(dir string) (*Repo, error) {
	return LoadDirWith(dir, Options{})
}

// LoadDirWith is LoadDir with options (see LoadWith).
func LoadDirWith(dir string, o Options) (*Repo, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, errUnreadable("opening control repo "+dir, err)
	}
	defer root.Close()
	return LoadWith(root.FS(), o)
}
