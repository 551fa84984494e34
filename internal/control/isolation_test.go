package control

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const wsPayments = "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: payments}\nspec:\n  admins: [payments-devs]\n  apps: [{app: podinfo}]\n"

// TestNameMustBeTheFileName: clusters/<name>.yaml holds cluster <name> and nothing else, so a
// team delegated clusters/payments-*.yaml cannot define another team's cluster, a retired one or
// the management hub by naming it in a file it owns. The issue names both locations.
func TestNameMustBeTheFileName(t *testing.T) {
	for _, tc := range []struct {
		file, doc, msg, hint string
	}{
		{"clusters/payments-3.yaml", "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: prod-eu-1\n",
			`cluster "prod-eu-1" is defined in clusters/payments-3.yaml (metadata.name at clusters/payments-3.yaml:4)`,
			"rename the file to clusters/prod-eu-1.yaml, or set metadata.name: payments-3"},
		{"workspaces/pay.yml", "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: search\n",
			`workspace "search" is defined in workspaces/pay.yml`, "rename the file to workspaces/search.yml, or set metadata.name: pay"},
	} {
		is := loadIssues(t, fixture(t, map[string]string{tc.file: tc.doc}), tc.file)
		assertIssue(t, is, tc.file, want{pos: tc.file + ":4", msg: tc.msg, hint: tc.hint})
	}
}

// TestWorkspacePodSecurity: restricted by default, baseline by platform decision, privileged
// refused at its line with what to do.
func TestWorkspacePodSecurity(t *testing.T) {
	repo, err := Load(fixture(t, nil))
	require.NoError(t, err)
	assert.Equal(t, PodSecurityRestricted, repo.Workspace("payments").PodSecurityLevel())

	repo, err = Load(fixture(t, map[string]string{"workspaces/payments.yaml": wsPayments + "  podSecurity: baseline\n"}))
	require.NoError(t, err)
	assert.Equal(t, PodSecurityBaseline, repo.Workspace("payments").PodSecurityLevel())

	is := loadIssues(t, fixture(t, map[string]string{"workspaces/payments.yaml": wsPayments + "  podSecurity: privileged\n"}), "privileged")
	assertIssue(t, is, "privileged", want{pos: "workspaces/payments.yaml:7", msg: "privileged is never allowed for a workspace", hint: "use restricted (the default) or baseline"})
	is = loadIssues(t, fixture(t, map[string]string{"workspaces/payments.yaml": wsPayments + "  podSecurity: Restricted\n"}), "case")
	assertIssue(t, is, "case", want{pos: "workspaces/payments.yaml:7", msg: `invalid Pod Security level "Restricted"`})
}

func TestComponentPodSecurityIsALevel(t *testing.T) {
	platform := "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  components:\n    - app: monitoring\n      clusterSelector: {}\n      podSecurity: root\n"
	is := loadIssues(t, fixture(t, map[string]string{"platform.yaml": platform}), "component")
	assertIssue(t, is, "component", want{pos: "platform.yaml:10", msg: `invalid Pod Security level "root"`, hint: "privileged, baseline or restricted"})
}

// TestNamespaceHasOneOwner: a workspace may not take a namespace of the system, of fleetbot
// itself (its deployment, a management cluster's provisioning namespace) or of another
// workspace; each refusal names both definitions.
func TestNamespaceHasOneOwner(t *testing.T) {
	ws := func(name, ns string) string {
		return "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: " + name + "}\nspec:\n  namespace: " + ns + "\n"
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		w     want
	}{
		{"fleetbot", map[string]string{"workspaces/payments.yaml": ws("payments", "fleetbot")},
			want{pos: "workspaces/payments.yaml:5", msg: `namespace "fleetbot" belongs to fleetbot's own deployment (deploy/base/kustomization.yaml)`, hint: "a namespace of the workspace's own"}},
		{"kube prefix", map[string]string{"workspaces/payments.yaml": ws("payments", "kube-flannel")},
			want{pos: "workspaces/payments.yaml:5", msg: `namespace "kube-flannel" is reserved for Kubernetes or Flux`}},
		{"flux-system", map[string]string{"workspaces/payments.yaml": ws("payments", "flux-system")},
			want{pos: "workspaces/payments.yaml:5", msg: `namespace "flux-system" is reserved`}},
		{"two workspaces", map[string]string{"workspaces/payments.yaml": ws("payments", "shop"), "workspaces/search.yaml": ws("search", "shop")},
			want{pos: "workspaces/search.yaml:5", msg: `namespace "shop" is already the namespace of workspace payments (workspaces/payments.yaml:5)`}},
		{"provisioning", map[string]string{
			"workspaces/payments.yaml": ws("payments", "capi-clusters"),
			"platform.yaml":            "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  managementClusters:\n    - name: hub\n      namespace: capi-clusters\n",
		}, want{pos: "workspaces/payments.yaml:5", msg: `belongs to the provisioning namespace of management cluster hub (it holds every provisioned cluster's kubeconfig) (platform.yaml:9)`}},
	} {
		is := loadIssues(t, fixture(t, tc.files), tc.name)
		assertIssue(t, is, tc.name, tc.w)
	}
}

// TestFleetbotNamespaceIsTheDeployments keeps FleetbotNamespace the namespace deploy/ installs
// fleetbot into.
func TestFleetbotNamespaceIsTheDeployments(t *testing.T) {
	data, err := os.ReadFile("../../deploy/base/kustomization.yaml")
	require.NoError(t, err)
	var k struct {
		Namespace string `json:"namespace"`
	}
	require.NoError(t, yaml.Unmarshal(data, &k))
	assert.Equal(t, FleetbotNamespace, k.Namespace)
}

func TestTenantAllowlistExtension(t *testing.T) {
	head := "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  components: [{app: metallb, clusterSelector: {matchLabels: {network: metal}}}, {app: monitoring, clusterSelector: {}}]\n  tenants:\n    allow:\n"
	repo, err := Load(fixture(t, map[string]string{"platform.yaml": head +
		"      - {apiGroup: monitoring.coreos.com, kind: ServiceMonitor}\n      - {apiGroup: notification.toolkit.fluxcd.io, kind: Alert, fields: [providerRef, eventSources]}\n"}))
	require.NoError(t, err)
	assert.Len(t, repo.Platform.Spec.Tenants.Allow, 2)

	is := loadIssues(t, fixture(t, map[string]string{"platform.yaml": head +
		"      - {apiGroup: notification.toolkit.fluxcd.io, kind: Alert}\n      - {apiGroup: kustomize.toolkit.fluxcd.io, kind: Kustomization, fields: [path, kubeConfig]}\n      - {apiGroup: Bad_Group, kind: X}\n      - {apiGroup: apps}\n"}), "bad")
	assertIssue(t, is, "flux fields", want{pos: "platform.yaml:10", msg: "is a Flux kind", hint: "list under fields"})
	assertIssue(t, is, "kubeConfig", want{pos: "platform.yaml:11", msg: "spec.kubeConfig is never allowed"})
	assertIssue(t, is, "group", want{pos: "platform.yaml:12", msg: `invalid API group "Bad_Group"`})
	assertIssue(t, is, "kind", want{pos: "platform.yaml:13", msg: "kind is required"})
	for _, i := range is {
		assert.NotEmpty(t, i.Hint, "every refusal says what to do: %s", i)
		assert.False(t, strings.HasPrefix(i.Pos.File, "clusters/"), "%s", i)
	}
}
