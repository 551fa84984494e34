package control

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostileLinks are the symlinks every reader of the control repo must refuse, each with the
// issue it must report at the link's path: the message names the link's target.
var hostileLinks = []struct {
	name, link, target, msg string
}{
	{"absolute", "clusters/abs.yaml", "/etc/passwd", `symlink leaves the control repo: its target "/etc/passwd" is absolute`},
	{"../ escape", "clusters/up.yaml", "../../outside/secret.yaml", `symlink leaves the control repo: its target "../../outside/secret.yaml" resolves outside it`},
	{"escape through an in-repo link", "catalog/podinfo/hop.yaml", "../../clusters/up2.yaml", `its target "../../clusters/up2.yaml"`},
	{"loop", "workspaces/loop.yaml", "loop2.yaml", `symlink loop`},
	{"dangling", "workspaces/gone.yaml", "nowhere.yaml", `symlink target "nowhere.yaml" does not exist in the control repo`},
	{"directory", "catalog/podinfo/base2", "base", `symlinked directories are not followed (target "base")`},
}

// extraLinks complete hostileLinks: the second half of the loop and the link the escape
// goes through.
var extraLinks = map[string]string{
	"workspaces/loop2.yaml": "loop.yaml",
	"clusters/up2.yaml":     "../../../etc/shadow",
}

// TestHostileLinksEveryReader: the directory reader (LoadDir, through os.Root) and the
// in-memory reader of git trees (Load over an fstest.MapFS whose links carry their target, as
// the GitHub and git-object readers build it) refuse the same links with the same issues,
// naming the link and its target, and never read what a link points at outside the repo.
func TestHostileLinksEveryReader(t *testing.T) {
	readers := map[string]func(t *testing.T) error{
		"LoadDir": func(t *testing.T) error {
			dir := copyFixture(t)
			for _, h := range hostileLinks {
				require.NoError(t, os.Symlink(h.target, filepath.Join(dir, filepath.FromSlash(h.link))))
			}
			for link, target := range extraLinks {
				require.NoError(t, os.Symlink(target, filepath.Join(dir, filepath.FromSlash(link))))
			}
			_, err := LoadDir(dir)
			return err
		},
		"Load(git tree)": func(t *testing.T) error {
			fsys := fstest.MapFS{}
			require.NoError(t, fs.WalkDir(os.DirFS(validDir), ".", func(p string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				b, err := fs.ReadFile(os.DirFS(validDir), p)
				fsys[p] = &fstest.MapFile{Data: b, Mode: 0o644}
				return err
			}))
			for _, h := range hostileLinks {
				fsys[h.link] = &fstest.MapFile{Data: []byte(h.target), Mode: fs.ModeSymlink | 0o777}
			}
			for link, target := range extraLinks {
				fsys[link] = &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
			}
			_, err := Load(fsys)
			return err
		},
	}
	for name, read := range readers {
		t.Run(name, func(t *testing.T) {
			err := read(t)
			var is Issues
			require.True(t, errors.As(err, &is), "want issues, got %v", err)
			for _, h := range hostileLinks {
				assertIssue(t, is, name+" "+h.name, want{pos: h.link, msg: h.msg})
			}
			assert.NotContains(t, err.Error(), "root:", "nothing outside the repo is read")
		})
	}
}

// TestInRepoLinksEveryReader: a link to a regular file inside the repo is read as that file
// by every reader, wherever the file is (here: the repo root, which fleetbot does not read
// otherwise).
func TestInRepoLinksEveryReader(t *testing.T) {
	dir := copyFixture(t)
	dep := filepath.Join(dir, "catalog", "podinfo", "base", "deployment.yaml")
	content, err := os.ReadFile(dep)
	require.NoError(t, err)
	require.NoError(t, os.Rename(dep, filepath.Join(dir, "deployment.yaml")))
	require.NoError(t, os.Symlink("../../../deployment.yaml", dep))

	fromDir, err := LoadDir(dir)
	require.NoError(t, err)
	fsys := fstest.MapFS{}
	require.NoError(t, fs.WalkDir(os.DirFS(dir), ".", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil || d.IsDir():
			return err
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(filepath.Join(dir, p))
			fsys[p] = &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
			return err
		}
		b, err := os.ReadFile(filepath.Join(dir, p))
		fsys[p] = &fstest.MapFile{Data: b, Mode: 0o644}
		return err
	}))
	fromTree, err := Load(fsys)
	require.NoError(t, err)
	for name, r := range map[string]*Repo{"LoadDir": fromDir, "Load(git tree)": fromTree} {
		assert.Equal(t, string(content), string(r.App("podinfo").Files["base/deployment.yaml"]), "%s follows the link inside the repo", name)
	}
}
