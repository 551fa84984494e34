package fanout

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

const (
	provisionExampleDir = "../../testdata/provision/control"
	provisionGoldenDir  = "../../testdata/provision/golden"
)

// renderProvisionExample returns the targets of the provisioning example control repo:
// a slice of the test's own over one render shared by the package's tests (which only read
// the targets).
func renderProvisionExample(t *testing.T) []*Target {
	t.Helper()
	targets, err := provisionExample()
	require.NoError(t, err)
	return slices.Clone(targets)
}

// renderProvisionExampleWithWaves is renderProvisionExample with one rollout wave of every
// cluster, which adds the health Provider and Alert.
func renderProvisionExampleWithWaves(t *testing.T) []*Target {
	t.Helper()
	targets, err := provisionExampleWithWaves()
	require.NoError(t, err)
	return slices.Clone(targets)
}

// provisionExample and provisionExampleWithWaves render the provisioning example once.
var (
	provisionExample          = sync.OnceValues(func() ([]*Target, error) { return renderProvision(nil) })
	provisionExampleWithWaves = sync.OnceValues(func() ([]*Target, error) {
		return renderProvision([]control.Wave{{Name: "all", ClusterSelector: &control.Selector{}}})
	})
)

func renderProvision(waves []control.Wave) ([]*Target, error) {
	repo, err := control.LoadDir(provisionExampleDir)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", provisionExampleDir, err)
	}
	if waves != nil {
		repo.Platform.Spec.Rollout.Waves = waves
	}
	return NewRenderer(Options{}).Render(repo)
}

// TestGoldenManagement compares the management repos rendered from
// testdata/provision/control with testdata/provision/golden (-update
// rewrites them), the same way TestGolden does for cluster and workspace repos.
func TestGoldenManagement(t *testing.T) {
	t.Parallel()
	var mgmt []*Target
	for _, tg := range renderProvisionExample(t) {
		if tg.Kind == KindManagement {
			mgmt = append(mgmt, tg)
		}
	}
	require.Len(t, mgmt, 2, "one management repo per management cluster")
	got := tree(t, mgmt)
	if *update {
		require.NoError(t, os.RemoveAll(provisionGoldenDir))
		for p, data := range got {
			file := filepath.Join(provisionGoldenDir, filepath.FromSlash(p))
			require.NoError(t, os.MkdirAll(filepath.Dir(file), 0o755))
			require.NoError(t, os.WriteFile(file, data, 0o644))
		}
		return
	}
	want := readGolden(t, provisionGoldenDir)
	for _, p := range slices.Sorted(maps.Keys(got)) {
		w, ok := want[p]
		if !ok {
			t.Errorf("%s is rendered but has no golden file (run with -update)", p)
			continue
		}
		if d := lineDiff(string(w), string(got[p])); d != "" {
			t.Errorf("%s differs from its golden file (-want +got):\n%s", p, d)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[p]; !ok {
			t.Errorf("golden file %s is no longer rendered (run with -update)", p)
		}
	}
}

func TestManagementRepoPersonasAndPaths(t *testing.T) {
	t.Parallel()
	var hub *Target
	for _, tg := range renderProvisionExample(t) {
		if tg.Repo == "mgmt-hub-eu" {
			hub = tg
		}
	}
	require.NotNil(t, hub)
	assert.Equal(t, KindManagement, hub.Kind)
	assert.True(t, strings.HasSuffix(string(hub.Files[CodeownersPath]), "\n* @acme/platform\n"), "CODEOWNERS: platform admins own everything")
	assert.NotContains(t, string(hub.Files[CodeownersPath]), "payments-sre", "no cluster admin team in a management repo")
	assert.Equal(t, map[string]string{"platform": "admin"}, rolesOf(hub), "platform admins are the only team")
	assert.Empty(t, hub.Scaffolds, "nothing in a management repo belongs to another persona")
	for p := range hub.Files {
		assert.True(t, KindManagement.Managed(p), "%s is managed", p)
	}
	assert.False(t, KindManagement.Managed("notes/runbook.md"), "other paths are people's")
	assert.Contains(t, hub.Files, "provision/clusters/prod-eu-2.yaml")
	assert.NotContains(t, hub.Files, "provision/clusters/edge-3.yaml", "edge-3 is provisioned on hub-us")
	assert.Contains(t, hub.Files, "provision/sources/aws.yaml")
	assert.NotContains(t, hub.Files, "provision/sources/metal.yaml", "only the profiles in use on the management cluster")
}

func rolesOf(t *Target) map[string]string {
	out := map[string]string{}
	for team, r := range t.Access.Teams {
		out[team] = string(r)
	}
	return out
}

func TestProvisionRetainOrphansDeleteDoesNot(t *testing.T) {
	t.Parallel()
	files := map[string]string{}
	for _, tg := range renderProvisionExample(t) {
		for p, d := range tg.Files {
			files[tg.Repo+"/"+p] = string(d)
		}
	}
	retain := files["mgmt-hub-eu/provision/clusters/prod-eu-2.yaml"]
	assert.Equal(t, 4, strings.Count(retain, PruneAnnotation+": "+PruneDisabled), "Retain: HelmRelease, GitRepository and both hub Kustomizations survive the file's removal")
	assert.Contains(t, retain, DeletionPolicyAnnotation+": Retain")
	del := files["capi-hub-us/provision/clusters/edge-3.yaml"]
	assert.NotContains(t, del, PruneAnnotation, "Delete: removal prunes the HelmRelease")
	assert.Contains(t, del, DeletionPolicyAnnotation+": Delete")
	assert.Contains(t, del, "namespace: capi-clusters")
	assert.Contains(t, del, "chartRef:", "an OCI profile is referenced through chartRef")
}

func TestProvisionedClusterReadme(t *testing.T) {
	t.Parallel()
	readmes := map[string]string{}
	for _, tg := range renderProvisionExample(t) {
		readmes[tg.Repo] = string(tg.Files[ReadmePath])
	}
	assert.Contains(t, readmes["cluster-prod-eu-2"], "## Provisioned by pull request")
	assert.Contains(t, readmes["cluster-prod-eu-2"], "repo `acme/mgmt-hub-eu`, file `provision/clusters/prod-eu-2.yaml`")
	assert.Contains(t, readmes["cluster-prod-eu-2"], "kubeconfig Secret `prod-eu-2-kubeconfig`")
	assert.Contains(t, readmes["cluster-edge-3"], "deletion policy `Delete`")
	assert.NotContains(t, readmes["cluster-prod-eu-1"], "Provisioned", "a cluster that is not provisioned")
}

func TestScalarValueKeepsEveryCharacter(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]any{
		"true": true, "false": false, "100": int64(100), "0": int64(0),
		"012345678901": "012345678901", "-1": int64(-1), "+1": "+1", "1.50": "1.50", "1e3": "1e3", "yes": "yes", "": "",
	} {
		assert.Equal(t, want, scalarValue(in), "%q", in)
	}
}

