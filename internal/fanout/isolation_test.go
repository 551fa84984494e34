package fanout

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// checkApps adds manifest as apps/tenant.yaml of the payments workspace repo and returns the
// problems check workspace finds on prod-eu-1's build, with check's options changed by opt.
func checkApps(t *testing.T, manifest string, opt func(*RepoCheck)) []RepoProblem {
	t.Helper()
	files := workspaceRepo(t)
	files["apps/kustomization.yaml"] = []byte("resources:\n- tenant.yaml\n")
	files["apps/tenant.yaml"] = []byte(manifest)
	c := paymentsCheck
	c.Entries = []string{"clusters/prod-eu-1"}
	if opt != nil {
		opt(&c)
	}
	return CheckRepo(files, c)
}

// rootOnTheNode is the first attack of issue 31: a workspace admin's pod with privileged: true,
// the host's PID and network namespaces and the host's / mounted.
const rootOnTheNode = `apiVersion: v1
kind: Pod
metadata:
  name: root
spec:
  hostPID: true
  hostNetwork: true
  containers:
  - name: shell
    image: alpine
    securityContext:
      privileged: true
    volumeMounts:
    - {name: host, mountPath: /host}
  volumes:
  - name: host
    hostPath: {path: /}
`

// TestAttackRootOnTheNode: the pod that passed check workspace is refused by the upstream Pod
// Security policy at its file and line, naming each failing check and what to do, at
// restricted (the default) and at baseline.
func TestAttackRootOnTheNode(t *testing.T) {
	for _, level := range []string{"", control.PodSecurityBaseline} {
		got := checkApps(t, rootOnTheNode, func(c *RepoCheck) { c.PodSecurity = level })
		require.Len(t, got, 1, "%v", got)
		p := got[0]
		assert.Equal(t, "apps/tenant.yaml:5", fmt.Sprintf("%s:%d", p.File, p.Line), "the pod's spec")
		assert.Equal(t, "Pod/root", p.Object)
		for _, check := range []string{"privileged", "host namespaces", "hostPath"} {
			assert.Contains(t, p.Message, check, "level %q", level)
		}
		want := "restricted:v1.36"
		if level != "" {
			want = level + ":v1.36"
		}
		assert.Contains(t, p.Message, `violates PodSecurity "`+want+`"`)
		assert.Contains(t, p.Hint, "remove securityContext.privileged")
		assert.Contains(t, p.Hint, "remove hostNetwork, hostPID and hostIPC")
	}
}

// restrictedSpec is a pod spec meeting the restricted level.
const restrictedSpec = `securityContext:
  runAsNonRoot: true
  seccompProfile: {type: RuntimeDefault}
containers:
- name: app
  image: app
  securityContext:
    allowPrivilegeEscalation: false
    capabilities: {drop: [ALL]}
`

// privilegedSpec is a pod spec only the privileged level admits.
const privilegedSpec = `containers:
- name: app
  image: app
  securityContext: {privileged: true}
`

// workloadOf wraps a pod spec in an object of kind, where kind keeps its pod template.
func workloadOf(t *testing.T, apiVersion, kind, spec string) map[string]any {
	t.Helper()
	var s map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(spec), &s))
	tmpl := map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "x"}}, "spec": s}
	obj := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "x"}}
	switch kind {
	case "Pod":
		obj["spec"] = s
	case "CronJob":
		obj["spec"] = map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": tmpl}}}
	case "HelmRelease":
		obj["spec"] = map[string]any{"values": map[string]any{"server": map[string]any{"podTemplate": tmpl}, "worker": s, "replicas": 2}}
	default:
		obj["spec"] = map[string]any{"template": tmpl}
	}
	return obj
}

