package fanout

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	notificationv1beta3 "github.com/fluxcd/notification-controller/api/v1beta3"
	sjs "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// TestHealthObjectsOnlyWithWaves: a platform with rollout waves gets, in every cluster repo's
// flux/fleetbot.yaml, the github Provider (addressed to that cluster repo) and the Alert of
// flux-system's Kustomizations that make Flux post the commit statuses the waves wait for;
// without waves nothing is added (the goldens prove the rest is unchanged).
func TestHealthObjectsOnlyWithWaves(t *testing.T) {
	t.Parallel()
	repo := loadExample(t)
	for _, tg := range mustRender(t, NewRenderer(Options{}), repo) {
		assert.NotContains(t, string(tg.Files[FluxPath]), "kind: Provider", tg.Repo)
	}
	repo.Platform.Spec.Rollout.Waves = []control.Wave{{Name: "all", ClusterSelector: &control.Selector{}}}
	n := 0
	for _, tg := range mustRender(t, NewRenderer(Options{}), repo) {
		if tg.Kind != KindCluster {
			continue
		}
		n++
		docs := strings.Split(string(tg.Files[FluxPath]), "\n---\n")
		var provider, alert map[string]any
		for _, d := range docs {
			var m map[string]any
			require.NoError(t, yaml.Unmarshal([]byte(d), &m), tg.Repo)
			switch m["kind"] {
			case "Provider":
				provider = m
			case "Alert":
				alert = m
			}
		}
		require.NotNil(t, provider, tg.Repo)
		require.NotNil(t, alert, tg.Repo)
		spec := provider["spec"].(map[string]any)
		assert.Equal(t, "github", spec["type"])
		assert.Equal(t, DefaultGitURL+"/"+tg.Owner+"/"+tg.Repo, spec["address"])
		assert.Equal(t, map[string]any{"name": HealthSecret}, spec["secretRef"])
		assert.Equal(t, []any{map[string]any{"kind": "Kustomization", "name": "*", "namespace": FluxNamespace}},
			alert["spec"].(map[string]any)["eventSources"])
	}
	assert.Positive(t, n)
}

// withHealth is the example control repo with one rollout wave and the health delivery h.
func withHealth(t *testing.T, h control.HealthSpec) *control.Repo {
	t.Helper()
	repo := loadExample(t)
	repo.Platform.Spec.Rollout.Waves = []control.Wave{{Name: "all", ClusterSelector: &control.Selector{}}}
	repo.Platform.Spec.Rollout.Health = h
	return repo
}

var hmacDelivery = control.HealthSpec{Provider: control.HealthGenericHMAC, URL: "https://fleetbot.example.com/health/"}

// notificationDocs returns the Providers and Alerts of a file, each decoded strictly as
// notification-controller's v1beta3 type (an unknown or misspelt field fails).
func notificationDocs(t *testing.T, where string, data []byte) ([]notificationv1beta3.Provider, []notificationv1beta3.Alert) {
	t.Helper()
	var providers []notificationv1beta3.Provider
	var alerts []notificationv1beta3.Alert
	for i, obj := range documents(t, where, data) {
		one, err := yaml.Marshal(obj)
		require.NoError(t, err)
		switch obj["kind"] {
		case notificationv1beta3.ProviderKind:
			var p notificationv1beta3.Provider
			require.NoError(t, yaml.UnmarshalStrict(one, &p), "%s document %d decodes strictly as a v1beta3 Provider", where, i+1)
			providers = append(providers, p)
		case notificationv1beta3.AlertKind:
			var a notificationv1beta3.Alert
			require.NoError(t, yaml.UnmarshalStrict(one, &a), "%s document %d decodes strictly as a v1beta3 Alert", where, i+1)
			alerts = append(alerts, a)
		}
	}
	return providers, alerts
}

