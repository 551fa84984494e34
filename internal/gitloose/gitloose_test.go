package gitloose_test

import (
	"compress/zlib"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/gitloose"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// TestObjectsReadByGit writes a blob, a tree and a commit with one Writer and checks that
// the git CLI and go-git read them back, that git fsck finds nothing wrong and that a branch
// set to the commit logs it.
func TestObjectsReadByGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	stored, err := gitloose.NewWriterLevel(zlib.NoCompression)
	require.NoError(t, err)
	for name, w := range map[string]*gitloose.Writer{"best speed": gitloose.NewWriter(), "stored": stored} {
		t.Run(name, func(t *testing.T) { checkReadByGit(t, w) })
	}
}

func TestBadLevel(t *testing.T) {
	_, err := gitloose.NewWriterLevel(42)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "git object writer")
}

func checkReadByGit(t *testing.T, w *gitloose.Writer) {
	repo := filepath.Join(t.TempDir(), "r.git")
	git(t, filepath.Dir(repo), "init", "-q", "--bare", repo)
	objects := filepath.Join(repo, "objects")

	blob, err := w.Write(objects, plumbing.BlobObject, []byte("hello\n"))
	require.NoError(t, err)
	assert.Equal(t, "ce013625030ba8dba906f756967f9e9ca394464a", blob.String(), "git's hash of hello\\n")
	tree := &object.Tree{Entries: []object.TreeEntry{{Name: "README.md", Mode: filemode.Regular, Hash: blob}}}
	to := &plumbing.MemoryObject{}
	require.NoError(t, tree.Encode(to))
	treeHash, err := w.WriteObject(objects, to)
	require.NoError(t, err)
	assert.Equal(t, to.Hash(), treeHash)
	sig := object.Signature{Name: "a", Email: "a@example.com", When: time.Unix(1700000000, 0).UTC()}
	c := &object.Commit{Author: sig, Committer: sig, Message: "first\n", TreeHash: treeHash}
	co := &plumbing.MemoryObject{}
	require.NoError(t, c.Encode(co))
	commit, err := w.WriteObject(objects, co)
	require.NoError(t, err)

	again, err := w.Write(objects, plumbing.BlobObject, []byte("hello\n"))
	require.NoError(t, err)
	assert.Equal(t, blob, again, "an object written twice keeps its hash")

	assert.Equal(t, "hello", git(t, repo, "cat-file", "-p", blob.String()))
	git(t, repo, "update-ref", "refs/heads/main", commit.String())
	git(t, repo, "fsck", "--strict", "--no-dangling")
	assert.Equal(t, "first", git(t, repo, "log", "--format=%s", "main"))
	assert.Equal(t, "README.md", git(t, repo, "ls-tree", "--name-only", "main"))

	st := filesystem.NewStorage(osfs.New(repo), cache.NewObjectLRUDefault())
	got, err := object.GetCommit(st, commit)
	require.NoError(t, err, "go-git reads the commit")
	f, err := got.File("README.md")
	require.NoError(t, err)
	content, err := f.Contents()
	require.NoError(t, err)
	assert.Equal(t, "hello\n", content)

	entries, err := os.ReadDir(filepath.Join(objects, blob.String()[:2]))
	require.NoError(t, err)
	for _, e := range entries {
		assert.False(t, strings.HasPrefix(e.Name(), "tmp_obj_"), "no temporary file left: %s", e.Name())
	}
}

// TestMissingObjectsDir fails with the directory named and writes nothing.
func TestMissingObjectsDir(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "absent", "objects")
	_, err := gitloose.NewWriter().Write(dir, plumbing.BlobObject, []byte("x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "blob")
	assert.Contains(t, err.Error(), dir)
	_, statErr := os.Stat(filepath.Join(root, "absent"))
	assert.True(t, os.IsNotExist(statErr))
}

// TestPoolReuses hands back the Writer it was given, and a new one when it is empty.
func TestPoolReuses(t *testing.T) {
	p := gitloose.NewPool(1)
	w := p.Get()
	require.NotNil(t, w)
	p.Put(w)
	p.Put(gitloose.NewWriter()) // full: dropped
	assert.Same(t, w, p.Get())
	assert.NotSame(t, w, p.Get(), "empty pool: a new writer")
}
