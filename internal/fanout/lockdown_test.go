package fanout

import (
	"fmt"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// fluxControllers are the Deployments flux bootstrap writes into
// gotk-components.yaml.
var fluxControllers = []string{"source-controller", "kustomize-controller", "helm-controller",
	"notification-controller", "image-reflector-controller", "image-automation-controller"}

// gotkFiles stands in for what flux bootstrap writes beside the scaffold:
// the controller Deployments (each with the args it ships with) and the
// flux-system GitRepository and Kustomization.
func gotkFiles() map[string]string {
	var comp strings.Builder
	for _, c := range fluxControllers {
		fmt.Fprintf(&comp, "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: %s\n  namespace: flux-system\nspec:\n  selector:\n    matchLabels: {app: %s}\n  template:\n    metadata:\n      labels: {app: %s}\n    spec:\n      containers:\n      - name: manager\n        image: ghcr.io/fluxcd/%s\n        args:\n        - --events-addr=http://notification-controller.flux-system.svc.cluster.local./\n        - --log-level=info\n", c, c, c, c)
	}
	sync := "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 1m0s\n  ref: {branch: main}\n  secretRef: {name: flux-system}\n  url: ssh://git@github.com/acme/cluster-prod-eu-1\n" +
		"---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: flux-system\n  namespace: flux-system\nspec:\n  interval: 10m0s\n  path: ./flux\n  prune: true\n  sourceRef: {kind: GitRepository, name: flux-system}\n"
	return map[string]string{"gotk-components.yaml": comp.String(), "gotk-sync.yaml": sync}
}

// TestAttackClusterRunsWithoutLockdown: every cluster repo gets Flux's own
// flux-system/kustomization.yaml as a scaffold (created once, never
// managed) that, built with what flux bootstrap writes beside it, runs the
// controllers with the multi-tenancy lockdown flags the Flux documentation
// gives, and keeps the bootstrap Kustomization running as
// kustomize-controller; and fleetbot's own Kustomizations in flux-system
// name that account too, so they keep working under
// --default-service-account.
func TestAttackClusterRunsWithoutLockdown(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"source-controller":           {},
		"kustomize-controller":        {"--no-cross-namespace-refs=true", "--no-remote-bases=true", "--default-service-account=default"},
		"helm-controller":             {"--no-cross-namespace-refs=true", "--default-service-account=default"},
		"notification-controller":     {"--no-cross-namespace-refs=true"},
		"image-reflector-controller":  {"--no-cross-namespace-refs=true"},
		"image-automation-controller": {"--no-cross-namespace-refs=true"},
	}
	for _, tg := range mustRender(t, NewRenderer(Options{}), loadExample(t)) {
		if tg.Kind != KindCluster {
			assert.NotContains(t, tg.Scaffolds, FluxSystemKustomPath, tg.Repo)
			continue
		}
		scaffold, ok := tg.Scaffolds[FluxSystemKustomPath]
		require.True(t, ok, "%s has no %s scaffold", tg.Repo, FluxSystemKustomPath)
		assert.NotContains(t, tg.Files, FluxSystemKustomPath, "never managed")
		assert.False(t, KindCluster.Managed(FluxSystemKustomPath))
		assert.Contains(t, string(tg.Files[CodeownersPath]), "/"+FluxSystemKustomPath+" ", "the cluster admins own it")

		fs := filesys.MakeFsInMemory()
		require.NoError(t, fs.WriteFile("/repo/flux/flux-system/kustomization.yaml", scaffold))
		for p, data := range gotkFiles() {
			require.NoError(t, fs.WriteFile("/repo/flux/flux-system/"+p, []byte(data)))
		}
		m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/repo/flux/flux-system")
		require.NoError(t, err, tg.Repo)
		seen := 0
		for _, res := range m.Resources() {
			data, err := res.AsYAML()
			require.NoError(t, err)
			switch res.GetKind() {
			case "Deployment":
				var d appsv1.Deployment
				require.NoError(t, yaml.UnmarshalStrict(data, &d))
				args := d.Spec.Template.Spec.Containers[0].Args
				assert.Equal(t, "--events-addr=http://notification-controller.flux-system.svc.cluster.local./", args[0], "the shipped args stay")
				assert.Equal(t, want[d.Name], args[2:], "lockdown flags of %s", d.Name)
				seen++
			case "Kustomization":
				var k kustomizev1.Kustomization
				require.NoError(t, yaml.UnmarshalStrict(data, &k))
				assert.Equal(t, "kustomize-controller", k.Spec.ServiceAccountName, "flux-system keeps its rights under the lockdown")
			}
		}
		assert.Equal(t, len(fluxControllers), seen)

		for _, d := range strings.Split(string(tg.Files[FluxPath]), "\n---\n") {
			var k kustomizev1.Kustomization
			if yaml.Unmarshal([]byte(d), &k) != nil || k.Kind != "Kustomization" || k.Namespace != FluxNamespace {
				continue
			}
			assert.Equal(t, "kustomize-controller", k.Spec.ServiceAccountName, "%s: Kustomization %s must name an account under --default-service-account", tg.Repo, k.Name)
		}
	}
}