// TestHealthObjectsDecodeAsFlux: with either health delivery every Provider and Alert of every
// cluster repo, and of the management repos in hub mode, decodes strictly as
// notification-controller's v1beta3 types and matches its pinned CRD; each Alert names a
// Provider of its own namespace and sources only there (the lockdown's
// --no-cross-namespace-refs).
func TestHealthObjectsDecodeAsFlux(t *testing.T) {
	t.Parallel()
	schemas := crdSchemas(t)
	for _, h := range []control.HealthSpec{{}, hmacDelivery} {
		targets := mustRender(t, NewRenderer(Options{}), withHealth(t, h))
		provision, err := control.LoadDir(provisionExampleDir)
		require.NoError(t, err)
		provision.Platform.Spec.Rollout.Waves = []control.Wave{{Name: "all", ClusterSelector: &control.Selector{}}}
		provision.Platform.Spec.Rollout.Health = h
		targets = append(targets, mustRender(t, NewRenderer(Options{}), provision)...)
		n := 0
		for _, tg := range targets {
			for _, p := range slices.Sorted(maps.Keys(tg.Files)) {
				if !strings.HasSuffix(p, ".yaml") {
					continue
				}
				where := tg.Repo + "/" + p
				providers, alerts := notificationDocs(t, where, tg.Files[p])
				require.Len(t, alerts, len(providers), where)
				ns := map[string]bool{}
				for _, pv := range providers {
					ns[pv.Namespace+"/"+pv.Name] = true
					n++
				}
				for _, a := range alerts {
					assert.True(t, ns[a.Namespace+"/"+a.Spec.ProviderRef.Name], "%s: Alert %s/%s names a Provider of its namespace", where, a.Namespace, a.Name)
					for _, src := range a.Spec.EventSources {
						assert.Contains(t, []string{"", a.Namespace}, src.Namespace, "%s: Alert %s sources only its namespace", where, a.Name)
					}
				}
				for _, obj := range documents(t, where, tg.Files[p]) {
					if obj["kind"] != "Provider" && obj["kind"] != "Alert" {
						continue
					}
					s := schemas[obj["apiVersion"].(string)+"/"+obj["kind"].(string)]
					require.NotNil(t, s, "a pinned CRD serves %s", obj["kind"])
					raw, err := json.Marshal(obj)
					require.NoError(t, err)
					inst, err := sjs.UnmarshalJSON(bytes.NewReader(raw))
					require.NoError(t, err)
					assert.NoError(t, s.Validate(inst), "%s %s matches its CRD schema", where, obj["kind"])
				}
			}
		}
		assert.Positive(t, n, "provider %q renders health objects", h.Provider)
	}
}

// TestGenericHMACHealth: with generic-hmac every cluster's flux-system gets a Provider posting
// to serve's URL for that cluster and an Alert of all its Kustomizations and HelmReleases, and
// a workspace cluster the same in the workspace namespace, attributed to the workspace; no
// github Provider is left. The rendered objects of one workspace cluster are golden
// (testdata/health-generic-hmac.yaml, -update rewrites it).
func TestGenericHMACHealth(t *testing.T) {
	t.Parallel()
	repo := withHealth(t, hmacDelivery)
	clusters := 0
	for _, tg := range mustRender(t, NewRenderer(Options{}), repo) {
		if tg.Kind != KindCluster {
			continue
		}
		clusters++
		flux := tg.Files[FluxPath]
		providers, alerts := notificationDocs(t, tg.Repo, flux)
		c := repo.Cluster(tg.Name)
		want := 1
		if c.Spec.Workspace != "" {
			want = 2
		}
		require.Len(t, providers, want, tg.Repo)
		require.Len(t, alerts, want, tg.Repo)
		for i, pv := range providers {
			a := alerts[i]
			assert.Equal(t, "generic-hmac", pv.Spec.Type, tg.Repo)
			assert.Equal(t, HealthSecret, pv.Spec.SecretRef.Name)
			assert.Equal(t, HealthProvider, a.Spec.ProviderRef.Name)
			assert.Equal(t, "info", a.Spec.EventSeverity, "errors and successes both reach serve")
			assert.Equal(t, tg.Name, a.Spec.EventMetadata[HealthMetaCluster])
			var kinds []string
			for _, src := range a.Spec.EventSources {
				kinds = append(kinds, src.Kind+"/"+src.Name+"@"+src.Namespace)
			}
			assert.Equal(t, []string{"Kustomization/*@" + pv.Namespace, "HelmRelease/*@" + pv.Namespace}, kinds)
		}
		assert.Equal(t, FluxNamespace, providers[0].Namespace)
		assert.Equal(t, "https://fleetbot.example.com/health/"+tg.Name, providers[0].Spec.Address)
		if want == 2 {
			ns := repo.Workspace(c.Spec.Workspace).Namespace()
			assert.Equal(t, ns, providers[1].Namespace)
			assert.Equal(t, "https://fleetbot.example.com/health/"+tg.Name+"/"+ns, providers[1].Spec.Address)
			assert.Equal(t, c.Spec.Workspace, alerts[1].Spec.EventMetadata[HealthMetaWorkspace])
		}
		assert.NotContains(t, string(flux), "type: github")
		if tg.Name == "prod-eu-1" {
			i := bytes.Index(flux, []byte(hmacHealthComment))
			require.GreaterOrEqual(t, i, 0)
			golden := filepath.Join("testdata", "health-generic-hmac.yaml")
			if *update {
				require.NoError(t, os.WriteFile(golden, flux[i:], 0o644))
			}
			b, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(b), string(flux[i:]), "run go test ./internal/fanout -run TestGenericHMACHealth -update")
		}
	}
	assert.Equal(t, 4, clusters)
}

