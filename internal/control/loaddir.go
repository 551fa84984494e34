package control

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing/fstest"
)

// LoadDir reads the control repo in dir into memory and loads it with Load,
// so rendering never touches the disk again.
//
// Only platform.yaml, clusters/, workspaces/ and catalog/ are read. Every
// read goes through an os.Root, so no path can escape dir: a symlink whose
// target leaves dir is an issue and is never read; a symlink to a file
// inside dir is followed; a symlink to a directory is an issue. A missing or
// unreadable dir is an error wrapping ErrUnreadable, never an empty repo.
func LoadDir(dir string) (*Repo, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, errUnreadable("opening control repo "+dir, err)
	}
	defer root.Close()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, errUnreadable("resolving control repo "+dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, errUnreadable("resolving control repo "+dir, err)
	}
	r := &dirReader{root: root, real: real, files: fstest.MapFS{}}
	entries, err := r.readDir(".")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		switch e.Name() {
		case platformFile, "platform.yml", clustersDir, workspacesDir, catalogDir:
			if err := r.add(e.Name(), e); err != nil {
				return nil, err
			}
		}
	}
	return load(r.files, r.is)
}

// dirReader copies the relevant part of a control repo into memory.
type dirReader struct {
	root  *os.Root
	real  string // the control repo's absolute path, symlinks resolved
	files fstest.MapFS
	is    Issues
	// count and bytes are what was read so far, for the bounds (checked before reading).
	count, bytes int64
}

func (r *dirReader) readDir(name string) ([]fs.DirEntry, error) {
	entries, err := fs.ReadDir(r.root.FS(), name)
	if err != nil {
		return nil, errUnreadable("listing "+name, err)
	}
	return entries, nil
}

// add copies the entry at name (slash-separated, relative to the root).
func (r *dirReader) add(name string, e fs.DirEntry) error {
	switch {
	case e.Type()&fs.ModeSymlink != 0:
		return r.addSymlink(name)
	case e.IsDir():
		if e.Name() == ".git" {
			return nil
		}
		entries, err := r.readDir(name)
		if err != nil {
			return err
		}
		if len(entries) == 0 {
			r.files[name] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
		}
		for _, c := range entries {
			if err := r.add(path.Join(name, c.Name()), c); err != nil {
				return err
			}
		}
		return nil
	case e.Type().IsRegular():
		return r.addFile(name)
	default:
		r.is.Add(Position{File: name}, "remove it from the control repo", "not a regular file")
		return nil
	}
}

func (r *dirReader) addFile(name string) error {
	info, err := r.root.Stat(filepath.FromSlash(name))
	if err != nil {
		return errUnreadable("reading "+name, err)
	}
	r.count++
	r.bytes += info.Size()
	switch {
	case info.Size() > MaxFileBytes:
		return tooLarge(name, fmt.Sprintf("%d bytes, more than the %d a file may have", info.Size(), MaxFileBytes))
	case r.count > MaxFiles:
		return tooLarge(name, fmt.Sprintf("the control repo has more than %d files", MaxFiles))
	case r.bytes > MaxTotalBytes:
		return tooLarge(name, fmt.Sprintf("the control repo holds more than %d bytes", MaxTotalBytes))
	}
	data, err := r.root.ReadFile(filepath.FromSlash(name))
	if err != nil {
		return errUnreadable("reading "+name, err)
	}
	r.files[name] = &fstest.MapFile{Data: data, Mode: 0o644}
	return nil
}

// addSymlink follows a symlink only when its target stays inside the repo
// and is a regular file.
func (r *dirReader) addSymlink(name string) error {
	target, err := filepath.EvalSymlinks(filepath.Join(r.real, filepath.FromSlash(name)))
	if err != nil {
		r.is.Add(Position{File: name}, "point the symlink at an existing file inside the control repo, or replace it with the file",
			"symlink target does not exist")
		return nil
	}
	rel, err := filepath.Rel(r.real, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		r.is.Add(Position{File: name}, "the control repo must be self-contained: copy the file into the repo instead of linking to it",
			"symlink leaves the control repo")
		return nil
	}
	// Stat through the root: it refuses any link that escapes, even if the
	// tree changed since EvalSymlinks.
	fi, err := r.root.Stat(filepath.FromSlash(name))
	if err != nil {
		r.is.Add(Position{File: name}, "use a relative symlink that stays inside the control repo, or replace it with the file",
			"symlink cannot be followed: %v", err)
		return nil
	}
	switch {
	case fi.Mode().IsRegular():
		return r.addFile(name)
	case fi.IsDir():
		r.is.Add(Position{File: name}, fmt.Sprintf("replace the link with a real directory (its target is %s)", filepath.ToSlash(rel)),
			"symlinked directories are not followed")
	default:
		r.is.Add(Position{File: name}, "remove it from the control repo", "symlink to something that is not a regular file")
	}
	return nil
}
