package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The cluster the tests stand up: staging-eu-1 of testdata/control, in
// workspace search (namespace search, app podinfo), with the monitoring
// component.
const (
	clusterName = "staging-eu-1"
	clusterRepo = "cluster-staging-eu-1"
	wsName      = "search"
	wsRepo      = "workspace-search"
)

// TestFleetOnFlux walks one cluster through its life on a real API server
// and real Flux: bootstrap, a value change, a removed component, tenants
// trying to leave their namespace, and cluster admins' own apps. The steps
// build on each other, so the first failure stops the walk.
func TestFleetOnFlux(t *testing.T) {
	e := env
	e.control = e.path("control")
	require.NoError(t, os.CopyFS(e.control, os.DirFS(filepath.Join("..", "testdata", "control"))))
	git(t, e.control, "init", "-q", "-b", "main")
	e.commitControl(t, "control repo of the e2e test")

	var clusterHead string
	steps := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"bootstrap on the old single platform Kustomization", func(t *testing.T) { clusterHead = e.oldLayoutBootstrapScenario(t) }},
		{"per-component Kustomizations take over, nothing deleted", func(t *testing.T) { clusterHead = e.handoffScenario(t) }},
		{"value change is applied", func(t *testing.T) { clusterHead = e.valueChangeScenario(t, clusterHead) }},
		{"workspace repo read without a secret", func(t *testing.T) { e.noSecretScenario(t) }},
		{"removed component is pruned", func(t *testing.T) { clusterHead = e.removeComponentScenario(t) }},
		{"tenant isolation", func(t *testing.T) { e.tenantScenario(t) }},
		{"cluster admins' apps", func(t *testing.T) { e.clusterAppsScenario(t) }},
		{"a component without its CRDs fails alone", func(t *testing.T) { e.missingCRDScenario(t) }},
	}
	for _, s := range steps {
		if !t.Run(s.name, s.run) {
			return
		}
	}
}

// retention matches the node-exporter DaemonSet with RETENTION=want.
func retention(want string) func(map[string]any) bool {
	return func(obj map[string]any) bool {
		if obj == nil {
			return false
		}
		cs, _ := field(obj, "spec", "template", "spec", "containers").([]any)
		for _, c := range cs {
			envs, _ := c.(map[string]any)["env"].([]any)
			for _, ev := range envs {
				m, _ := ev.(map[string]any)
				if m["name"] == "RETENTION" {
					return m["value"] == want
				}
			}
		}
		return false
	}
}

