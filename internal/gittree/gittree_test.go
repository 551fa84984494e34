package gittree

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEmptyTree(t *testing.T) {
	h, err := Hash(Listing{})
	require.NoError(t, err)
	assert.Equal(t, EmptyTree, h)
}

func TestBlobHashMatchesGit(t *testing.T) {
	// `printf 'hello\n' | git hash-object --stdin`
	assert.Equal(t, "ce013625030ba8dba906f756967f9e9ca394464a", BlobHash([]byte("hello\n")))
}

// TestHashMatchesGitWriteTree builds the same tree with the git CLI and
// compares hashes, including git's "directories sort as name/" rule.
func TestHashMatchesGitWriteTree(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	files := map[string]string{
		"README.md":               "# hi\n",
		"a.b":                     "x",
		"a/b.yaml":                "y",
		"a-b/c":                   "z",
		"platform/metallb.yaml":   "kind: A\n",
		"platform/sub/deep/x.txt": "deep",
		".github/CODEOWNERS":      "* @acme/platform\n",
	}
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
		return strings.TrimSpace(string(out))
	}
	run("init", "-q")
	l := Listing{}
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
		l[p] = Entry{Mode: ModeFile, Hash: BlobHash([]byte(c))}
	}
	require.NoError(t, os.Chmod(filepath.Join(dir, "a.b"), 0o755))
	l["a.b"] = Entry{Mode: ModeExec, Hash: l["a.b"].Hash}
	run("add", "-A")
	want := run("write-tree")

	got, err := Hash(l)
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestTreesRejectsConflictsAndBadPaths(t *testing.T) {
	h := BlobHash(nil)
	for name, l := range map[string]Listing{
		"file and dir": {"a": {ModeFile, h}, "a/b": {ModeFile, h}},
		"dotdot":       {"../x": {ModeFile, h}},
		"absolute":     {"/x": {ModeFile, h}},
		"dot git":      {".git/config": {ModeFile, h}},
		"bad hash":     {"x": {ModeFile, "nope"}},
		"no mode":      {"x": {0, h}},
	} {
		_, err := Hash(l)
		assert.Error(t, err, name)
	}
}
