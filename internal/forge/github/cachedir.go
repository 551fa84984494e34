package github

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// ErrUnsafeCache is returned for a snapshot cache directory or file another user could have
// written: fleetbot decides what to write to GitHub from that cache, so it must be the user's
// own and writable by nobody else.
var ErrUnsafeCache = errors.New("unsafe snapshot cache")

// PrepareCacheDir creates dir (and its parents) with mode 0700 when missing, and refuses one
// that is not owned by the current user or is writable by its group or others.
func PrepareCacheDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating the snapshot cache %s: %w", dir, err)
	}
	return checkOwned(dir, true)
}

// checkOwned refuses a path that is a symlink, not owned by the current user, or writable by
// group or others; dir says whether it must be a directory.
func checkOwned(path string, dir bool) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symlink; point --github-cache at a real directory", ErrUnsafeCache, path)
	case dir && !fi.IsDir():
		return fmt.Errorf("%w: %s is not a directory", ErrUnsafeCache, path)
	case !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a regular file", ErrUnsafeCache, path)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%w: %s is writable by other users (mode %s); run chmod go-w %s, or delete it (it is only a cache)",
			ErrUnsafeCache, path, fi.Mode().Perm(), path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d); run chown or delete it (it is only a cache)",
			ErrUnsafeCache, path, st.Uid, os.Getuid())
	}
	return nil
}