// tenancyObjects returns the Flux tenancy policy and binding of a cluster repo, decoded
// strictly.
func tenancyObjects(t *testing.T, tg *Target) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	vaps, bindings := tenancyPolicies(t, tg)
	return vaps[0], bindings[0]
}

// tenancyPolicies returns both policies of a cluster repo's tenancy file (Flux tenancy, tenant
// kinds) and their bindings, decoded strictly.
func tenancyPolicies(t *testing.T, tg *Target) ([]*admissionv1.ValidatingAdmissionPolicy, []*admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	data, ok := tg.Files[PlatformDir+"/"+TenancyPolicyFile]
	require.True(t, ok, "%s has no %s", tg.Repo, TenancyPolicyFile)
	docs := strings.Split(string(data), "\n---\n")
	require.Len(t, docs, 4)
	var vaps []*admissionv1.ValidatingAdmissionPolicy
	var bindings []*admissionv1.ValidatingAdmissionPolicyBinding
	for i := 0; i < 4; i += 2 {
		vap := &admissionv1.ValidatingAdmissionPolicy{}
		require.NoError(t, yaml.UnmarshalStrict([]byte(docs[i]), vap), "%s:\n%s", tg.Repo, docs[i])
		binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
		require.NoError(t, yaml.UnmarshalStrict([]byte(docs[i+1]), binding), "%s:\n%s", tg.Repo, docs[i+1])
		require.Equal(t, vap.Name, binding.Spec.PolicyName)
		vaps, bindings = append(vaps, vap), append(bindings, binding)
	}
	return vaps, bindings
}

// TestTenancyPolicyStrict: every cluster repo carries the tenancy policy in
// platform/fleetbot.flux-tenancy/, applied by the Kustomization
// fleetbot-tenancy, decoding strictly as
// admissionregistration.k8s.io/v1 types and bound to the namespaces
// labelled with their workspace, which flux/fleetbot.yaml labels.
func TestTenancyPolicyStrict(t *testing.T) {
	t.Parallel()
	repo := loadExample(t)
	for _, tg := range mustRender(t, NewRenderer(Options{}), repo) {
		if tg.Kind != KindCluster {
			continue
		}
		vap, binding := tenancyObjects(t, tg)
		assert.Equal(t, "admissionregistration.k8s.io/v1", vap.APIVersion)
		assert.Equal(t, admissionv1.Fail, *vap.Spec.FailurePolicy)
		assert.Equal(t, vap.Name, binding.Spec.PolicyName)
		assert.Equal(t, []admissionv1.ValidationAction{admissionv1.Deny}, binding.Spec.ValidationActions)
		assert.Equal(t, WorkspaceLabel, binding.Spec.MatchResources.NamespaceSelector.MatchExpressions[0].Key)
		var resources []string
		for _, r := range vap.Spec.MatchConstraints.ResourceRules {
			resources = append(resources, r.APIGroups[0]+"/"+r.Resources[0])
		}
		assert.Equal(t, []string{"kustomize.toolkit.fluxcd.io/kustomizations", "helm.toolkit.fluxcd.io/helmreleases"}, resources)
		assert.Contains(t, string(tg.Files[PlatformDir+"/"+TenancyDir+"/kustomization.yaml"]), "resources:\n- policy.yaml\n")
		assert.True(t, KindCluster.Managed(PlatformDir+"/"+TenancyPolicyFile))

		c := repo.Cluster(tg.Name)
		if c.Spec.Workspace == "" {
			continue
		}
		ws := repo.Workspace(c.Spec.Workspace)
		found := false
		for _, d := range strings.Split(string(tg.Files[FluxPath]), "\n---\n") {
			var ns corev1.Namespace
			if yaml.Unmarshal([]byte(d), &ns) == nil && ns.Kind == "Namespace" {
				found = true
				assert.Equal(t, ws.Namespace(), ns.Name)
				assert.Equal(t, ws.Metadata.Name, ns.Labels[WorkspaceLabel], "the label names the workspace ServiceAccount")
			}
		}
		assert.True(t, found, "%s: no workspace Namespace", tg.Repo)
	}
}

