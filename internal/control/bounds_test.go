package control

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// aliasBomb is a few hundred bytes that a decoder expanding aliases turns into 9^9 strings.
const aliasBomb = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

// tooLargeIn loads fsys, which must be refused for its size, naming file.
func tooLargeIn(t *testing.T, fsys fstest.MapFS, file string) {
	t.Helper()
	repo, err := Load(fsys)
	require.Error(t, err)
	assert.Nil(t, repo, "nothing to render from")
	assert.True(t, errors.Is(err, ErrTooLarge), "%v", err)
	assert.Contains(t, err.Error(), file)
	assert.Contains(t, err.Error(), "nothing was rendered")
}

func TestAttackAliasBombInCatalogManifest(t *testing.T) {
	tooLargeIn(t, fixture(t, map[string]string{"catalog/podinfo/bomb.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n" + indent(aliasBomb)}), "catalog/podinfo/bomb.yaml")
}

func TestAttackAliasBombInClusterFile(t *testing.T) {
	tooLargeIn(t, fixture(t, map[string]string{"clusters/bomb.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: bomb}\nspec:\n  values:\n    x:\n" + indent(indent(aliasBomb))}), "clusters/bomb.yaml")
}

func TestAttackOversizeFile(t *testing.T) {
	tooLargeIn(t, fixture(t, map[string]string{"catalog/podinfo/huge.yaml": "# " + strings.Repeat("x", MaxFileBytes)}), "catalog/podinfo/huge.yaml")
}

func TestAttackTooManyFiles(t *testing.T) {
	m := fixture(t, nil)
	for i := range MaxFiles {
		m["catalog/podinfo/f/"+strconv.Itoa(i)+".txt"] = &fstest.MapFile{Data: []byte("x")}
	}
	repo, err := Load(m)
	require.Error(t, err)
	assert.Nil(t, repo)
	assert.True(t, errors.Is(err, ErrTooLarge), "%v", err)
	assert.Contains(t, err.Error(), "more than 50000 files")
}

// TestAttackOversizeFileIsNeverRead: LoadDir refuses a file by its size before reading it (a
// 16 GiB sparse file would otherwise be read into memory).
func TestAttackOversizeFileIsNeverRead(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(validDir)))
	f, err := os.Create(filepath.Join(dir, "catalog", "podinfo", "huge.yaml"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(16<<30))
	require.NoError(t, f.Close())
	repo, err := LoadDir(dir)
	require.Error(t, err)
	assert.Nil(t, repo)
	assert.True(t, errors.Is(err, ErrTooLarge), "%v", err)
	assert.Contains(t, err.Error(), "catalog/podinfo/huge.yaml: 17179869184 bytes")
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
