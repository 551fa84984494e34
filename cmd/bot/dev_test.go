package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDevGenerateWritesAValidRepo(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "fleet")
	code, stdout, stderr := cli(t, "dev", "generate", "--clusters", "30", "--workspaces", "3", "--apps", "8", "--out", out)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "generated 30 cluster(s), 3 workspace(s) and 8 app(s)")

	code, stdout, stderr = cli(t, "validate", "--control", out)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "30 cluster repo(s), 3 workspace repo(s), 8 app(s)")

	again := filepath.Join(t.TempDir(), "again")
	code, _, stderr = cli(t, "dev", "generate", "--clusters", "30", "--workspaces", "3", "--apps", "8", "--out", again)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, readFiles(t, out), readFiles(t, again), "the same options and seed give the same files")
}

func TestDevGenerateBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("x"), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "generate"}, "--out is required"},
		{[]string{"dev", "generate", "--out", dir}, "is not empty"},
		{[]string{"dev", "generate", "--clusters", "0", "--out", filepath.Join(dir, "new")}, "at least 1"},
	} {
		code, _, stderr := cli(t, tc.args...)
		assert.Equal(t, 1, code, "%v", tc.args)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}
	assert.Equal(t, map[string]string{"keep.txt": "x"}, readFiles(t, dir), "a refused generate writes nothing")
}
