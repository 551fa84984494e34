package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/report"
)

// metallbCRDs is a catalog app rendering the two CRDs metallb's manifests use.
var metallbCRDs = map[string]string{
	"catalog/metallb-crds/app.yaml":           "apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata: {name: metallb-crds}\nspec:\n  scope: cluster\n",
	"catalog/metallb-crds/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [crds.yaml]\n",
	"catalog/metallb-crds/crds.yaml":          crd("ipaddresspools", "IPAddressPool") + "---\n" + crd("l2advertisements", "L2Advertisement"),
}

func crd(plural, kind string) string {
	return "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: " + plural + ".metallb.io}\nspec:\n  group: metallb.io\n  names: {kind: " + kind + ", plural: " + plural + "}\n  scope: Namespaced\n  versions:\n  - name: v1beta1\n    served: true\n    storage: true\n    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}\n"
}

// TestPlanNeedsFollowDependsOn: once metallb depends on a component that
// renders its CRDs, plan no longer says metallb needs them from the cluster.
func TestPlanNeedsFollowDependsOn(t *testing.T) {
	t.Parallel()
	ctl := copyControl(t)
	for p, c := range metallbCRDs {
		writeFile(t, filepath.Join(ctl, p), c)
	}
	replaceIn(t, filepath.Join(ctl, "catalog/metallb/app.yaml"), "  scope: cluster\n", "  scope: cluster\n  dependsOn: [metallb-crds]\n")
	replaceIn(t, filepath.Join(ctl, "platform.yaml"), "  components:\n", "  components:\n    - app: metallb-crds\n      clusterSelector:\n        matchLabels: {network: metal}\n")

	code, out, errOut := cli(t, "plan", "--control", ctl, "--format", "json")
	require.Equal(t, 0, code, errOut)
	var p struct {
		Repos []report.DesiredRepo `json:"desired"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	require.NotEmpty(t, p.Repos)
	for _, r := range p.Repos {
		assert.Empty(t, r.Needs, r.Repo)
	}
	code, out, errOut = cli(t, "plan", "--control", ctl, "--detail")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "needs:")
	assert.Contains(t, out, "platform/metallb-crds/metallb-crds.yaml")

	// Without the dependency, the CRDs come too late or not at all: metallb
	// needs them from the cluster again.
	replaceIn(t, filepath.Join(ctl, "catalog/metallb/app.yaml"), "  dependsOn: [metallb-crds]\n", "")
	code, out, errOut = cli(t, "plan", "--control", ctl, "--detail")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "needs:    metallb: IPAddressPool.metallb.io, L2Advertisement.metallb.io from the cluster")
}

// TestApplyBadDependsOnWritesNothing: a dependsOn Flux would wait on forever
// is a validation error with file:line, and apply writes nothing.
func TestApplyBadDependsOnWritesNothing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, deps, want string
	}{
		{"unknown", "[metallb-crd]", `catalog/metallb/app.yaml:7: app metallb depends on unknown app "metallb-crd"`},
		{"not selected where metallb runs", "[podinfo]", "catalog/metallb/app.yaml:7: component metallb depends on podinfo, which is not a component of cluster(s) edge-1, prod-eu-1, prod-us-1"},
		{"cycle", "[monitoring]", "dependsOn cycle: metallb -> monitoring -> metallb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctl := copyControl(t)
			replaceIn(t, filepath.Join(ctl, "catalog/metallb/app.yaml"), "  scope: cluster\n", "  scope: cluster\n  dependsOn: "+tc.deps+"\n")
			if tc.name == "cycle" {
				replaceIn(t, filepath.Join(ctl, "catalog/monitoring/app.yaml"), "  scope: cluster\n", "  scope: cluster\n  dependsOn: [metallb]\n")
			}
			forgeDir := filepath.Join(t.TempDir(), "forge")
			code, out, errOut := cli(t, "apply", "--control", ctl, "--forge", "local:"+forgeDir)
			assert.Equal(t, 1, code, out)
			assert.Contains(t, errOut, tc.want)
			assert.Contains(t, errOut, "hint:")
			entries, err := os.ReadDir(forgeDir)
			if err == nil {
				for _, e := range entries {
					repos, _ := os.ReadDir(filepath.Join(forgeDir, e.Name()))
					assert.Empty(t, repos, "nothing written under %s", e.Name())
				}
			}
		})
	}
}
