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

// widgetsApp is a platform component shipping a CRD and a custom resource of
// it: what removing another component must not touch (deleting a CRD deletes
// every custom resource of it).
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

// tracked is an object whose identity a scenario keeps an eye on.
type tracked struct{ apiVersion, kind, namespace, name string }

func (o tracked) String() string { return o.kind + " " + o.namespace + "/" + o.name }

// uids returns the UID of each object (failing when one is missing).
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

// componentObjects are objects of the platform components the scenarios watch.
var componentObjects = []tracked{
	{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "widgets.e2e.fleetbot.io"},
	{"e2e.fleetbot.io/v1", "Widget", "", "w1"},
	{"v1", "Namespace", "", "monitoring"},
	{"apps/v1", "DaemonSet", "monitoring", "node-exporter"},
	{"admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "", "fleetbot-flux-tenancy"},
}

// bootstrapScenario: the control repo gains the widgets component (a CRD and a
// custom resource of it), fleetbot's pull requests are merged, Flux is
// bootstrapped on the cluster repo as flux bootstrap --path=flux would, and
// every Kustomization fleetbot wrote (one per component, the tenancy policy,
// apps, the workspace's) applies what fleetbot rendered. It returns the head.
func (e *environment) bootstrapScenario(t *testing.T) string {
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
	_, err = os.Stat(filepath.Join(e.clone(t, clusterRepo), "platform", "kustomization.yaml"))
	require.True(t, os.IsNotExist(err), "platform/ holds one directory per component, no kustomization.yaml: %v", err)

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

	for _, k := range []string{"platform-widgets", "platform-monitoring", "fleetbot-tenancy", "apps"} {
		e.waitApplied(t, "flux-system", k, head)
	}
	e.waitApplied(t, wsName, "workspace-"+wsName, wsHead)
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
	e.uids(t, componentObjects) // every one exists
	e.waitObject(t, "apps/v1", "Deployment", wsName, "podinfo", "applied in the workspace namespace", exists)
	return head
}

// ownedBy matches an object whose Flux owner label names Kustomization k.
func ownedBy(k string) func(map[string]any) bool {
	return func(obj map[string]any) bool {
		return obj != nil && field(obj, "metadata", "labels", "kustomize.toolkit.fluxcd.io/name") == k
	}
}