// TestGenericHMACHubHealth: a cluster provisioned in hub mode reports through the management
// cluster: a generic-hmac Provider and Alert <cluster>-health in the provision namespace,
// posting to serve's URL for that namespace with the Secret <cluster>-health.
func TestGenericHMACHubHealth(t *testing.T) {
	t.Parallel()
	repo, err := control.LoadDir(provisionExampleDir)
	require.NoError(t, err)
	repo.Platform.Spec.Rollout.Waves = []control.Wave{{Name: "all", ClusterSelector: &control.Selector{}}}
	repo.Platform.Spec.Rollout.Health = hmacDelivery
	n := 0
	for _, tg := range mustRender(t, NewRenderer(Options{}), repo) {
		if tg.Kind != KindManagement {
			continue
		}
		for p, data := range tg.Files {
			if !strings.HasSuffix(p, ".yaml") {
				continue
			}
			providers, alerts := notificationDocs(t, tg.Repo+"/"+p, data)
			for i, pv := range providers {
				n++
				cluster := strings.TrimSuffix(pv.Name, "-health")
				assert.Equal(t, "generic-hmac", pv.Spec.Type)
				assert.Equal(t, HubHealthName(cluster), pv.Spec.SecretRef.Name, "one key per cluster")
				assert.Equal(t, "https://fleetbot.example.com/health/"+cluster+"/"+pv.Namespace, pv.Spec.Address)
				assert.Equal(t, cluster, alerts[i].Spec.EventMetadata[HealthMetaCluster])
				assert.Len(t, alerts[i].Spec.EventSources, 2)
			}
		}
		assert.Contains(t, string(tg.Files[ReadmePath]), "events to fleetbot serve")
	}
	assert.Positive(t, n)
}

// TestHealthURL: the address of each Provider.
func TestHealthURL(t *testing.T) {
	assert.Equal(t, "https://f.example/health/a", HealthURL("https://f.example/health", "a", ""))
	assert.Equal(t, "https://f.example/health/a", HealthURL("https://f.example/health/", "a", FluxNamespace))
	assert.Equal(t, "https://f.example/health/a/payments", HealthURL("https://f.example/health", "a", "payments"))
}

// TestWorkspaceKustomizationWaitsWithGenericHMAC: a HelmRelease's own events name its chart
// version, never a commit (helm-controller), so with generic-hmac the workspace Kustomization
// waits for what it applies (spec.wait): a tenant HelmRelease that fails fails it, on the
// workspace commit it applied, which serve records. fleetbot's Kustomizations of flux-system
// do not change, nor does anything without generic-hmac or without waves.
func TestWorkspaceKustomizationWaitsWithGenericHMAC(t *testing.T) {
	t.Parallel()
	noWaves := loadExample(t)
	noWaves.Platform.Spec.Rollout.Health = hmacDelivery
	for _, c := range []struct {
		what string
		repo *control.Repo
		wait bool
	}{
		{"generic-hmac", withHealth(t, hmacDelivery), true},
		{"the github provider", withHealth(t, control.HealthSpec{}), false},
		{"generic-hmac without waves", noWaves, false},
	} {
		workspaces := 0
		for _, tg := range mustRender(t, NewRenderer(Options{}), c.repo) {
			if tg.Kind != KindCluster {
				continue
			}
			for _, obj := range documents(t, tg.Repo, tg.Files[FluxPath]) {
				if obj["kind"] != "Kustomization" {
					continue
				}
				md, _ := obj["metadata"].(map[string]any)
				spec, _ := obj["spec"].(map[string]any)
				wait, _ := spec["wait"].(bool)
				if md["namespace"] == FluxNamespace {
					assert.False(t, wait, "%s: %s: %s", c.what, tg.Repo, md["name"])
					continue
				}
				workspaces++
				assert.Equal(t, c.wait, wait, "%s: %s: %s", c.what, tg.Repo, md["name"])
			}
		}
		assert.Positive(t, workspaces, "%s: the example has workspace clusters", c.what)
	}
}
