package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/rollout"
)

// hmacPlatform declares a rollout wave with health over generic-hmac, posting to url.
const hmacPlatform = `apiVersion: fleetbot.io/v1alpha1
kind: Platform
metadata:
  name: acme
spec:
  owner: acme
  admins: [platform]
  components:
    - app: monitoring
      clusterSelector: {}
  rollout:
    health: {provider: generic-hmac, url: "%s"}
    waves:
      - name: canary
        clusterSelector: {matchLabels: {ring: canary}}
`

// healthSink is serve's health endpoint as the second half of issue 35 will build it, reduced
// to what this test checks: every POST is verified with rollout.ParseHealthEvent against the
// key of the endpoint its path names (the cluster's for /health/<cluster>, the namespace's
// derived key for /health/<cluster>/<namespace>), and kept.
type healthSink struct {
	cluster string
	key     []byte
	mu      sync.Mutex
	events  []rollout.HealthEvent
	refused []string
}

func (s *healthSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, rollout.MaxHealthEventBytes+1))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/health/"), "/")
	at := rollout.HealthEndpoint{Cluster: parts[0]}
	key := s.key
	if len(parts) == 2 {
		at.Namespace = parts[1]
		key = rollout.NamespaceKey(s.key, parts[1])
	}
	ev, err := rollout.ParseHealthEvent(body, r.Header.Get(rollout.HealthSignatureHeader), [][]byte{key}, at)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || at.Cluster != s.cluster {
		s.refused = append(s.refused, fmt.Sprintf("%s: %v", r.URL.Path, err))
		http.Error(w, "refused", http.StatusUnauthorized)
		return
	}
	s.events = append(s.events, ev)
	w.WriteHeader(http.StatusAccepted)
}

// find returns the first verified event that match accepts.
func (s *healthSink) find(match func(rollout.HealthEvent) bool) (rollout.HealthEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ev := range s.events {
		if match(ev) {
			return ev, true
		}
	}
	return rollout.HealthEvent{}, false
}