// TestHubHealthObjectsOnlyWithWaves: with rollout waves, every provisioned
// cluster's file in its management repo also holds the Provider and Alert
// <cluster>-health, which make the management cluster's Flux post the hub
// Kustomizations' commit statuses on the cluster repo (the cluster repo's own
// flux/, with the Provider of cluster repos, is never applied in hub mode);
// without waves, neither.
func TestHubHealthObjectsOnlyWithWaves(t *testing.T) {
	t.Parallel()
	for _, tg := range renderProvisionExample(t) {
		for p, data := range tg.Files {
			assert.NotContains(t, string(data), "kind: Provider", "%s/%s without waves", tg.Repo, p)
		}
	}
	n := 0
	for _, tg := range renderProvisionExampleWithWaves(t) {
		if tg.Kind != KindManagement {
			continue
		}
		for _, p := range slices.Sorted(maps.Keys(tg.Files)) {
			if !strings.HasPrefix(p, ProvisionClustersDir+"/") {
				continue
			}
			cluster := strings.TrimSuffix(strings.TrimPrefix(p, ProvisionClustersDir+"/"), ".yaml")
			byKind := map[string]map[string]any{}
			for _, obj := range documents(t, tg.Repo+"/"+p, tg.Files[p]) {
				byKind[obj["kind"].(string)] = obj
			}
			provider, alert, git := byKind["Provider"], byKind["Alert"], byKind["GitRepository"]
			require.NotNil(t, provider, "%s/%s", tg.Repo, p)
			require.NotNil(t, alert, "%s/%s", tg.Repo, p)
			n++
			assert.Equal(t, HubHealthName(cluster), valueAt(provider, "metadata", "name"))
			assert.Equal(t, valueAt(git, "metadata", "namespace"), valueAt(provider, "metadata", "namespace"), "beside the hub Kustomizations")
			assert.Equal(t, "github", valueAt(provider, "spec", "type"))
			assert.Equal(t, valueAt(git, "spec", "url"), valueAt(provider, "spec", "address"), "the cluster repo the hub Kustomizations apply")
			assert.Equal(t, DefaultGitURL+"/"+tg.Owner+"/cluster-"+cluster, valueAt(provider, "spec", "address"))
			assert.Equal(t, HealthSecret, valueAt(provider, "spec", "secretRef", "name"))
			assert.Equal(t, HubHealthName(cluster), valueAt(alert, "spec", "providerRef", "name"))
			assert.Equal(t, []any{
				map[string]any{"kind": "Kustomization", "name": cluster + "-platform"},
				map[string]any{"kind": "Kustomization", "name": cluster + "-apps"},
			}, valueAt(alert, "spec", "eventSources"))
		}
	}
	assert.Equal(t, 2, n, "both provisioned clusters of the example")
}
