package serve_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// budgetWaves is the example platform.yaml with a change window opening at 13:00 UTC (the fake
// clock starts at 12:00), health over generic-hmac, and three waves: canary (staging-eu-1, no
// budget, rolls back on failure), eu (prod-eu-1, approval required) and the rest.
func budgetWaves(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(exampleControl, "platform.yaml"))
	require.NoError(t, err)
	return string(b) + `  rollout:
    onFailure: rollback
    windows:
      - {kind: allow, start: "13:00", duration: 6h, timeZone: UTC}
    health: {provider: generic-hmac, url: "https://fleetbot.example.com/health"}
    waves:
      - name: canary
        clusterSelector: {matchLabels: {env: staging}}
        maxUnavailable: 0
      - name: eu
        clusterSelector: {matchLabels: {env: prod, region: eu}}
        approval: required
`
}

// retention is the monitoring retention of staging-eu-1 and prod-eu-1: a change of both.
func retention(t *testing.T, days string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range []string{"staging-eu-1", "prod-eu-1"} {
		b, err := os.ReadFile(filepath.Join(exampleControl, "clusters", c+".yaml"))
		require.NoError(t, err)
		s := string(b)
		if strings.Contains(s, "monitoring_retention:") {
			s = strings.Replace(s, "monitoring_retention: 30d", "monitoring_retention: "+days, 1)
		} else {
			s += "  values:\n    monitoring_retention: " + days + "\n"
		}
		out["clusters/"+c+".yaml"] = s
	}
	return out
}

// digestAt is the content digest of the control repo at commit on the fake GitHub, as
// fleetbot rollout approve writes it from a checkout.
func (r *rolloutEnv) digestAt(commit string) string {
	r.t.Helper()
	dir := r.t.TempDir()
	for name, content := range r.gh.Files("acme", "control", commit) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(r.t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(r.t, os.WriteFile(p, []byte(content), 0o644))
	}
	repo, err := control.LoadDir(dir)
	require.NoError(r.t, err)
	require.NotEmpty(r.t, repo.Digest)
	return repo.Digest
}

