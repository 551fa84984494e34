package serve_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
	"github.com/fleetbot-io/fleetbot/internal/serve"
)

// runHealthServe starts serve against gh with cfg's health keys and waits for its startup apply; it
// returns the base URL.
func runHealthServe(t *testing.T, gh *githubtest.Server, keys string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ready := make(chan struct{})
	finished := newJobs()
	srv, err := serve.New(serve.Config{
		Listener: ln, Control: "acme/control", Secret: []byte(secret), HealthKeys: keys,
		App: app.Config{Forge: app.ForgeGitHub, GitURL: gh.URL, CacheDir: t.TempDir(), Version: "test", Concurrency: 4,
			GitHub: ghforge.Config{APIURL: gh.APIURL(), AppID: gh.AppID(), PrivateKey: gh.AppPrivateKeyPEM(),
				Budget: ghforge.BudgetConfig{PerMinute: 100000, PerHour: 1000000, MinInterval: -1}}},
		Resync: time.Hour, Workers: 2, QueueSize: 100, MaxBody: ingress.DefaultMaxBody, Grace: 5 * time.Second,
		CheckName: checkrun.DefaultCheckName,
		OnReady:   func() { close(ready) }, Logger: slog.New(finished),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-done, "Run returned")
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run stopped before ready: %v", err)
	}
	finished.waitFor(t, "the startup apply", func() bool { return finished.applies.Load() >= 1 })
	return "http://" + ln.Addr().String()
}

// fluxEvent is a notification-controller event about a Kustomization in ns at revision.
func fluxEvent(t *testing.T, ns, name, severity, reason, revision string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"involvedObject": map[string]any{"kind": "Kustomization", "namespace": ns, "name": name, "apiVersion": "kustomize.toolkit.fluxcd.io/v1"},
		"severity":       severity, "timestamp": "2026-03-01T12:00:00Z", "message": "Health check failed after 30s: Deployment/" + ns + "/api not ready",
		"reason": reason, "reportingController": "kustomize-controller",
		"metadata": map[string]string{"revision": revision},
	})
	require.NoError(t, err)
	return b
}

// postEvent posts body to path signed with key ("" unsigned) and returns the status code.
func postEvent(t *testing.T, url string, body []byte, key []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if key != nil {
		m := hmac.New(sha256.New, key)
		m.Write(body)
		req.Header.Set(rollout.HealthSignatureHeader, "sha256="+hex.EncodeToString(m.Sum(nil)))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 502 {
		t.Log(string(b))
	}
	return resp.StatusCode
}

// statuses lists the commit statuses of owner/repo at sha: context=state.
func statuses(t *testing.T, gh *githubtest.Server, repo, sha string) []string {
	t.Helper()
	list, _, err := gh.Client().Repositories.ListStatuses(context.Background(), "acme", repo, sha, nil)
	require.NoError(t, err)
	var out []string
	for _, s := range list {
		out = append(out, s.GetContext()+"="+s.GetState())
	}
	return out
}

// TestHealthEventsBecomeCommitStatuses: a cluster's notification-controller posts signed
// events to /health/<cluster> (and its workspace namespace to /health/<cluster>/<namespace>,
// signed with the key derived for it); serve verifies them against the cluster's key file
// (several keys while rotating) and records the verdict as the commit status a github
// Provider would post, on the cluster (or workspace) repo at the commit the event names.
// Unsigned, wrongly signed, oversized, unknown and misdirected events record nothing.
func TestHealthEventsBecomeCommitStatuses(t *testing.T) {
	t.Parallel()
	gh := fakeGitHub(t)
	keys := t.TempDir()
	oldKey, newKey := []byte("old-key-of-prod-eu-1"), []byte("new-key-of-prod-eu-1")
	require.NoError(t, os.WriteFile(filepath.Join(keys, "prod-eu-1"), []byte(string(newKey)+"\n"+string(oldKey)+"\n"), 0o600))
	base := runHealthServe(t, gh, keys)

	head := gh.Branch("acme", "cluster-prod-eu-1", "main")
	require.NotEmpty(t, head)
	rev := "main@sha1:" + head
	failed := fluxEvent(t, "flux-system", "apps", "error", "HealthCheckFailed", rev)
	at := rollout.HealthEndpoint{Cluster: "prod-eu-1"}
	ctxName := rollout.HealthStatusContext(at, "apps")
	assert.True(t, strings.HasPrefix(ctxName, app.FluxStatusPrefix+"apps/"), "the github Provider's context shape")

	for _, c := range []struct {
		what string
		path string
		body []byte
		key  []byte
		want int
	}{
		{"unsigned", "/health/prod-eu-1", failed, nil, http.StatusUnauthorized},
		{"signed with another key", "/health/prod-eu-1", failed, []byte("someone-else"), http.StatusUnauthorized},
		{"a cluster without a key", "/health/prod-us-1", failed, oldKey, http.StatusNotFound},
		{"a path that names no cluster", "/health/Not_A_Name", failed, oldKey, http.StatusNotFound},
		{"too deep", "/health/prod-eu-1/payments/x", failed, oldKey, http.StatusNotFound},
		{"the cluster key on the namespace endpoint", "/health/prod-eu-1/payments", fluxEvent(t, "payments", "app", "error", "HealthCheckFailed", rev), oldKey, http.StatusUnauthorized},
		{"an event about another namespace", "/health/prod-eu-1", fluxEvent(t, "payments", "app", "error", "HealthCheckFailed", rev), oldKey, http.StatusBadRequest},
		{"larger than an event", "/health/prod-eu-1", bytes.Repeat([]byte("x"), app.MaxHealthEventBytes+1), oldKey, http.StatusRequestEntityTooLarge},
	} {
		assert.Equal(t, c.want, postEvent(t, base+c.path, c.body, c.key), c.what)
	}
	assert.Empty(t, statuses(t, gh, "cluster-prod-eu-1", head), "nothing refused was recorded")
	code, _ := get(t, base+"/health/prod-eu-1")
	assert.Equal(t, http.StatusMethodNotAllowed, code)

	// The previous key still verifies while the Secret rotates; then the new one.
	assert.Equal(t, http.StatusAccepted, postEvent(t, base+"/health/prod-eu-1", failed, oldKey))
	assert.Equal(t, []string{ctxName + "=failure"}, statuses(t, gh, "cluster-prod-eu-1", head))
	ok := fluxEvent(t, "flux-system", "apps", "info", "ReconciliationSucceeded", rev)
	assert.Equal(t, http.StatusAccepted, postEvent(t, base+"/health/prod-eu-1", ok, newKey))
	assert.Contains(t, statuses(t, gh, "cluster-prod-eu-1", head), ctxName+"=success")

	// The workspace namespace: its own derived key, recorded on the workspace repo.
	wsHead := gh.Branch("acme", "workspace-payments", "main")
	require.NotEmpty(t, wsHead)
	wsEvent := fluxEvent(t, "payments", "app", "error", "HealthCheckFailed", "main@sha1:"+wsHead)
	assert.Equal(t, http.StatusAccepted, postEvent(t, base+"/health/prod-eu-1/payments", wsEvent, rollout.NamespaceKey(newKey, "payments")))
	wsCtx := rollout.HealthStatusContext(rollout.HealthEndpoint{Cluster: "prod-eu-1", Namespace: "payments"}, "app")
	assert.Equal(t, []string{wsCtx + "=failure"}, statuses(t, gh, "workspace-payments", wsHead))
	// A namespace that is not the cluster's workspace's.
	other := fluxEvent(t, "search", "app", "error", "HealthCheckFailed", "main@sha1:"+wsHead)
	assert.Equal(t, http.StatusNotFound, postEvent(t, base+"/health/prod-eu-1/search", other, rollout.NamespaceKey(newKey, "search")))

	// An event that names no git commit is taken and records nothing.
	noCommit := fluxEvent(t, "flux-system", "apps", "error", "HealthCheckFailed", "")
	assert.Equal(t, http.StatusAccepted, postEvent(t, base+"/health/prod-eu-1", noCommit, newKey))
}

// helmEvent is a notification-controller event about a HelmRelease in ns, with metadata as
// notification-controller forwards it (the object's group prefix dropped).
func helmEvent(t *testing.T, ns, name, severity, reason string, metadata map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"involvedObject": map[string]any{"kind": "HelmRelease", "namespace": ns, "name": name, "apiVersion": "helm.toolkit.fluxcd.io/v2"},
		"severity":       severity, "timestamp": "2026-03-01T12:00:00Z", "message": "Helm upgrade failed for release " + ns + "/" + name,
		"reason": reason, "reportingController": "helm-controller", "metadata": metadata,
	})
	require.NoError(t, err)
	return b
}