func anyStrings(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// valueChangeScenario: a cluster value changes in the control repo; apply
// updates the PR; once merged, Flux applies the new revision.
func (e *environment) valueChangeScenario(t *testing.T, _ string) string {
	path := filepath.Join(e.control, "clusters", clusterName+".yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := strings.Replace(string(data), "  admins: [search-sre]\n", "  admins: [search-sre]\n  values:\n    monitoring_retention: 7d\n", 1)
	require.NotEqual(t, string(data), changed, "the test's edit of %s", path)
	writeFile(t, path, changed)
	e.commitControl(t, "staging-eu-1 keeps node metrics 7 days")
	e.apply(t)
	head := e.merge(t, clusterRepo)
	e.requestReconcile(t, "flux-system", "flux-system")
	e.waitApplied(t, "flux-system", "platform-monitoring", head)
	e.waitObject(t, "apps/v1", "DaemonSet", "monitoring", "node-exporter", "with the new retention", retention("7d"))
	return head
}

// noSecretScenario: with flux.secretRef: "" the workspace GitRepository
// names no Secret, and reads the (unauthenticated) served repo without one.
func (e *environment) noSecretScenario(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(e.control, "platform.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := strings.Replace(string(data), "    secretRef: flux-system\n", "    secretRef: \"\"\n", 1)
	require.NotEqual(t, string(data), changed, "the test's edit of %s", path)
	writeFile(t, path, changed)
	e.commitControl(t, "workspace repos are read without credentials")
	e.apply(t)
	head := e.merge(t, clusterRepo)
	p, err := e.kube.objectPath(ctx, "v1", "Secret", wsName, "flux-system")
	require.NoError(t, err)
	code, body, err := e.kube.raw(ctx, "DELETE", p, nil, "", nil)
	require.NoError(t, err)
	require.Equal(t, 200, code, "deleting the workspace's git secret: %s", body)
	e.requestReconcile(t, "flux-system", "flux-system")
	e.waitApplied(t, "flux-system", "flux-system", head)
	e.requestReconcile(t, wsName, "workspace-"+wsName)
	e.waitObject(t, "source.toolkit.fluxcd.io/v1", "GitRepository", wsName, "workspace-"+wsName, "Ready with no secretRef", func(obj map[string]any) bool {
		if obj == nil || field(obj, "spec", "secretRef") != nil {
			return false
		}
		st, _, _ := condition(obj, "Ready")
		gen, _ := field(obj, "metadata", "generation").(float64)
		observed, _ := field(obj, "status", "observedGeneration").(float64)
		return st == "True" && gen == observed
	})
}

// removeComponentScenario: the component no longer selects this cluster
// (and the cluster's value for it goes: a value no deployed app declares is
// an error); once the PR is merged, flux-system deletes its Kustomization,
// whose finalizer prunes its objects, the namespace included. The retired
// platform Kustomization, which still lists them, deletes nothing else:
// the widgets component keeps its custom resource.
func (e *environment) removeComponentScenario(t *testing.T) string {
	path := filepath.Join(e.control, "platform.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := strings.Replace(string(data), "    - app: monitoring\n      clusterSelector: {}\n", "    - app: monitoring\n      clusterSelector: {matchLabels: {env: prod}}\n", 1)
	require.NotEqual(t, string(data), changed, "the test's edit of %s", path)
	writeFile(t, path, changed)
	cpath := filepath.Join(e.control, "clusters", clusterName+".yaml")
	data, err = os.ReadFile(cpath)
	require.NoError(t, err)
	changed = strings.Replace(string(data), "  values:\n    monitoring_retention: 7d\n", "", 1)
	require.NotEqual(t, string(data), changed, "the test's edit of %s", cpath)
	writeFile(t, cpath, changed)
	e.commitControl(t, "monitoring only on prod clusters")
	e.apply(t)
	head := e.merge(t, clusterRepo)
	widgets := e.uids(t, handoffObjects[:2])
	e.requestReconcile(t, "flux-system", "flux-system")
	e.waitApplied(t, "flux-system", "flux-system", head)
	e.waitObject(t, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "platform-monitoring", "deleted", absent)
	e.waitObject(t, "apps/v1", "DaemonSet", "monitoring", "node-exporter", "pruned", absent)
	e.waitObject(t, "rbac.authorization.k8s.io/v1", "ClusterRole", "", "node-exporter", "pruned", absent)
	e.waitObject(t, "v1", "Namespace", "", "monitoring", "pruned and deleted", absent)
	e.waitApplied(t, "flux-system", "platform-widgets", head)
	assert.Equal(t, widgets, e.uids(t, handoffObjects[:2]), "the other components keep their objects")
	return head
}

// tenantScenario: workspace admins push what would leave their namespace;
// fleetbot check workspace refuses each first, and the cluster refuses (or
// confines) it when it is merged anyway.
func (e *environment) tenantScenario(t *testing.T) {
	ctx := context.Background()
	cases := []tenantCase{
		{
			name: "ClusterRoleBinding",
			file: "escalate.yaml",
			body: `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: search-escalates
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {kind: ServiceAccount, name: search, namespace: search}
`,
			check: "ClusterRoleBinding/search-escalates",
			// Impersonating the workspace ServiceAccount, the apply is forbidden.
			flux: []string{"forbidden", "system:serviceaccount:search:search", "clusterrolebindings"},
			after: func(t *testing.T) {
				obj, err := e.kube.get(ctx, "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "", "search-escalates")
				require.NoError(t, err)
				assert.Nil(t, obj, "the ClusterRoleBinding must not exist")
			},
		},
		{
			name: "Kustomization without serviceAccountName",
			file: "flux.yaml",
			body: `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: escape
spec:
  interval: 1m
  path: ./apps
  prune: true
  sourceRef: {kind: GitRepository, name: workspace-search}
`,
			check: "serviceAccountName",
			// The admission policy fleetbot rendered into platform/.
			flux: []string{"fleetbot-flux-tenancy", "spec.serviceAccountName must be search"},
			after: func(t *testing.T) {
				obj, err := e.kube.get(ctx, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", wsName, "escape")
				require.NoError(t, err)
				assert.Nil(t, obj, "the Kustomization must not exist")
			},
		},
	}
	cases = append(cases, e.isolationCases(ctx)...)
	dir := e.clone(t, wsRepo)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			writeFile(t, filepath.Join(dir, "apps", tc.file), tc.body)
			writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- "+tc.file+"\n")
			code, out, errOut := e.fleetbotRun(t, "check", "workspace", "--dir", dir, "--workspace", wsName)
			assert.Equal(t, 1, code, "check workspace must refuse %s:\n%s\n%s", tc.name, out, errOut)
			assert.Contains(t, out+errOut, tc.check)

			sha := push(t, dir, "workspace admin adds "+tc.name)
			e.requestReconcile(t, wsName, "workspace-"+wsName)
			msg := e.waitRefused(t, wsName, "workspace-"+wsName, sha, tc.flux...)
			t.Logf("Flux refused %s: %s", tc.name, msg)
			tc.after(t)

			// Back to the baseline: the workspace reconciles again.
			require.NoError(t, os.Remove(filepath.Join(dir, "apps", tc.file)))
			writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n")
			sha = push(t, dir, "revert "+tc.name)
			e.requestReconcile(t, wsName, "workspace-"+wsName)
			e.waitApplied(t, wsName, "workspace-"+wsName, sha)
		})
	}

	e.restrictedPodRuns(t, dir)

	t.Run("object in another namespace", func(t *testing.T) {
		// check workspace refuses it; on the cluster, targetNamespace
		// confines it to the workspace namespace instead.
		writeFile(t, filepath.Join(dir, "apps", "elsewhere.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: elsewhere\n  namespace: default\ndata: {a: b}\n")
		writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- elsewhere.yaml\n")
		code, out, errOut := e.fleetbotRun(t, "check", "workspace", "--dir", dir, "--workspace", wsName)
		assert.Equal(t, 1, code, "check workspace must refuse an object in another namespace:\n%s\n%s", out, errOut)
		assert.Contains(t, out+errOut, "ConfigMap/elsewhere")
		sha := push(t, dir, "workspace admin adds a ConfigMap in default")
		e.requestReconcile(t, wsName, "workspace-"+wsName)
		e.waitApplied(t, wsName, "workspace-"+wsName, sha)
		obj, err := e.kube.get(ctx, "v1", "ConfigMap", "default", "elsewhere")
		require.NoError(t, err)
		assert.Nil(t, obj, "nothing lands in namespace default")
		e.waitObject(t, "v1", "ConfigMap", wsName, "elsewhere", "confined to the workspace namespace", exists)
	})
}

// clusterAppsScenario: cluster admins own apps/ of the cluster repo and may
// create cluster-scoped objects there; fleetbot check cluster passes it and
// Flux applies it.
func (e *environment) clusterAppsScenario(t *testing.T) {
	dir := e.clone(t, clusterRepo)
	writeFile(t, filepath.Join(dir, "apps", "tools.yaml"), `apiVersion: v1
kind: Namespace
metadata:
  name: sre-tools
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: sre-tools-reader
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, list]}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: sre-tools
  namespace: sre-tools
data: {owner: search-sre}
`)
	writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- tools.yaml\n")
	code, out, errOut := e.fleetbotRun(t, "check", "cluster", "--dir", dir)
	require.Equal(t, 0, code, "check cluster:\n%s\n%s", out, errOut)
	sha := push(t, dir, "cluster admins add their tools")
	e.requestReconcile(t, "flux-system", "flux-system")
	e.waitApplied(t, "flux-system", "apps", sha)
	e.waitObject(t, "v1", "ConfigMap", "sre-tools", "sre-tools", "applied", exists)
	e.waitObject(t, "rbac.authorization.k8s.io/v1", "ClusterRole", "", "sre-tools-reader", "applied", exists)
}

// requireRendered requires every object of the YAML files directly under
// dir on repo's main to exist on the cluster; namespace fills in the
// namespace of namespaced objects that name none (the workspace's
// targetNamespace).
func (e *environment) requireRendered(t *testing.T, repo, dir, namespace string) {
	t.Helper()
	ctx := context.Background()
	bare := e.bare(repo)
	files := strings.Fields(git(t, bare, "ls-tree", "--name-only", "main:"+dir))
	n := 0
	for _, f := range files {
		if !strings.HasSuffix(f, ".yaml") || f == "kustomization.yaml" {
			continue
		}
		docs, err := splitYAML([]byte(git(t, bare, "show", "main:"+dir+"/"+f)))
		require.NoError(t, err, "%s/%s", dir, f)
		for _, obj := range docs {
			apiVersion, _ := obj["apiVersion"].(string)
			kind, _ := obj["kind"].(string)
			name, _ := field(obj, "metadata", "name").(string)
			ns, _ := field(obj, "metadata", "namespace").(string)
			r, err := e.kube.resourceFor(ctx, apiVersion, kind)
			require.NoError(t, err, "%s/%s: %s %s", dir, f, apiVersion, kind)
			if r.Namespaced && namespace != "" {
				ns = namespace
			}
			got, err := e.kube.get(ctx, apiVersion, kind, ns, name)
			require.NoError(t, err)
			assert.NotNil(t, got, "%s/%s: %s %s/%s is on the cluster", dir, f, kind, ns, name)
			n++
		}
	}
	require.NotZero(t, n, "%s of %s renders objects", dir, repo)
	t.Logf("%s/%s: all %d objects are on the cluster", repo, dir, n)
}

// missingCRDScenario: metallb renders an IPAddressPool whose CRD the
// cluster does not have, and metallb-probe depends on metallb; plan says
// which kinds metallb needs from the cluster, and once merged only
// platform-metallb fails, platform-metallb-probe waits on it, and every
// other component, apps and the workspace are applied at the new revision.
func (e *environment) missingCRDScenario(t *testing.T) {
	path := filepath.Join(e.control, "clusters", clusterName+".yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := strings.Replace(string(data), "network: cloud", "network: metal", 1)
	changed = strings.Replace(changed, "  admins: [search-sre]\n", "  admins: [search-sre]\n  values:\n    metallb_range: 10.30.0.0/24\n", 1)
	require.NotEqual(t, string(data), changed, "the test's edit of %s", path)
	writeFile(t, path, changed)
	writeFile(t, filepath.Join(e.control, "catalog", "metallb-probe", "app.yaml"),
		"apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata: {name: metallb-probe}\nspec:\n  scope: cluster\n  dependsOn: [metallb]\n")
	writeFile(t, filepath.Join(e.control, "catalog", "metallb-probe", "kustomization.yaml"),
		"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [probe.yaml]\n")
	writeFile(t, filepath.Join(e.control, "catalog", "metallb-probe", "probe.yaml"),
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: metallb-probe, namespace: default}\ndata: {probe: \"on\"}\n")
	ppath := filepath.Join(e.control, "platform.yaml")
	data, err = os.ReadFile(ppath)
	require.NoError(t, err)
	changed = strings.Replace(string(data), "  components:\n", "  components:\n    - app: metallb-probe\n      clusterSelector: {matchLabels: {network: metal}}\n", 1)
	require.NotEqual(t, string(data), changed, "the test's edit of %s", ppath)
	writeFile(t, ppath, changed)
	e.commitControl(t, "staging-eu-1 joins the metal network")

	code, out, errOut := e.fleetbotRun(t, "plan", "--control", e.control, "--git-url", e.gitURL)
	require.Equal(t, 0, code, errOut)
	// The plan folds what every cluster needs into one line per component (issue 36).
	assert.Contains(t, out, "metallb: IPAddressPool.metallb.io, L2Advertisement.metallb.io from the cluster")
	assert.Regexp(t, `(?m)^acme/cluster-staging-eu-1 .* metallb$`, out, "the metal cluster's row says it needs metallb's CRDs")

	e.apply(t)
	head := e.merge(t, clusterRepo)
	wsHead := git(t, e.bare(wsRepo), "rev-parse", "refs/heads/main")
	e.requestReconcile(t, "flux-system", "flux-system")
	e.waitApplied(t, "flux-system", "flux-system", head)
	msg := e.waitRefused(t, "flux-system", "platform-metallb", head, "no matches for kind", "metallb.io/v1beta1")
	t.Logf("platform-metallb: %s", msg)
	e.waitObject(t, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "platform-metallb-probe", "waiting on platform-metallb", func(obj map[string]any) bool {
		st, reason, _ := condition(obj, "Ready")
		return obj != nil && st == "False" && reason == "DependencyNotReady"
	})
	for _, k := range []string{"platform-widgets", "fleetbot-tenancy", "apps"} {
		e.waitApplied(t, "flux-system", k, head)
	}
	e.requestReconcile(t, wsName, "workspace-"+wsName)
	e.waitApplied(t, wsName, "workspace-"+wsName, wsHead)
	obj, err := e.kube.get(context.Background(), "v1", "ConfigMap", "default", "metallb-probe")
	require.NoError(t, err)
	assert.Nil(t, obj, "what depends on the failing component is not applied")
}
