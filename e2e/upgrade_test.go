package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// widgetsApp is a platform component shipping a CRD and a custom resource of
// it: what must survive the handoff from the single platform Kustomization
// (deleting a CRD deletes every custom resource of it).
var widgetsApp = map[string]string{
	"catalog/widgets/app.yaml":           "apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata: {name: widgets}\nspec:\n  scope: cluster\n",
	"catalog/widgets/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [crd.yaml, widget.yaml]\n",
	"catalog/widgets/crd.yaml": `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.e2e.fleetbot.io
spec:
  group: e2e.fleetbot.io
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Cluster
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`,
	"catalog/widgets/widget.yaml": "apiVersion: e2e.fleetbot.io/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  size: 3\n",
}

// oldFluxBase is the head of flux/fleetbot.yaml as fleetbot rendered it
// before components got one Kustomization each (commit 149ad82): one
// Kustomization platform applying all of ./platform, with prune, and apps
// after it. The workspace objects that follow were the same as today's.
const oldFluxBase = `# Managed by fleetbot. Do not edit: changes are overwritten.
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  labels:
    app.kubernetes.io/managed-by: fleetbot
  name: platform
  namespace: flux-system
spec:
  interval: 10m0s
  path: ./platform
  prune: true
  serviceAccountName: kustomize-controller
  sourceRef:
    kind: GitRepository
    name: flux-system
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  labels:
    app.kubernetes.io/managed-by: fleetbot
  name: apps
  namespace: flux-system
spec:
  dependsOn:
  - name: platform
  interval: 10m0s
  path: ./apps
  prune: true
  serviceAccountName: kustomize-controller
  sourceRef:
    kind: GitRepository
    name: flux-system
`

// toOldLayout rewrites a clone of a cluster repo in today's layout into the
// layout fleetbot rendered before (commit 149ad82), file content unchanged:
// platform/<app>/<app>.yaml becomes platform/<app>.yaml, the tenancy policy
// platform/fleetbot.flux-tenancy.yaml, one platform/kustomization.yaml lists
// them (the policy first, then the components by name), and
// flux/fleetbot.yaml holds the old platform and apps Kustomizations before
// the workspace objects.
func toOldLayout(t *testing.T, dir string) {
	t.Helper()
	platform := filepath.Join(dir, "platform")
	entries, err := os.ReadDir(platform)
	require.NoError(t, err)
	var components []string
	for _, e := range entries {
		require.True(t, e.IsDir(), "platform/%s: today's layout has only directories there", e.Name())
		sub := filepath.Join(platform, e.Name())
		if e.Name() == "fleetbot.flux-tenancy" {
			data, err := os.ReadFile(filepath.Join(sub, "policy.yaml"))
			require.NoError(t, err)
			writeFile(t, filepath.Join(platform, "fleetbot.flux-tenancy.yaml"), string(data))
		} else {
			data, err := os.ReadFile(filepath.Join(sub, e.Name()+".yaml"))
			require.NoError(t, err)
			writeFile(t, filepath.Join(platform, e.Name()+".yaml"), string(data))
			components = append(components, e.Name()+".yaml")
		}
		require.NoError(t, os.RemoveAll(sub))
	}
	sort.Strings(components)
	kust := "# Managed by fleetbot. Do not edit: changes are overwritten.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- fleetbot.flux-tenancy.yaml\n"
	for _, c := range components {
		kust += "- " + c + "\n"
	}
	writeFile(t, filepath.Join(platform, "kustomization.yaml"), kust)

	fluxPath := filepath.Join(dir, "flux", "fleetbot.yaml")
	data, err := os.ReadFile(fluxPath)
	require.NoError(t, err)
	out := oldFluxBase
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if !strings.Contains(doc, "\n  namespace: flux-system\n") { // the workspace objects
			out += "---\n" + strings.TrimSuffix(doc, "\n") + "\n"
		}
	}
	writeFile(t, fluxPath, out)
}