// TestHelmReleaseHealthEvents: a workspace HelmRelease's failure names its chart version, not
// a commit (helm-controller's events; even a chart built from git with reconcileStrategy:
// Revision carries only 12 hex digits of the commit), so serve takes it (202), records nothing,
// and says where its health counts instead; one that names a commit as notification-controller's
// github provider finds one (the metadata commit) is recorded on the workspace repo under
// helmrelease/<name>/<id>.
func TestHelmReleaseHealthEvents(t *testing.T) {
	t.Parallel()
	gh := fakeGitHub(t)
	keys := t.TempDir()
	key := []byte("key-of-prod-eu-1")
	require.NoError(t, os.WriteFile(filepath.Join(keys, "prod-eu-1"), key, 0o600))
	base := runHealthServe(t, gh, keys)
	wsHead := gh.Branch("acme", "workspace-payments", "main")
	require.NotEmpty(t, wsHead)
	nsKey := rollout.NamespaceKey(key, "payments")

	post := func(body []byte) (int, string) {
		t.Helper()
		m := hmac.New(sha256.New, nsKey)
		m.Write(body)
		req, err := http.NewRequest(http.MethodPost, base+"/health/prod-eu-1/payments", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set(rollout.HealthSignatureHeader, "sha256="+hex.EncodeToString(m.Sum(nil)))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, version := range []string{"6.7.1", "0.1.0+" + wsHead[:12]} {
		code, answer := post(helmEvent(t, "payments", "podinfo", "error", "UpgradeFailed", map[string]string{"revision": version}))
		assert.Equal(t, http.StatusAccepted, code, version)
		assert.Contains(t, answer, "nothing recorded: a HelmRelease event names its chart version")
		assert.Contains(t, answer, "spec.wait")
	}
	assert.Empty(t, statuses(t, gh, "workspace-payments", wsHead), "nothing recorded for a chart version")

	code, _ := post(helmEvent(t, "payments", "podinfo", "error", "UpgradeFailed", map[string]string{"revision": "6.7.1", "commit": wsHead}))
	assert.Equal(t, http.StatusAccepted, code)
	ctx := rollout.HelmStatusPrefix + strings.TrimPrefix(rollout.HealthStatusContext(rollout.HealthEndpoint{Cluster: "prod-eu-1", Namespace: "payments"}, "podinfo"), app.FluxStatusPrefix)
	assert.Equal(t, []string{ctx + "=failure"}, statuses(t, gh, "workspace-payments", wsHead))
}
