package workcopy

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// ReadDir reads a repo checkout into memory (every regular file but
// .git), so kustomize never touches the disk or the network. Symlinks are
// not followed. The control repo's bounds apply (control.MaxFileBytes a
// file, checked before reading, control.MaxFiles, control.MaxTotalBytes):
// a workspace or cluster repo is written by its admins, and check runs in CI
// on their pull requests.
func ReadDir(dir string) (map[string][]byte, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	defer root.Close()
	files := map[string][]byte{}
	var count int
	var total int64
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		count++
		total += info.Size()
		switch {
		case info.Size() > control.MaxFileBytes:
			return fmt.Errorf("%w: %s: %d bytes, more than the %d a file may have; nothing was checked", control.ErrTooLarge, p, info.Size(), control.MaxFileBytes)
		case count > control.MaxFiles:
			return fmt.Errorf("%w: %s: the repo has more than %d files; nothing was checked", control.ErrTooLarge, p, control.MaxFiles)
		case total > control.MaxTotalBytes:
			return fmt.Errorf("%w: %s: the repo holds more than %d bytes; nothing was checked", control.ErrTooLarge, p, control.MaxTotalBytes)
		}
		f, err := root.Open(filepath.FromSlash(p))
		if err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(f, control.MaxFileBytes+1))
		f.Close()
		if err != nil {
			return err
		}
		if len(b) > control.MaxFileBytes {
			return fmt.Errorf("%w: %s grew past %d bytes while read; nothing was checked", control.ErrTooLarge, p, control.MaxFileBytes)
		}
		files[p] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	return files, nil
}