// tracked is an object whose identity the handoff must keep.
type tracked struct{ apiVersion, kind, namespace, name string }

func (o tracked) String() string { return o.kind + " " + o.namespace + "/" + o.name }

// uids reads the UID of every object, failing when one is missing.
func (e *environment) uids(t *testing.T, objs []tracked) map[tracked]string {
	t.Helper()
	out := map[tracked]string{}
	for _, o := range objs {
		obj, err := e.kube.get(context.Background(), o.apiVersion, o.kind, o.namespace, o.name)
		require.NoError(t, err)
		require.NotNil(t, obj, "%s exists", o)
		uid, _ := field(obj, "metadata", "uid").(string)
		require.NotEmpty(t, uid, "%s has a UID", o)
		out[o] = uid
	}
	return out
}

// setSuspend sets spec.suspend of a Kustomization.
func (e *environment) setSuspend(t *testing.T, namespace, name string, suspend bool) {
	t.Helper()
	ctx := context.Background()
	p, err := e.kube.objectPath(ctx, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", namespace, name)
	require.NoError(t, err)
	code, body, err := e.kube.raw(ctx, "PATCH", p, []byte(fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend)), "application/merge-patch+json", nil)
	require.NoError(t, err)
	require.Equal(t, 200, code, "suspend=%t on Kustomization %s/%s: %s", suspend, namespace, name, body)
}

// oldLayoutBootstrapScenario: the cluster repo holds what fleetbot rendered
// before components got their own Kustomizations (the test rewrites
// fleetbot's output into that layout), Flux is bootstrapped on it, and the
// single platform Kustomization applies every component, the widgets
// component's CRD and custom resource included. It returns the head.
func (e *environment) oldLayoutBootstrapScenario(t *testing.T) string {
	ctx := context.Background()
	for p, c := range widgetsApp {
		writeFile(t, filepath.Join(e.control, p), c)
	}
	path := filepath.Join(e.control, "platform.yaml")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := strings.Replace(string(data), "  components:\n", "  components:\n    - app: widgets\n      clusterSelector: {}\n", 1)
	require.NotEqual(t, string(data), changed, "the test's edit of %s", path)
	writeFile(t, path, changed)
	e.commitControl(t, "widgets component: a CRD and a custom resource")

	e.apply(t)
	e.merge(t, clusterRepo)
	wsHead := e.merge(t, wsRepo)
	dir := e.clone(t, clusterRepo)
	toOldLayout(t, dir)
	push(t, dir, "cluster repo as fleetbot rendered it before per-component Kustomizations")

	head := e.bootstrapFlux(t, clusterRepo)
	e.waitObject(t, "apps/v1", "Deployment", "flux-system", "kustomize-controller", "carrying the lockdown flags", func(obj map[string]any) bool {
		if obj == nil {
			return false
		}
		args := strings.Join(anyStrings(field(obj, "spec", "template", "spec", "containers").([]any)[0].(map[string]any)["args"]), " ")
		for _, a := range fluxLockdownArgs {
			if !strings.Contains(args, a) {
				return false
			}
		}
		return true
	})
	e.waitApplied(t, "flux-system", "flux-system", head)
	ks, err := e.kube.get(ctx, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "flux-system")
	require.NoError(t, err)
	assert.Equal(t, "kustomize-controller", field(ks, "spec", "serviceAccountName"), "the bootstrap Kustomization runs as kustomize-controller under the lockdown")

	// The workspace repo is private: its GitRepository reads it with the
	// secret the cluster README says to create.
	e.waitObject(t, "v1", "Namespace", "", wsName, "created by flux/fleetbot.yaml", exists)
	require.NoError(t, e.kube.applyYAML(ctx, []byte(`apiVersion: v1
kind: Secret
metadata: {name: flux-system, namespace: search}
stringData: {username: git, password: read-only-token}
`), ""))

	e.waitApplied(t, "flux-system", "platform", head)
	e.waitApplied(t, "flux-system", "apps", head)
	e.waitApplied(t, wsName, "workspace-"+wsName, wsHead)
	e.requireRendered(t, clusterRepo, "platform", "")
	e.waitObject(t, "e2e.fleetbot.io/v1", "Widget", "", "w1", "applied by the old platform Kustomization", exists)
	return head
}

