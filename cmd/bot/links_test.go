package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHostileLinksSamePolicyEveryFrontEnd: symlinks leaving the control repo (absolute, ../
// escape) and a link loop are refused with the link and its target named, the same way by
// the reader of a checkout (validate, apply) and the reader of git objects (check control);
// apply writes nothing to the forge.
func TestHostileLinksSamePolicyEveryFrontEnd(t *testing.T) {
	t.Parallel()
	dir := controlClone(t, nil)
	git := func(args ...string) { t.Helper(); gitIn(t, dir, args...) }
	git("checkout", "-q", "-b", "links")
	links := map[string]string{
		"clusters/abs.yaml":     "/etc/passwd",
		"clusters/up.yaml":      "../../outside.yaml",
		"workspaces/loop.yaml":  "loop2.yaml",
		"workspaces/loop2.yaml": "loop.yaml",
	}
	for p, target := range links {
		require.NoError(t, os.Symlink(target, filepath.Join(dir, filepath.FromSlash(p))))
	}
	git("add", "-A")
	git("commit", "-q", "-m", "links")
	want := []string{
		`clusters/abs.yaml: symlink leaves the control repo: its target "/etc/passwd" is absolute`,
		`clusters/up.yaml: symlink leaves the control repo: its target "../../outside.yaml" resolves outside it`,
		`workspaces/loop.yaml: symlink loop`,
	}

	code, out, errOut := cli(t, "check", "control", "--control", dir, "--base", "main", "--head", "links", "--author", "bob", "--author-teams", "platform")
	assert.Equal(t, 1, code, "%s\n%s", out, errOut)
	for _, w := range want {
		assert.Contains(t, out+errOut, w, "check control (git objects)")
	}

	code, out, errOut = cli(t, "validate", "--control", dir)
	assert.Equal(t, 1, code, "%s\n%s", out, errOut)
	for _, w := range want {
		assert.Contains(t, out+errOut, w, "validate (checkout)")
	}

	forge := t.TempDir()
	code, out, errOut = cli(t, "apply", "--control", dir, "--forge", "local:"+forge)
	assert.Equal(t, 1, code, "%s\n%s", out, errOut)
	entries, err := os.ReadDir(forge)
	require.NoError(t, err)
	var written []string
	for _, e := range entries {
		if e.Name() != ".lock" && e.Name() != ".fleetbot.lock" {
			written = append(written, e.Name())
		}
	}
	assert.Empty(t, written, "apply wrote nothing")
}
