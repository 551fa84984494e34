package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAttackRemoteBaseStartsNoProcess: a kustomization naming a remote base
// (github.com:acme/repo, beside a local directory of that very name, and an
// http URL) in a catalog app, a workspace repo and a cluster repo. With
// recording git, ssh, helm and kustomize first and alone on PATH and the URL
// served on 127.0.0.1, validate, render, plan and every check refuse it with
// file:line and none of them starts a process or makes a request.
func TestAttackRemoteBaseStartsNoProcess(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\n"))
	}))
	defer srv.Close()
	const twin = "github.com:acme/repo"
	remote := "  - " + twin + "\n  - " + srv.URL + "/x.yaml\n"
	addTwin := func(dir string) {
		writeFile(t, filepath.Join(dir, twin, "kustomization.yaml"), "resources: [cm.yaml]\n")
		writeFile(t, filepath.Join(dir, twin, "cm.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twin\n")
	}

	// Everything that needs the real git is prepared first.
	ctl := controlClone(t, map[string][3]string{"remote": {"catalog/podinfo/kustomization.yaml", "  - configmap.yaml\n", "  - configmap.yaml\n" + remote}})
	addTwin(filepath.Join(ctl, "catalog", "podinfo"))
	gitIn(t, ctl, "add", "-A")
	gitIn(t, ctl, "commit", "-q", "-m", "twin")
	gitIn(t, ctl, "checkout", "-q", "remote")
	gitIn(t, ctl, "merge", "-q", "main", "-m", "twin too")
	ws := workspaceCheckout(t)
	writeFile(t, filepath.Join(ws, "apps", "kustomization.yaml"), "resources:\n"+remote)
	addTwin(filepath.Join(ws, "apps"))
	cl := t.TempDir()
	writeFile(t, filepath.Join(cl, "apps", "kustomization.yaml"), "resources:\n"+remote)
	addTwin(filepath.Join(cl, "apps"))
	forge := filepath.Join(t.TempDir(), "forge")

	markers, bin := t.TempDir(), t.TempDir()
	for _, prog := range []string{"git", "ssh", "helm", "kustomize", "curl", "wget"} {
		script := fmt.Sprintf("#!/bin/sh\necho \"$@\" >> %q\nexit 0\n", filepath.Join(markers, prog))
		require.NoError(t, os.WriteFile(filepath.Join(bin, prog), []byte(script), 0o755))
	}
	t.Setenv("PATH", bin)
	t.Setenv("GIT_SSH_COMMAND", filepath.Join(bin, "ssh"))

	for _, args := range [][]string{
		{"validate", "--control", ctl},
		{"render", "--control", ctl, "--out", filepath.Join(t.TempDir(), "out")},
		{"plan", "--control", ctl, "--forge", "local:" + forge},
		{"check", "control", "--control", ctl, "--base", "main", "--head", "remote", "--author", "x", "--author-teams", "platform"},
		{"check", "workspace", "--dir", ws, "--workspace", "payments"},
		{"check", "cluster", "--dir", cl},
	} {
		name := strings.Join(args[:2], " ")
		code, out, errOut := cli(t, args...)
		assert.NotEqual(t, 0, code, "%s must refuse the remote base\n%s%s", name, out, errOut)
		assert.Contains(t, out+errOut, fmt.Sprintf("%q is remote", twin), name)
		assert.Regexp(t, `kustomization\.yaml:\d+: `, out+errOut, "%s names the file and line", name)
		entries, err := os.ReadDir(markers)
		require.NoError(t, err)
		for _, e := range entries {
			data, _ := os.ReadFile(filepath.Join(markers, e.Name()))
			t.Errorf("%s started %s %s", name, e.Name(), data)
			require.NoError(t, os.Remove(filepath.Join(markers, e.Name())))
		}
		assert.Zero(t, hits.Swap(0), "%s made HTTP requests", name)
	}
}