// TestPodSecurityEveryPodTemplate: every kind that makes pods is evaluated where it keeps its
// pod (a HelmRelease's values wherever a pod spec or template shows), by the upstream policy,
// at the namespace's level.
func TestPodSecurityEveryPodTemplate(t *testing.T) {
	ev, err := newPodSecurityEvaluator()
	require.NoError(t, err)
	kinds := []struct{ apiVersion, kind, path string }{
		{"v1", "Pod", "spec"},
		{"apps/v1", "Deployment", "spec.template.spec"},
		{"apps/v1", "StatefulSet", "spec.template.spec"},
		{"apps/v1", "DaemonSet", "spec.template.spec"},
		{"apps/v1", "ReplicaSet", "spec.template.spec"},
		{"v1", "ReplicationController", "spec.template.spec"},
		{"batch/v1", "Job", "spec.template.spec"},
		{"batch/v1", "CronJob", "spec.jobTemplate.spec.template.spec"},
		{"helm.toolkit.fluxcd.io/v2", "HelmRelease", "spec.values.server.podTemplate.spec"},
	}
	for _, k := range kinds {
		for _, level := range []string{control.PodSecurityRestricted, control.PodSecurityBaseline} {
			assert.Empty(t, podSecurityFindings(ev, workloadOf(t, k.apiVersion, k.kind, restrictedSpec), level), "%s at %s", k.kind, level)
			got := podSecurityFindings(ev, workloadOf(t, k.apiVersion, k.kind, privilegedSpec), level)
			require.NotEmpty(t, got, "%s at %s", k.kind, level)
			assert.Equal(t, k.path, strings.Join(got[0].Path, "."), k.kind)
			assert.Contains(t, got[0].Message, `privileged (container "app" must not set securityContext.privileged=true)`)
		}
		assert.Empty(t, podSecurityFindings(ev, workloadOf(t, k.apiVersion, k.kind, privilegedSpec), control.PodSecurityPrivileged))
	}
	// A HelmRelease finds a bare pod spec in its values too (worker), beside the template.
	got := podSecurityFindings(ev, workloadOf(t, "helm.toolkit.fluxcd.io/v2", "HelmRelease", privilegedSpec), control.PodSecurityRestricted)
	require.Len(t, got, 2)
	assert.Equal(t, "spec.values.worker", strings.Join(got[1].Path, "."))
	// A ConfigMap holding a pod-shaped map is not a pod.
	assert.Empty(t, podSecurityFindings(ev, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"containers": "x"}}, control.PodSecurityRestricted))
	// The baseline level admits what restricted refuses (a root container), as the API server does.
	root := "containers:\n- name: app\n  image: app\n"
	assert.Empty(t, podSecurityFindings(ev, workloadOf(t, "apps/v1", "Deployment", root), control.PodSecurityBaseline))
	got = podSecurityFindings(ev, workloadOf(t, "apps/v1", "Deployment", root), control.PodSecurityRestricted)
	require.Len(t, got, 1)
	assert.Contains(t, got[0].Hint, "spec.podSecurity: baseline")
}

// TestPodSecurityVersionIsTheModules: the version fleetbot pins in the labels is the one of the
// policy package it evaluates with, so the offline verdict is the API server's at that version.
func TestPodSecurityVersionIsTheModules(t *testing.T) {
	data, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "k8s.io/pod-security-admission" {
			v := strings.Split(strings.TrimPrefix(f[1], "v0."), ".")[0]
			assert.Equal(t, "v1."+v, PodSecurityVersion, "module %s", f[1])
			return
		}
	}
	t.Fatal("k8s.io/pod-security-admission is not required in go.mod")
}

// TestAllowlistRefusesUnlistedKinds: a kind nobody listed is refused with the list and where
// the platform extends it; the extension admits it.
func TestAllowlistRefusesUnlistedKinds(t *testing.T) {
	sm := "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: web\nspec:\n  endpoints: [{port: http}]\n"
	got := checkApps(t, sm, nil)
	require.Len(t, got, 1, "%v", got)
	assert.Equal(t, 2, got[0].Line)
	assert.Contains(t, got[0].Message, "kind ServiceMonitor.monitoring.coreos.com is not allowed in a workspace repo")
	assert.Contains(t, got[0].Hint, "spec.tenants.allow in platform.yaml")
	assert.Contains(t, got[0].Hint, "Deployment.apps")
	got = checkApps(t, sm, func(c *RepoCheck) {
		c.Allow = []control.TenantKind{{APIGroup: "monitoring.coreos.com", Kind: "ServiceMonitor"}}
	})
	assert.Empty(t, got)
	// DaemonSet is not in the default list: a pod on every node is the platform's call.
	got = checkApps(t, "apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: agent\nspec:\n  template:\n    spec:\n"+indentBy(restrictedSpec, "      "), nil)
	require.Len(t, got, 1, "%v", got)
	assert.Contains(t, got[0].Message, "kind DaemonSet.apps is not allowed")
}