// handoffObjects are objects the old platform Kustomization applied that
// today's Kustomizations take over.
var handoffObjects = []tracked{
	{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.e2e.fleetbot.io"},
	{"e2e.fleetbot.io/v1", "Widget", "", "w1"},
	{"v1", "Namespace", "", "monitoring"},
	{"apps/v1", "DaemonSet", "monitoring", "node-exporter"},
	{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "", "fleetbot-flux-tenancy"},
}

// handoffScenario: fleetbot's PR brings today's layout to a cluster running
// the old one. The worst order is forced: flux-system is suspended, so the
// old platform Kustomization (prune on) reconciles the new revision with its
// old spec first; it must build the same objects and delete none. Then
// flux-system applies flux/fleetbot.yaml: platform is suspended with prune
// off, one Kustomization per component takes its objects over, and every
// object keeps its UID, the custom resource included. It returns the head.
func (e *environment) handoffScenario(t *testing.T) string {
	ctx := context.Background()
	before := e.uids(t, handoffObjects)

	e.setSuspend(t, "flux-system", "flux-system", true)
	e.apply(t)
	head := e.merge(t, clusterRepo)
	_, err := os.Stat(filepath.Join(e.clone(t, clusterRepo), "platform", "kustomization.yaml"))
	require.True(t, os.IsNotExist(err), "today's layout has no platform/kustomization.yaml: %v", err)
	e.requestReconcile(t, "flux-system", "flux-system")
	// The old spec builds the new revision: Flux generates a kustomization
	// for ./platform listing its subdirectories.
	e.waitApplied(t, "flux-system", "platform", head)
	assert.Equal(t, before, e.uids(t, handoffObjects), "the old platform Kustomization applied the new revision and deleted nothing")

	e.setSuspend(t, "flux-system", "flux-system", false)
	e.waitApplied(t, "flux-system", "flux-system", head)
	e.waitObject(t, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "platform", "retired: suspended, prune off", func(obj map[string]any) bool {
		return obj != nil && field(obj, "spec", "suspend") == true && field(obj, "spec", "prune") == false
	})
	for _, k := range []string{"platform-widgets", "platform-monitoring", "fleetbot-tenancy", "apps"} {
		e.waitApplied(t, "flux-system", k, head)
	}
	apps, err := e.kube.get(ctx, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", "flux-system", "apps")
	require.NoError(t, err)
	assert.Nil(t, field(apps, "spec", "dependsOn"), "apps waits for no component")
	for _, dir := range []string{"platform/widgets", "platform/monitoring", "platform/fleetbot.flux-tenancy"} {
		e.requireRendered(t, clusterRepo, dir, "")
	}
	e.requireRendered(t, wsRepo, "clusters/"+clusterName+"/fleetbot", wsName)
	e.waitObject(t, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.e2e.fleetbot.io", "owned by platform-widgets", ownedBy("platform-widgets"))
	e.waitObject(t, "e2e.fleetbot.io/v1", "Widget", "", "w1", "owned by platform-widgets", ownedBy("platform-widgets"))
	e.waitObject(t, "apps/v1", "DaemonSet", "monitoring", "node-exporter", "owned by platform-monitoring", ownedBy("platform-monitoring"))
	assert.Equal(t, before, e.uids(t, handoffObjects), "every object the old platform Kustomization applied keeps its UID")
	e.waitObject(t, "apps/v1", "Deployment", wsName, "podinfo", "applied in the workspace namespace", exists)
	return head
}

// ownedBy matches an object whose Flux owner label names Kustomization k.
func ownedBy(k string) func(map[string]any) bool {
	return func(obj map[string]any) bool {
		return obj != nil && field(obj, "metadata", "labels", "kustomize.toolkit.fluxcd.io/name") == k
	}
}
