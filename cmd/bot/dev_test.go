package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// The workspace GitRepository URL in flux/ follows the forge: GitHub's web
// root (GitHub Enterprise's from the API URL), the local forge's git-serve
// address, or --git-url.
func TestRenderGitURLFollowsForge(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"no forge: what an apply on GitHub writes", nil, "", "url: https://github.com/acme/workspace-payments"},
		{"explicit local forge", []string{"--forge", "local:" + t.TempDir()}, "", "url: http://127.0.0.1:8480/acme/workspace-payments"},
		{"github", []string{"--forge", "github"}, "", "url: https://github.com/acme/workspace-payments"},
		{"github enterprise", []string{"--forge", "github"}, "https://ghe.example.com/api/v3/", "url: https://ghe.example.com/acme/workspace-payments"},
		{"--git-url wins", []string{"--forge", "github", "--git-url", "http://127.0.0.1:9999/"}, "", "url: http://127.0.0.1:9999/acme/workspace-payments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GITHUB_API_URL", tc.env)
			out := filepath.Join(t.TempDir(), "out")
			code, _, errOut := cli(t, append([]string{"render", "--control", exampleControl, "--out", out}, tc.args...)...)
			require.Equal(t, 0, code, errOut)
			data, err := os.ReadFile(filepath.Join(out, "cluster-prod-eu-1", "flux", "fleetbot.yaml"))
			require.NoError(t, err)
			assert.Contains(t, string(data), tc.want)
		})
	}
}

func TestDevGitServeServesTheLocalForge(t *testing.T) {
	t.Parallel()
	forge := t.TempDir()
	code, _, errOut := cli(t, "apply", "--control", exampleControl, "--forge", "local:"+forge)
	require.Equal(t, 0, code, errOut)

	ctx, cancel := context.WithCancel(context.Background())
	addrFile := filepath.Join(t.TempDir(), "addr")
	done := make(chan int, 1)
	var stdout, stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"dev", "git-serve", "--forge", "local:" + forge, "--listen", "127.0.0.1:0", "--listen-file", addrFile}, &stdout, &stderr)
	}()
	var addr string
	require.Eventually(t, func() bool {
		data, err := os.ReadFile(addrFile)
		addr = strings.TrimSpace(string(data))
		return err == nil && addr != ""
	}, 30*time.Second, 20*time.Millisecond, "git-serve writes its address")

	dst := filepath.Join(t.TempDir(), "clone")
	cmd := exec.Command("git", "clone", "-q", "--branch", "fleetbot/sync", "http://"+addr+"/acme/cluster-prod-eu-1.git", dst)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	_, err = os.Stat(filepath.Join(dst, "flux", "fleetbot.yaml"))
	require.NoError(t, err, "the clone over HTTP has fleetbot's files")

	cancel()
	// No timer: a git-serve that never stops hangs the test until go test's -timeout names it.
	assert.Equal(t, 0, <-done, "git-serve ends cleanly when interrupted: %s", stderr.String())
}

func TestDevGitServeNeedsALocalForge(t *testing.T) {
	t.Parallel()
	code, _, errOut := cli(t, "dev", "git-serve", "--forge", "github")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "git-serve serves a local forge")
}