func indentBy(s, by string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// TestAttackDecryptionWithTheControllersIdentity: a tenant Kustomization decrypting without a
// Secret of its own is refused; one naming a Secret passes; fields the allowlist does not name
// are refused one by one.
func TestAttackDecryptionWithTheControllersIdentity(t *testing.T) {
	got := checkApps(t, tenantKustomization+"  decryption:\n    provider: sops\n", nil)
	require.Len(t, got, 1, "%v", got)
	assert.Equal(t, 13, got[0].Line)
	assert.Contains(t, got[0].Message, "spec.decryption without secretRef.name: kustomize-controller would decrypt with its own identity")
	assert.Contains(t, got[0].Hint, "a Secret in namespace payments")

	assert.Empty(t, checkApps(t, tenantKustomization+"  decryption:\n    provider: sops\n    secretRef:\n      name: sops-age\n", nil))

	got = checkApps(t, tenantKustomization+"  decryption:\n    provider: sops\n    secretRef: {name: sops-age}\n    keyring: x\n  inventory: x\n", nil)
	require.Len(t, got, 2, "%v", got)
	assert.Contains(t, got[0].Message, "sets spec.decryption.keyring")
	assert.Contains(t, got[1].Message, "sets spec.inventory, which a workspace's Kustomization may not use")
	assert.Contains(t, got[1].Hint, "spec.tenants.allow")
}

// TestRBACEscalationRule: a workspace's Roles and RoleBindings are held to Kubernetes'
// escalation rule against what its ServiceAccount holds (admin in its namespace).
func TestRBACEscalationRule(t *testing.T) {
	role := func(rules string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\nrules:\n" + rules
	}
	binding := func(kind, name string) string {
		return "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: b\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: " + kind + "\n  name: " + name + "\nsubjects:\n- kind: ServiceAccount\n  name: app\n"
	}
	for _, tc := range []struct {
		name, manifest, want string
		line                 int
	}{
		{"binding cluster-admin", binding("ClusterRole", "cluster-admin"), "binds ClusterRole cluster-admin", 8},
		{"binding another ClusterRole", binding("ClusterRole", "system:controller:namespace-controller"), "binds ClusterRole system:controller:namespace-controller", 8},
		{"binding a Role nobody defines", binding("Role", "ghost"), "binds Role ghost, which this repo does not define", 8},
		{"escalate", role("- apiGroups: [rbac.authorization.k8s.io]\n  resources: [roles]\n  verbs: [escalate]\n"), "grants verb escalate", 8},
		{"bind", role("- apiGroups: [rbac.authorization.k8s.io]\n  resources: [clusterroles]\n  verbs: [bind]\n"), "grants verb bind", 8},
		{"impersonate", role("- apiGroups: [\"\"]\n  resources: [serviceaccounts]\n  verbs: [impersonate]\n"), "grants verb impersonate", 8},
		{"wildcard", role("- apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']\n"), "grants verb *", 8},
		{"beyond admin", role("- apiGroups: [\"\"]\n  resources: [nodes]\n  verbs: [get]\n"), "grants get on nodes (core), which the workspace's ServiceAccount does not hold", 6},
		{"resource quota", role("- apiGroups: [\"\"]\n  resources: [resourcequotas]\n  verbs: [update]\n"), "grants update on resourcequotas (core)", 6},
	} {
		got := checkApps(t, tc.manifest, nil)
		require.Len(t, got, 1, "%s: %v", tc.name, got)
		assert.Contains(t, got[0].Message, tc.want, tc.name)
		assert.Equal(t, tc.line, got[0].Line, tc.name)
		assert.NotEmpty(t, got[0].Hint, tc.name)
	}
	for _, ok := range []string{
		binding("ClusterRole", "edit"), binding("ClusterRole", "view"), binding("ClusterRole", "admin"),
		role("- apiGroups: [apps]\n  resources: [deployments]\n  verbs: [get, list, watch, update]\n") + "---\n" + binding("Role", "r"),
		role("- apiGroups: [\"\"]\n  resources: [secrets]\n  resourceNames: [db]\n  verbs: [get]\n"),
	} {
		assert.Empty(t, checkApps(t, ok, nil), ok)
	}
}

// TestAdminRulesAreAggregated: the embedded roles aggregate into what admin holds and not more
// (it may create Roles, never escalate; it reads Secrets, never nodes).
func TestAdminRulesAreAggregated(t *testing.T) {
	rules, err := AdminRules()
	require.NoError(t, err)
	has := func(group, resource, verb string) bool {
		for _, r := range rules {
			if contains(r.APIGroups, group) && contains(r.Resources, resource) && contains(r.Verbs, verb) {
				return true
			}
		}
		return false
	}
	assert.True(t, has("rbac.authorization.k8s.io", "roles", "create"), "from aggregate-to-admin")
	assert.True(t, has("", "secrets", "delete"), "from aggregate-to-edit")
	assert.True(t, has("", "pods", "list"), "from aggregate-to-view")
	assert.False(t, has("rbac.authorization.k8s.io", "roles", "escalate"))
	assert.False(t, has("", "nodes", "get"))
	var _ []rbacv1.PolicyRule = rules
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestFluxAllowlistFieldsExist: every field the default allowlist names is a spec field of the
// Flux API type fleetbot is built with (a typo would allow nothing, or something else).
func TestFluxAllowlistFieldsExist(t *testing.T) {
	for _, k := range DefaultTenantKinds() {
		if k.Fields == nil {
			continue
		}
		fields := fluxSpecFields(k.APIGroup, k.Kind)
		require.NotEmpty(t, fields, "%s/%s", k.APIGroup, k.Kind)
		for _, f := range k.Fields {
			assert.Contains(t, fields, f, "%s/%s", k.APIGroup, k.Kind)
		}
		assert.NotContains(t, k.Fields, "kubeConfig")
	}
}

// issuesOf renders the example control repo changed by files and returns the render's issues
// (nil when it renders).
func issuesOf(t *testing.T, files map[string]string) control.Issues {
	t.Helper()
	m := exampleFS(t)
	for p, data := range files {
		m[p] = &fstest.MapFile{Data: []byte(data)}
	}
	_, err := NewRenderer(Options{}).Render(load(t, m))
	if err == nil {
		return nil
	}
	var is control.Issues
	require.True(t, errors.As(err, &is), "%v", err)
	return is
}

// TestAttackWorkspaceSharesAComponentNamespace: a workspace namespace a platform component
// renders (monitoring) or puts objects in is refused at validate, naming both definitions; so
// are a component rendering a system or fleetbot namespace, two components rendering one
// Namespace, and a component putting objects in fleetbot's namespace.
func TestAttackWorkspaceSharesAComponentNamespace(t *testing.T) {
	ws := "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: search\nspec:\n  namespace: %s\n  admins: [search-devs]\n  apps:\n    - app: podinfo\n"
	is := issuesOf(t, map[string]string{"workspaces/search.yaml": fmt.Sprintf(ws, "monitoring")})
	requireIssue(t, is, "workspaces/search.yaml", "namespace monitoring is claimed by workspace search (workspaces/search.yaml:6) and by platform component monitoring (its Namespace monitoring) (catalog/monitoring/namespace.yaml:2)")
	is = issuesOf(t, map[string]string{"workspaces/search.yaml": fmt.Sprintf(ws, "metallb-system")})
	requireIssue(t, is, "workspaces/search.yaml", "namespace metallb-system is claimed by workspace search", "platform component metallb")

	// The monitoring app with an extra manifest, its objects keeping their own namespaces.
	extra := func(manifest string) map[string]string {
		return map[string]string{
			"catalog/monitoring/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - namespace.yaml\n  - extra.yaml\n",
			"catalog/monitoring/extra.yaml":         manifest,
		}
	}
	// A component's objects in a workspace namespace, without rendering its Namespace.
	is = issuesOf(t, extra("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n  namespace: payments\n"))
	requireIssue(t, is, "workspaces/payments.yaml", "namespace payments is claimed by workspace payments", "platform component monitoring (its ConfigMap probe) (catalog/monitoring/extra.yaml:2)")

	for _, tc := range []struct{ ns, want string }{
		{"kube-system", "renders Namespace kube-system, which belongs to Kubernetes or Flux"},
		{"flux-system", "renders Namespace flux-system, which belongs to Kubernetes or Flux"},
		{"fleetbot", "claims namespace fleetbot, which belongs to fleetbot's own deployment"},
		{"mon2\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: fleetbot", "platform component monitoring (its Secret s) claims namespace fleetbot"},
	} {
		is = issuesOf(t, extra("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+tc.ns+"\n"))
		requireIssue(t, is, "catalog/monitoring/extra.yaml", tc.want)
		for _, i := range is {
			assert.NotEmpty(t, i.Hint, "%s", i)
		}
	}
	is = issuesOf(t, extra("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: metallb-system\n"))
	requireIssue(t, is, "catalog/metallb/namespace.yaml", "renders Namespace metallb-system, which platform component monitoring (its Namespace metallb-system) (catalog/monitoring/extra.yaml:2) renders too")
	// Objects in a system namespace or another component's are the component's to place.
	assert.Empty(t, issuesOf(t, extra("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n  namespace: kube-system\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: probe\n  namespace: metallb-system\n")))
}

// TestComponentPodSecurityLevel: a component's Namespace carries the level platform.yaml
// declares, else the one its manifest sets, else baseline; a workspace Namespace its own.
func TestComponentPodSecurityLevel(t *testing.T) {
	enforce := func(files map[string]string, repo, path string) string {
		m := exampleFS(t)
		for p, data := range files {
			m[p] = &fstest.MapFile{Data: []byte(data)}
		}
		for _, tg := range mustRender(t, NewRenderer(Options{}), load(t, m)) {
			if tg.Repo != repo {
				continue
			}
			for _, d := range strings.Split(string(tg.Files[path]), "\n---\n") {
				var ns struct {
					Kind     string `json:"kind"`
					Metadata struct {
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
				}
				require.NoError(t, yaml.Unmarshal([]byte(d), &ns))
				if ns.Kind == "Namespace" {
					l := ns.Metadata.Labels
					assert.Equal(t, PodSecurityVersion, l["pod-security.kubernetes.io/enforce-version"])
					assert.Equal(t, "restricted", l["pod-security.kubernetes.io/warn"])
					assert.Equal(t, "restricted", l["pod-security.kubernetes.io/audit"])
					return l["pod-security.kubernetes.io/enforce"]
				}
			}
		}
		t.Fatalf("no Namespace in %s %s", repo, path)
		return ""
	}
	assert.Equal(t, "baseline", enforce(nil, "cluster-prod-eu-1", "platform/monitoring/monitoring.yaml"), "the default")
	assert.Equal(t, "privileged", enforce(nil, "cluster-prod-eu-1", "platform/metallb/metallb.yaml"), "the app's own label")
	platform := string(exampleFS(t)["platform.yaml"].Data)
	declared := strings.Replace(platform, "    - app: monitoring\n      clusterSelector: {}\n", "    - app: monitoring\n      clusterSelector: {}\n      podSecurity: restricted\n", 1)
	require.NotEqual(t, platform, declared)
	assert.Equal(t, "restricted", enforce(map[string]string{"platform.yaml": declared}, "cluster-prod-eu-1", "platform/monitoring/monitoring.yaml"), "declared")
	declared = strings.Replace(platform, "    - app: metallb\n", "    - app: metallb\n      podSecurity: baseline\n", 1)
	assert.Equal(t, "baseline", enforce(map[string]string{"platform.yaml": declared}, "cluster-prod-eu-1", "platform/metallb/metallb.yaml"), "platform.yaml wins over the manifest")

	assert.Equal(t, "restricted", enforce(nil, "cluster-prod-eu-1", FluxPath), "a workspace, by default")
	ws := string(exampleFS(t)["workspaces/payments.yaml"].Data) + "  podSecurity: baseline\n"
	assert.Equal(t, "baseline", enforce(map[string]string{"workspaces/payments.yaml": ws}, "cluster-prod-eu-1", FluxPath))
}

// FuzzTenantObject feeds arbitrary YAML documents, as a workspace repo's object, through the
// tenant rules (allowlist, Flux fields, decryption, RBAC escalation, Pod Security): none may
// panic, every finding says what is wrong, and a privileged container always fails the check
// whatever else the pod says.
func FuzzTenantObject(f *testing.F) {
	for _, seed := range []string{
		rootOnTheNode,
		tenantKustomization + "  decryption:\n    provider: sops\n",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: r\nrules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: [escalate]\n",
		"apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: b\nroleRef: {kind: ClusterRole, name: cluster-admin}\n",
		"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata:\n  name: h\nspec:\n  values:\n    a: [{containers: [{name: x, securityContext: {privileged: true}}]}]\n",
		"apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: c\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers: 7\n",
	} {
		f.Add(seed)
	}
	ev, err := newPodSecurityEvaluator()
	if err != nil {
		f.Fatal(err)
	}
	admin, err := AdminRules()
	if err != nil {
		f.Fatal(err)
	}
	kinds := newTenantKinds(nil)
	f.Fuzz(func(t *testing.T, doc string) {
		var obj map[string]any
		if yaml.Unmarshal([]byte(doc), &obj) != nil || obj == nil {
			return
		}
		findings, listed := kinds.allowlistFindings(obj, "payments")
		if listed {
			findings = append(findings, tenantFlux(obj, "payments", "payments")...)
			findings = append(findings, rbacFindings(obj, admin, map[string]bool{"r": true})...)
			findings = append(findings, podSecurityFindings(ev, obj, control.PodSecurityBaseline)...)
		}
		for _, f := range findings {
			if f.Message == "" {
				t.Fatalf("a finding without a message for %q", doc)
			}
		}
		// A privileged container in a Pod is refused at baseline, whatever the rest says.
		if obj["apiVersion"] == "v1" && obj["kind"] == "Pod" {
			spec, _ := obj["spec"].(map[string]any)
			if spec == nil {
				return
			}
			priv := map[string]any{"name": "priv", "image": "x", "securityContext": map[string]any{"privileged": true}}
			cs, _ := spec["containers"].([]any)
			spec["containers"] = append(append([]any(nil), cs...), priv)
			if len(podSecurityFindings(ev, obj, control.PodSecurityBaseline)) == 0 {
				t.Fatalf("a privileged container passed baseline in %q", doc)
			}
		}
	})
}

// TestCatalogAppBelowTheWorkspaceLevel: a catalog app fleetbot renders into the workspace repo
// whose pods the workspace's level refuses is found by check workspace too, and the hint sends
// the workspace admins to the platform admins (they cannot edit the managed file).
func TestCatalogAppBelowTheWorkspaceLevel(t *testing.T) {
	files := workspaceRepo(t)
	const managed = "clusters/prod-eu-1/fleetbot/podinfo.yaml"
	data := string(files[managed])
	require.Contains(t, data, "runAsNonRoot: true")
	files[managed] = []byte(strings.Replace(data, "runAsNonRoot: true", "runAsNonRoot: false", 1))
	c := paymentsCheck
	c.Entries = []string{"clusters/prod-eu-1"}
	got := CheckRepo(files, c)
	require.Len(t, got, 1, "%v", got)
	assert.Equal(t, managed, got[0].File)
	assert.Contains(t, got[0].Message, "runAsNonRoot != true")
	assert.Contains(t, got[0].Hint, "fleetbot renders "+managed+" from the control repo's catalog: ask the platform admins")
}
