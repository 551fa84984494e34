package fanout

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// checkTenantManifest adds manifest as apps/flux.yaml of the payments
// workspace repo and returns what check workspace says about it, once (the
// same problem is reported per cluster).
func checkTenantManifest(t *testing.T, manifest string) []RepoProblem {
	t.Helper()
	files := workspaceRepo(t)
	files["apps/kustomization.yaml"] = []byte("resources:\n- flux.yaml\n")
	files["apps/flux.yaml"] = []byte(manifest)
	var once []RepoProblem
	seen := map[string]bool{}
	for _, p := range CheckRepo(files, notificationsAllowed) {
		key := p.File + ":" + p.Object + ":" + strings.Split(p.Message, " (rendered by")[0]
		if !seen[key] {
			seen[key] = true
			once = append(once, p)
		}
	}
	return once
}

// notificationsAllowed is paymentsCheck with the platform allowing Flux's Alert and Receiver
// (spec.tenants.allow), whose cross-namespace references the check still refuses.
var notificationsAllowed = func() RepoCheck {
	c := paymentsCheck
	c.Allow = []control.TenantKind{
		{APIGroup: "notification.toolkit.fluxcd.io", Kind: "Alert", Fields: []string{"providerRef", "eventSources"}},
		{APIGroup: "notification.toolkit.fluxcd.io", Kind: "Receiver", Fields: []string{"type", "secretRef", "resources"}},
	}
	return c
}()

const tenantKustomization = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: tenant
spec:
  interval: 10m
  path: ./deploy
  prune: true
  serviceAccountName: payments
  sourceRef:
    kind: GitRepository
    name: tenant
`

const tenantHelmRelease = `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: tenant
spec:
  interval: 10m
  serviceAccountName: payments
  chart:
    spec:
      chart: podinfo
      sourceRef:
        kind: HelmRepository
        name: podinfo