// health posts a notification-controller event about flux-system's Kustomization at commit to
// serve's /health/<cluster>, signed with key, and returns the answer's status.
func (r *rolloutEnv) health(cluster string, key []byte, commit, severity, reason string) int {
	r.t.Helper()
	body, err := json.Marshal(map[string]any{
		"involvedObject": map[string]any{"kind": "Kustomization", "namespace": "flux-system", "name": "flux-system", "apiVersion": "kustomize.toolkit.fluxcd.io/v1"},
		"severity":       severity, "reason": reason, "message": reason, "timestamp": r.gh.Now().UTC().Format(time.RFC3339),
		"reportingController": "kustomize-controller", "metadata": map[string]string{"revision": "main@sha1:" + commit},
	})
	require.NoError(r.t, err)
	req, err := http.NewRequest(http.MethodPost, r.url+"/health/"+cluster, bytes.NewReader(body))
	require.NoError(r.t, err)
	m := hmac.New(sha256.New, key)
	m.Write(body)
	req.Header.Set("X-Signature", "sha256="+hex.EncodeToString(m.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(r.t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestServeRolloutBudgetWindowRollbackApproval drives, through serve's webhooks, its wake-ups
// on an injected clock and signed health events (no GitHub credential on the clusters), a
// rollout outside its change window (nothing opens until the window opens at 13:00), over the
// canary's budget of 0 (a failing health event halts it and opens the pull request restoring
// the canary's last healthy content; once merged and reported healthy the failed content is not
// proposed again), then a fix that goes through the canary and waits for the approval of wave
// eu, which a committed approval record releases, to the end of the rollout.
func TestServeRolloutBudgetWindowRollbackApproval(t *testing.T) {
	t.Parallel()
	keys := t.TempDir()
	staging, prodEU, prodUS, edge := []byte("key-staging-eu-1"), []byte("key-prod-eu-1"), []byte("key-prod-us-1"), []byte("key-edge-1")
	for name, key := range map[string][]byte{"staging-eu-1": staging, "prod-eu-1": prodEU, "prod-us-1": prodUS, "edge-1": edge} {
		require.NoError(t, os.WriteFile(filepath.Join(keys, name), key, 0o600))
	}
	r := startRolloutServeWith(t, keys)
	// Flux reported every converged merge healthy: what a rollback restores.
	for _, repo := range []string{"cluster-edge-1", "cluster-prod-eu-1", "cluster-prod-us-1", "cluster-staging-eu-1"} {
		for _, p := range r.gh.Pulls("acme", repo) {
			if p.GetMerged() {
				r.flux(repo, p.GetMergeCommitSHA(), "success")
			}
		}
	}
	r.idle()

	// The window: the waves arrive at 12:00; nothing opens before 13:00, then the canary.
	waves := map[string]string{"platform.yaml": budgetWaves(t)}
	sha := r.gh.Commit("acme", "control", "main", "rollout in waves, with a window", waves)
	r.eventually("the rollout check run", func() bool { return r.rolloutRun(sha) != nil })
	r.idle()
	r.waitOpen()
	assert.Contains(t, r.rolloutRun(sha).GetOutput().GetSummary(), "Change windows: closed until 2026-03-01T13:00:00Z")
	r.clock.Advance(time.Hour)
	r.waitOpen("cluster-staging-eu-1")

	// Budget and rollback: the canary merges, its cluster reports a failure through serve's
	// health endpoint: over a budget of 0, the rollout rolls back.
	n := r.open("cluster-staging-eu-1").GetNumber()
	merged := r.mergeOpen("cluster-staging-eu-1")
	assert.Equal(t, http.StatusUnauthorized, r.health("staging-eu-1", prodEU, merged, "error", "HealthCheckFailed"), "signed with another cluster's key")
	assert.Equal(t, http.StatusAccepted, r.health("staging-eu-1", staging, merged, "error", "HealthCheckFailed"))
	var cr *gh.CheckRun
	deadline := time.Now().Add(time.Minute)
	r.eventually("the rollout check run to halt", func() bool {
		cr = r.rolloutRun(sha)
		if time.Now().After(deadline) {
			t.Logf("title %q: %s", cr.GetOutput().GetTitle(), cr.GetOutput().GetSummary())
			deadline = time.Now().Add(time.Hour)
		}
		return strings.HasPrefix(cr.GetOutput().GetTitle(), "rollout halted") && strings.Contains(cr.GetOutput().GetSummary(), "**Rolled back**")
	})
	// The run that halted names the cluster and why; a later one (the restore's own events)
	// says the revision was rolled back.
	if title := cr.GetOutput().GetTitle(); strings.HasPrefix(title, "rollout halted on ") {
		assert.Contains(t, title, "rollout halted on staging-eu-1: 1 of 1 clusters failed (failed: staging-eu-1), over maxFailures 0 (first: Flux reported a failure for the merge of #"+strconv.Itoa(n)+")")
		assert.Contains(t, cr.GetOutput().GetSummary(), "What failed on staging-eu-1: Kustomization flux-system", "the halt names what failed")
	} else {
		assert.Contains(t, title, "rollout halted: revision "+sha+" failed and was rolled back")
	}
	assert.Equal(t, "failure", cr.GetConclusion())
	assert.Contains(t, cr.GetOutput().GetSummary(), "**Rolled back** revision `"+sha[:7]+"`")
	assert.Contains(t, cr.GetOutput().GetSummary(), "| cluster-staging-eu-1 | `")
	r.waitOpen("cluster-staging-eu-1")
	restore := r.open("cluster-staging-eu-1")
	assert.Contains(t, restore.GetTitle(), "fleetbot: roll back cluster staging-eu-1 to")
	r.idle()
	r.waitOpen("cluster-staging-eu-1") // no other wave opens

	// The restore merges per the wave's policy (merge: manual here) and reports healthy.
	restored := r.mergeOpen("cluster-staging-eu-1")
	assert.Equal(t, http.StatusAccepted, r.health("staging-eu-1", staging, restored, "info", "ReconciliationSucceeded"))
	r.idle()
	r.waitOpen()

	// A fix is a new rollout: the canary, then wave eu waits for its approval.
	sha2 := r.gh.Commit("acme", "control", "main", "fix: shorter retention", retention(t, "14d"))
	r.waitOpen("cluster-staging-eu-1")
	assert.NotContains(t, r.open("cluster-staging-eu-1").GetTitle(), "roll back")
	canary := r.mergeOpen("cluster-staging-eu-1")
	assert.Equal(t, http.StatusAccepted, r.health("staging-eu-1", staging, canary, "info", "ReconciliationSucceeded"))
	cr = r.waitTitle(sha2, "wave 2 of 3 (eu): 0 of 1 clusters done")
	assert.Contains(t, cr.GetOutput().GetSummary(), "awaiting-approval")
	r.idle()
	r.waitOpen()

	// The approval is a commit to the control repo, bound to the content it approves.
	approval := "digest: " + r.digestAt(sha2) + "\nnote: canary healthy\n"
	r.gh.Commit("acme", "control", "main", "rollout: approve wave eu", map[string]string{"rollout/approvals/eu.yaml": approval})
	r.waitOpen("cluster-prod-eu-1")
	assert.Equal(t, http.StatusAccepted, r.health("prod-eu-1", prodEU, r.mergeOpen("cluster-prod-eu-1"), "info", "ReconciliationSucceeded"))
	r.waitOpen("cluster-edge-1", "cluster-prod-us-1")
	for repo, c := range map[string]struct {
		name string
		key  []byte
	}{"cluster-edge-1": {"edge-1", edge}, "cluster-prod-us-1": {"prod-us-1", prodUS}} {
		assert.Equal(t, http.StatusAccepted, r.health(c.name, c.key, r.mergeOpen(repo), "info", "ReconciliationSucceeded"))
	}
	head := r.gh.Branch("acme", "control", "main")
	r.eventually("the rollout to be done", func() bool {
		cr := r.rolloutRun(head)
		return cr != nil && cr.GetOutput().GetTitle() == "rollout done: 3 of 3 waves"
	})
	r.idle()
}