// admit evaluates the tenancy policy's CEL the way the API server does for
// obj created in a namespace labelled for workspace sa, and returns the
// messages of the validations that fail.
func admit(t *testing.T, vap *admissionv1.ValidatingAdmissionPolicy, ns, sa string, obj map[string]any) []string {
	t.Helper()
	return admitAs(t, vap, ns, sa, obj, nil)
}

// admitAs is admit for a request carrying request (its userInfo and kind).
func admitAs(t *testing.T, vap *admissionv1.ValidatingAdmissionPolicy, ns, sa string, obj, request map[string]any) []string {
	t.Helper()
	env, err := cel.NewEnv(
		cel.Variable("request", cel.DynType),
		cel.Variable("object", cel.DynType),
		cel.Variable("namespaceObject", cel.DynType),
		cel.Variable("variables", cel.MapType(cel.StringType, cel.DynType)),
	)
	require.NoError(t, err)
	eval := func(expr string, vars map[string]any) any {
		ast, iss := env.Compile(expr)
		require.NoError(t, iss.Err(), "compiling %q", expr)
		prg, err := env.Program(ast)
		require.NoError(t, err)
		out, _, err := prg.Eval(vars)
		require.NoError(t, err, "evaluating %q", expr)
		return out.Value()
	}
	nsObj := map[string]any{"metadata": map[string]any{"name": ns, "labels": map[string]any{WorkspaceLabel: sa}}}
	vars := map[string]any{"object": obj, "namespaceObject": nsObj, "variables": map[string]any{}, "request": request}
	variables := map[string]any{}
	for _, v := range vap.Spec.Variables {
		variables[v.Name] = eval(v.Expression, vars)
	}
	vars["variables"] = variables
	var denied []string
	for _, v := range vap.Spec.Validations {
		if ok, isBool := eval(v.Expression, vars).(bool); !isBool || !ok {
			msg := v.Message
			if v.MessageExpression != "" {
				msg, _ = eval(v.MessageExpression, vars).(string)
			}
			denied = append(denied, msg)
		}
	}
	return denied
}

func objectOf(t *testing.T, manifest string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &m))
	return m
}

// TestAttackTenantFluxObjectDeniedOnCluster: on the cluster, the policy denies each
// tenant escape check workspace refuses, and admits the workspace's own
// Kustomization from flux/fleetbot.yaml and well-behaved tenant objects.
func TestAttackTenantFluxObjectDeniedOnCluster(t *testing.T) {
	t.Parallel()
	var prod *Target
	for _, tg := range mustRender(t, NewRenderer(Options{}), loadExample(t)) {
		if tg.Repo == "cluster-prod-eu-1" {
			prod = tg
		}
	}
	require.NotNil(t, prod)
	vap, _ := tenancyObjects(t, prod)

	for _, d := range strings.Split(string(prod.Files[FluxPath]), "\n---\n") {
		obj := objectOf(t, d)
		if obj["kind"] == "Kustomization" && obj["metadata"].(map[string]any)["namespace"] == "payments" {
			assert.Empty(t, admit(t, vap, "payments", "payments", obj), "the workspace's own Kustomization is admitted")
		}
	}
	assert.Empty(t, admit(t, vap, "payments", "payments", objectOf(t, tenantKustomization+"  targetNamespace: payments\n  dependsOn:\n  - name: base\n  - name: db\n    namespace: payments\n")))
	assert.Empty(t, admit(t, vap, "payments", "payments", objectOf(t, tenantHelmRelease+"  storageNamespace: payments\n")))

	for attack, tc := range map[string]struct{ manifest, want string }{
		"Kustomization without serviceAccountName": {strings.Replace(tenantKustomization, "  serviceAccountName: payments\n", "", 1),
			"spec.serviceAccountName must be payments, the ServiceAccount of workspace namespace payments"},
		"Kustomization impersonating kustomize-controller": {strings.Replace(tenantKustomization, "serviceAccountName: payments", "serviceAccountName: kustomize-controller", 1),
			"spec.serviceAccountName must be payments"},
		"HelmRelease without serviceAccountName": {strings.Replace(tenantHelmRelease, "  serviceAccountName: payments\n", "", 1),
			"spec.serviceAccountName must be payments"},
		"Kustomization with kubeConfig":           {tenantKustomization + "  kubeConfig:\n    secretRef:\n      name: admin\n", "spec.kubeConfig is not allowed"},
		"HelmRelease with kubeConfig":             {tenantHelmRelease + "  kubeConfig:\n    secretRef:\n      name: admin\n", "spec.kubeConfig is not allowed"},
		"Kustomization sourceRef in flux-system":  {tenantKustomization + "    namespace: flux-system\n", "spec.sourceRef must not name another namespace"},
		"Kustomization targetNamespace elsewhere": {tenantKustomization + "  targetNamespace: kube-system\n", "spec.targetNamespace must be the workspace namespace"},
		"Kustomization dependsOn elsewhere":       {tenantKustomization + "  dependsOn:\n  - name: platform\n    namespace: flux-system\n", "spec.dependsOn must not name another namespace"},
		"HelmRelease chart sourceRef elsewhere":   {tenantHelmRelease + "        namespace: flux-system\n", "spec.chart.spec.sourceRef must not name another namespace"},
		"HelmRelease targetNamespace elsewhere":   {tenantHelmRelease + "  targetNamespace: kube-system\n", "spec.targetNamespace must be the workspace namespace"},
		"HelmRelease storageNamespace elsewhere":  {tenantHelmRelease + "  storageNamespace: flux-system\n", "spec.storageNamespace must be the workspace namespace"},
		"HelmRelease chartRef in flux-system": {"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: x\nspec:\n  serviceAccountName: payments\n  chartRef:\n    kind: OCIRepository\n    name: podinfo\n    namespace: flux-system\n",
			"spec.chartRef must not name another namespace"},
	} {
		denied := admit(t, vap, "payments", "payments", objectOf(t, tc.manifest))
		require.Len(t, denied, 1, "%s: %v", attack, denied)
		assert.Contains(t, denied[0], tc.want, attack)
	}
}