`

// TestAttackTenantFluxObjectEscapesNamespace: each way a workspace admin could make a
// Flux object leave the workspace namespace is refused by check workspace,
// at the file and line of the field (from the parsed YAML), with why and
// how to fix it.
func TestAttackTenantFluxObjectEscapesNamespace(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attack   string
		manifest string
		line     int
		want     string
		hint     string
	}{{
		attack:   "Kustomization without serviceAccountName runs as cluster-admin",
		manifest: strings.Replace(tenantKustomization, "  serviceAccountName: payments\n", "", 1),
		line:     5, // spec:
		want:     "has no spec.serviceAccountName: on a cluster without Flux's multi-tenancy lockdown it would run with the controller's cluster-admin rights",
		hint:     "set spec.serviceAccountName: payments",
	}, {
		attack:   "Kustomization impersonating another ServiceAccount",
		manifest: strings.Replace(tenantKustomization, "serviceAccountName: payments", "serviceAccountName: kustomize-controller", 1),
		line:     9,
		want:     `impersonates ServiceAccount "kustomize-controller"`,
		hint:     "set spec.serviceAccountName: payments",
	}, {
		attack:   "HelmRelease without serviceAccountName runs as cluster-admin",
		manifest: strings.Replace(tenantHelmRelease, "  serviceAccountName: payments\n", "", 1),
		line:     5,
		want:     "has no spec.serviceAccountName",
		hint:     "set spec.serviceAccountName: payments",
	}, {
		attack:   "Kustomization with kubeConfig",
		manifest: tenantKustomization + "  kubeConfig:\n    secretRef:\n      name: admin-kubeconfig\n",
		line:     13,
		want:     "has spec.kubeConfig",
		hint:     "remove spec.kubeConfig",
	}, {
		attack:   "HelmRelease with kubeConfig",
		manifest: tenantHelmRelease + "  kubeConfig:\n    secretRef:\n      name: admin-kubeconfig\n",
		line:     14,
		want:     "has spec.kubeConfig",
		hint:     "remove spec.kubeConfig",
	}, {
		attack:   "Kustomization with a sourceRef in flux-system",
		manifest: tenantKustomization + "    namespace: flux-system\n",
		line:     13,
		want:     `spec.sourceRef names namespace "flux-system"`,
		hint:     "set it to payments",
	}, {
		attack:   "Kustomization with a targetNamespace outside the workspace",
		manifest: tenantKustomization + "  targetNamespace: kube-system\n",
		line:     13,
		want:     `sets spec.targetNamespace to "kube-system"`,
		hint:     "set it to payments",
	}, {
		attack:   "Kustomization depending on another namespace's Kustomization",
		manifest: tenantKustomization + "  dependsOn:\n  - name: platform\n    namespace: flux-system\n",
		line:     15,
		want:     `spec.dependsOn.0 names namespace "flux-system"`,
	}, {
		attack:   "HelmRelease with a chart.spec.sourceRef in flux-system",
		manifest: tenantHelmRelease + "        namespace: flux-system\n",
		line:     14,
		want:     `spec.chart.spec.sourceRef names namespace "flux-system"`,
	}, {
		attack: "HelmRelease with a chartRef in flux-system",
		manifest: strings.Replace(tenantHelmRelease, "  chart:\n    spec:\n      chart: podinfo\n      sourceRef:\n        kind: HelmRepository\n        name: podinfo\n",
			"  chartRef:\n    kind: OCIRepository\n    name: podinfo\n    namespace: flux-system\n", 1),
		line: 11,
		want: `spec.chartRef names namespace "flux-system"`,
	}, {
		attack:   "HelmRelease with a targetNamespace outside the workspace",
		manifest: tenantHelmRelease + "  targetNamespace: kube-system\n",
		line:     14,
		want:     `sets spec.targetNamespace to "kube-system"`,
	}, {
		attack:   "HelmRelease storing its release in another namespace",
		manifest: tenantHelmRelease + "  storageNamespace: flux-system\n",
		line:     14,
		want:     `sets spec.storageNamespace to "flux-system"`,
	}, {
		attack:   "OCIRepository pulling with the controller's cloud identity",
		manifest: "apiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: images\nspec:\n  interval: 10m\n  url: oci://123.dkr.ecr.eu-west-1.amazonaws.com/platform\n  provider: aws\n",
		line:     8,
		want:     `uses provider "aws"`,
	}, {
		attack:   "Alert reading events of another namespace",
		manifest: "apiVersion: notification.toolkit.fluxcd.io/v1beta3\nkind: Alert\nmetadata:\n  name: spy\nspec:\n  providerRef:\n    name: slack\n  eventSources:\n  - kind: Kustomization\n    name: '*'\n    namespace: flux-system\n",
		line:     11,
		want:     `spec.eventSources.0 names namespace "flux-system"`,
	}, {
		attack:   "Receiver triggering another namespace's reconciliation",
		manifest: "apiVersion: notification.toolkit.fluxcd.io/v1\nkind: Receiver\nmetadata:\n  name: poke\nspec:\n  type: generic\n  secretRef:\n    name: token\n  resources:\n  - kind: GitRepository\n    name: flux-system\n    namespace: flux-system\n",
		line:     12,
		want:     `spec.resources.0 names namespace "flux-system"`,
	}}
	for _, tc := range tests {
		t.Run(tc.attack, func(t *testing.T) {
			got := checkTenantManifest(t, tc.manifest)
			require.Len(t, got, 1, "%v", got)
			p := got[0]
			assert.Equal(t, "apps/flux.yaml", p.File)
			assert.Equal(t, tc.line, p.Line, "line of %s", p.String())
			assert.Contains(t, p.Message, tc.want)
			assert.Contains(t, p.Message, "rendered by clusters/prod-")
			assert.NotEmpty(t, p.Hint)
			assert.Contains(t, p.Hint, tc.hint)
		})
	}
}

// TestTenantFluxObjectsAllowed: Flux objects that stay in the workspace
// namespace as its ServiceAccount pass.
func TestTenantFluxObjectsAllowed(t *testing.T) {
	t.Parallel()
	manifest := tenantKustomization + "  targetNamespace: payments\n  dependsOn:\n  - name: base\n" +
		"---\n" + tenantHelmRelease + "  storageNamespace: payments\n" +
		"---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: tenant\nspec:\n  interval: 10m\n  url: https://github.com/acme/tenant\n  secretRef:\n    name: git\n" +
		"---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: HelmRepository\nmetadata:\n  name: podinfo\nspec:\n  interval: 10m\n  url: https://stefanprodan.github.io/podinfo\n" +
		"---\napiVersion: source.toolkit.fluxcd.io/v1\nkind: OCIRepository\nmetadata:\n  name: images\nspec:\n  interval: 10m\n  url: oci://ghcr.io/acme/app\n  provider: generic\n"
	assert.Empty(t, checkTenantManifest(t, manifest))
}

// TestTenantFluxObjectsNotCheckedInClusterRepo: cluster admins own their
// cluster; check cluster does not confine their Flux objects.
func TestTenantFluxObjectsNotCheckedInClusterRepo(t *testing.T) {
	t.Parallel()
	files := workspaceRepo(t)
	files["apps/kustomization.yaml"] = []byte("resources:\n- flux.yaml\n")
	files["apps/flux.yaml"] = []byte(strings.Replace(tenantKustomization, "  serviceAccountName: payments\n", "", 1))
	assert.Empty(t, CheckRepo(files, RepoCheck{Entries: []string{"apps"}}))
}
