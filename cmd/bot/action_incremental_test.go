package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestActionApplyIsIncrementalWithACacheDir: with the cache-dir input (kept by actions/cache),
// apply on push plans only the target repos whose desired state changed since the last
// converged apply; a scheduled run plans every repo.
func TestActionApplyIsIncrementalWithACacheDir(t *testing.T) {
	t.Parallel()
	srv := fakeFleet(t)
	run := newSimRunner(t, srv)
	ctl := run.checkout()
	ev, err := srv.PushEvent("acme", "control", "main", "")
	require.NoError(t, err)
	run.event("push", srv.Branch("acme", "control", "main"), "refs/heads/main", ev)
	inputs := appInputs(srv, "apply")
	inputs["CACHE-DIR"] = filepath.Join(run.temp, "fleetbot-cache")

	step := run.run(inputs)
	require.Equal(t, 0, step.code, step.stdout+step.stderr)
	assert.Contains(t, step.summary, "6 repos: 6 create")
	require.FileExists(t, filepath.Join(inputs["CACHE-DIR"], ".baseline-acme.json"))

	editFile(t, filepath.Join(ctl, "clusters", "edge-1.yaml"), "192.168.50.0/28", "192.168.60.0/28")
	srv.ResetLog()
	step = run.run(inputs)
	require.Equal(t, 0, step.code, step.stdout+step.stderr)
	assert.Contains(t, step.summary, "1 repos: 1 update")
	for _, w := range targetWrites(srv) {
		assert.True(t, strings.HasPrefix(w, "acme/cluster-edge-1: "), "only the changed cluster's repo is written: %s", w)
	}
	for _, r := range srv.Requests() {
		if rest, ok := strings.CutPrefix(r.Path, "/api/v3/repos/acme/"); ok && !strings.HasPrefix(rest, "control") {
			assert.True(t, strings.HasPrefix(rest, "cluster-edge-1"), "only the changed repo is read: %s %s", r.Method, r.Path)
		}
	}

	run.env["GITHUB_EVENT_NAME"] = "schedule"
	step = run.run(inputs)
	require.Equal(t, 0, step.code, step.stdout+step.stderr)
	assert.Contains(t, step.summary, "6 repos: 6 noop", "a scheduled run plans every repo")
}