// TestRenderedHMACAlertPostsSignedEvents: with spec.rollout.health.provider generic-hmac, the
// Providers and Alerts fleetbot renders into a cluster repo, for flux-system and for the
// cluster's workspace namespace, are applied by a real Flux under the multi-tenancy lockdown,
// and the real notification-controller posts the events of the cluster's Kustomizations and
// of the tenant's HelmReleases to serve's health URL, signed so that rollout.ParseHealthEvent
// verifies them: flux-system's with the cluster's key, the tenant's with the key derived for
// its namespace, each attributed to the cluster (and the workspace) and naming the revision.
// No cluster holds a GitHub credential for it.
func TestRenderedHMACAlertPostsSignedEvents(t *testing.T) {
	e := env
	ctx := context.Background()
	const (
		cluster = "hmac-e2e"
		repo    = "cluster-" + cluster
		ns      = "shop"
	)
	key := []byte("the cluster key the platform created")
	sink := &healthSink{cluster: cluster, key: key}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: sink, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	healthURL := "http://" + ln.Addr().String() + "/health"

	gh := githubtest.NewServer(t)
	c := e.startFluxCluster(t, "hmac", clusterFlux{notification: true, lockdown: true})
	control := filepath.Join(t.TempDir(), "control")
	require.NoError(t, os.CopyFS(filepath.Join(control, "catalog"), os.DirFS(filepath.Join("..", "testdata", "provision", "control", "catalog"))))
	writeFile(t, filepath.Join(control, "platform.yaml"), fmt.Sprintf(hmacPlatform, healthURL))
	writeFile(t, filepath.Join(control, "workspaces", ns+".yaml"), "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: "+ns+"\nspec:\n  admins: [shop-devs]\n")
	clusterFile := filepath.Join(control, "clusters", cluster+".yaml")
	clusterYAML := "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + cluster + "\n  labels: {ring: canary}\nspec:\n  workspace: " + ns + "\n  admins: [hmac-sre]\n"
	writeFile(t, clusterFile, clusterYAML)
	files := e.renderRepo(t, control, repo, "--github-url", gh.APIURL())
	require.Contains(t, files["flux/fleetbot.yaml"], "type: generic-hmac")
	require.NotContains(t, files["flux/fleetbot.yaml"], "type: github", "no cluster needs a GitHub credential for health")
	gh.CreateRepo(owner, repo, files)

	// What the platform admins provide: the bootstrap's read credentials, and the health
	// Secrets: the cluster's key in flux-system, the key derived for the workspace namespace
	// in it.
	require.NoError(t, c.kube.applyYAML(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: flux-system
---
apiVersion: v1
kind: Namespace
metadata:
  name: %[3]s
---
apiVersion: v1
kind: Secret
metadata:
  name: flux-system
  namespace: flux-system
stringData:
  username: x-access-token
  password: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: fleetbot-health
  namespace: flux-system
stringData:
  token: %[2]s
---
apiVersion: v1
kind: Secret
metadata:
  name: fleetbot-health
  namespace: %[3]s
stringData:
  token: %[4]s
`, githubtest.DefaultToken, key, ns, rollout.NamespaceKey(key, ns))), ""))

	boot := gh.Commit(owner, repo, "main", "Add Flux sync manifests",
		e.fluxBootstrapFiles(t, gh.URL+"/"+owner+"/"+repo+".git", "flux-system", false))
	applyFluxSystem(t, c.kube, mapFS(gh.Files(owner, repo, boot)))
	waitAppliedOn(t, c.kube, "flux-system", "flux-system", boot)
	for _, n := range []string{"flux-system", ns} {
		alert, err := c.kube.get(ctx, "notification.toolkit.fluxcd.io/v1beta3", "Alert", n, "fleetbot-health")
		require.NoError(t, err)
		require.NotNil(t, alert, "Alert %s/fleetbot-health applied from %s", n, repo)
	}

	// Both Alerts serve (their creation raced the bootstrap's own events): probe each with an
	// event as a controller would post it, until the signed copy reaches the sink. The
	// tenant's probe is a failing HelmRelease of its namespace.
	waitSignedEvent(t, c.events, sink, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "fleetbot-e2e-probe", "info")
	tenantEv := waitSignedEvent(t, c.events, sink, "helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, "podinfo", "error")
	assert.True(t, tenantEv.Failed())
	assert.Equal(t, cluster, tenantEv.Cluster)

	// A change fleetbot renders, merged: Flux applies it, and its real events reach the sink
	// signed with the cluster's key and naming the revision applied.
	writeFile(t, clusterFile, clusterYAML+"  values:\n    monitoring_retention: 7d\n")
	changed := e.renderRepo(t, control, repo, "--github-url", gh.APIURL())
	head := gh.Commit(owner, repo, "main", "fleetbot: monitoring keeps 7 days", changed)
	requestReconcileOn(t, c.kube, "source.toolkit.fluxcd.io/v1", "GitRepository", "flux-system", "flux-system")
	waitAppliedOn(t, c.kube, "flux-system", "platform-monitoring", head)
	err = poll(ctx, fluxDeadline, "a signed event of Kustomization platform-monitoring at "+head, func() (bool, string, error) {
		ev, ok := sink.find(func(ev rollout.HealthEvent) bool {
			return ev.Name == "platform-monitoring" && strings.HasSuffix(ev.Revision, head)
		})
		if ok {
			assert.Equal(t, "flux-system", ev.Namespace)
			assert.False(t, ev.Failed(), "%s: %s", ev.Reason, ev.Message)
		}
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return ok, fmt.Sprintf("%d events, refused: %v", len(sink.events), sink.refused), nil
	})
	require.NoError(t, err)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	assert.Empty(t, sink.refused, "every event notification-controller posted verifies")
	t.Logf("notification-controller posted %d events to the generic-hmac endpoint; every one verified", len(sink.events))
}

// waitSignedEvent posts an event of the object to notification-controller's event endpoint,
// again (with a new message: the controller drops repeats) until the sink has verified its
// signed copy, and returns that.
func waitSignedEvent(t *testing.T, events string, sink *healthSink, apiVersion, kind, namespace, name, severity string) rollout.HealthEvent {
	t.Helper()
	var got rollout.HealthEvent
	n := 0
	err := poll(t.Context(), fluxDeadline, fmt.Sprintf("a signed event of %s %s/%s", kind, namespace, name), func() (bool, string, error) {
		if ev, ok := sink.find(func(ev rollout.HealthEvent) bool {
			return ev.Kind == kind && ev.Namespace == namespace && ev.Name == name
		}); ok {
			got = ev
			return true, "", nil
		}
		n++
		group := strings.Split(apiVersion, "/")[0]
		body, err := json.Marshal(map[string]any{
			"involvedObject":      map[string]any{"apiVersion": apiVersion, "kind": kind, "namespace": namespace, "name": name},
			"severity":            severity,
			"timestamp":           time.Now().UTC().Format(time.RFC3339),
			"message":             fmt.Sprintf("fleetbot e2e probe %d", n),
			"reason":              "Probe",
			"metadata":            map[string]string{group + "/revision": "probe-" + fmt.Sprint(n)},
			"reportingController": strings.ToLower(kind) + "-controller",
		})
		if err != nil {
			return false, "", err
		}
		resp, err := http.Post(events, "application/json", bytes.NewReader(body))
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return false, fmt.Sprintf("probe %d answered %s; %d events, refused: %v", n, resp.Status, len(sink.events), sink.refused), nil
	})
	require.NoError(t, err)
	assert.Contains(t, got.Revision, "probe-", "the object group's revision metadata reaches serve as revision")
	return got
}
