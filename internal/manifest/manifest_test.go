package manifest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const deploy = `# comment
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: payments}
spec: {replicas: 1}
---
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: payments}
`

func TestParseSkipsEmptyDocuments(t *testing.T) {
	objs, err := Parse([]byte(deploy))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	assert.Equal(t, "Deployment/payments/web", objs[0].ID())
	assert.Equal(t, "Service/payments/web", objs[1].ID())
}

func TestParseReportsBadYAML(t *testing.T) {
	_, err := Parse([]byte("kind: [unclosed"))
	require.Error(t, err)
}

func TestDiffClassifiesObjects(t *testing.T) {
	before := map[string][]byte{"a.yaml": []byte(deploy)}
	after := map[string][]byte{"a.yaml": []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: payments}
spec: {replicas: 2}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: payments}
`)}
	c := Diff(before, after)
	require.Len(t, c.Added, 1)
	assert.Equal(t, "ConfigMap/payments/cfg", c.Added[0].ID())
	require.Len(t, c.Changed, 1)
	assert.Equal(t, "Deployment/payments/web", c.Changed[0].ID())
	require.Len(t, c.Removed, 1)
	assert.Equal(t, "Service/payments/web", c.Removed[0].ID())
	assert.True(t, Diff(before, before).Empty(), "same files must not differ")
}

func TestFormatCountsIsSorted(t *testing.T) {
	objs, err := Parse([]byte(deploy))
	require.NoError(t, err)
	assert.Equal(t, "Deployment×1, Service×1", FormatCounts(CountByKind(objs)))
}

// TestAttackAliasBombInTargetRepoFile: a file in a target repo (human-editable, read for the
// object diff) that expands to billions of nodes is refused, not expanded.
func TestAttackAliasBombInTargetRepoFile(t *testing.T) {
	bomb := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n  a: &a [x,x,x,x,x,x,x,x,x]\n  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\n  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n"
	_, err := Parse([]byte(bomb))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "alias bomb")
}

func TestNeedsFromCluster(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
		provided   string
	}{
		{"built-in kinds only", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: b}\n", nil, ""},
		{"a kind from a CRD the cluster must have",
			"apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p}\n---\napiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: q}\n---\napiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l}\n",
			[]string{"IPAddressPool.metallb.io", "L2Advertisement.metallb.io"}, ""},
		{"the component ships the CRD itself",
			"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: ipaddresspools.metallb.io}\n---\napiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p}\n", nil, ""},
		{"a dependency ships the CRD",
			"apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: p}\n---\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata: {name: s}\n",
			[]string{"ServiceMonitor.monitoring.coreos.com"},
			"apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: ipaddresspools.metallb.io}\n"},
		{"kustomize's own config is not an object", "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n", nil, ""},
	} {
		objs, err := Parse([]byte(tc.yaml))
		require.NoError(t, err, tc.name)
		provided, err := Parse([]byte(tc.provided))
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, NeedsFromCluster(objs, provided), tc.name)
	}
}