// TestAttackDecryptionDeniedOnCluster: a tenant Kustomization decrypting without a Secret of its
// own is denied by the admission policy, with what to do; one naming a Secret is admitted.
func TestAttackDecryptionDeniedOnCluster(t *testing.T) {
	t.Parallel()
	vap, _ := tenancyObjects(t, clusterTarget(t, "cluster-prod-eu-1"))
	denied := admit(t, vap, "payments", "payments", objectOf(t, tenantKustomization+"  decryption:\n    provider: sops\n"))
	require.Len(t, denied, 1, "%v", denied)
	assert.Contains(t, denied[0], "spec.decryption must name secretRef.name, a Secret in namespace payments")
	denied = admit(t, vap, "payments", "payments", objectOf(t, tenantKustomization+"  decryption:\n    provider: sops\n    secretRef:\n      name: \"\"\n"))
	require.Len(t, denied, 1, "%v", denied)
	assert.Empty(t, admit(t, vap, "payments", "payments", objectOf(t, tenantKustomization+"  decryption:\n    provider: sops\n    secretRef:\n      name: sops-age\n")))
	assert.Empty(t, admit(t, vap, "payments", "payments", objectOf(t, tenantHelmRelease)), "a HelmRelease has no decryption")
}

// TestTenantKindsDeniedOnCluster: the workspace's ServiceAccount (as Flux impersonates it) may
// create only the allowlist's kinds; anyone else in the namespace is not this policy's concern.
func TestTenantKindsDeniedOnCluster(t *testing.T) {
	t.Parallel()
	vaps, bindings := tenancyPolicies(t, clusterTarget(t, "cluster-prod-eu-1"))
	vap := vaps[1]
	assert.Equal(t, tenantKindsPolicyName, vap.Name)
	assert.Equal(t, WorkspaceLabel, bindings[1].Spec.MatchResources.NamespaceSelector.MatchExpressions[0].Key)
	as := func(user, group, kind string) map[string]any {
		return map[string]any{"userInfo": map[string]any{"username": user}, "kind": map[string]any{"group": group, "version": "v1", "kind": kind}}
	}
	tenant := "system:serviceaccount:payments:payments"
	for _, ok := range []map[string]any{as(tenant, "apps", "Deployment"), as(tenant, "", "ConfigMap"), as(tenant, "kustomize.toolkit.fluxcd.io", "Kustomization"),
		as("system:serviceaccount:flux-system:kustomize-controller", "apps", "DaemonSet"), as(tenant+"x", "apps", "DaemonSet")} {
		assert.Empty(t, admitAs(t, vap, "payments", "payments", map[string]any{}, ok), "%v", ok)
	}
	for _, bad := range []map[string]any{as(tenant, "apps", "DaemonSet"), as(tenant, "", "Endpoints"), as(tenant, "monitoring.coreos.com", "ServiceMonitor")} {
		denied := admitAs(t, vap, "payments", "payments", map[string]any{}, bad)
		require.Len(t, denied, 1, "%v", bad)
		assert.Contains(t, denied[0], "is not allowed in a workspace")
		assert.Contains(t, denied[0], "spec.tenants.allow in platform.yaml")
	}
}

func clusterTarget(t *testing.T, repo string) *Target {
	t.Helper()
	for _, tg := range mustRender(t, NewRenderer(Options{}), loadExample(t)) {
		if tg.Repo == repo {
			return tg
		}
	}
	t.Fatalf("no target %s", repo)
	return nil
}
