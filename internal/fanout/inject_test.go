package fanout

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"testing/fstest"
)

// withPaymentsValue sets one podinfo value of the payments workspace (a workspace admin may
// change their workspace's values) to a YAML block scalar holding value.
func withPaymentsValue(t *testing.T, name, value string) fstest.MapFS {
	t.Helper()
	m := exampleFS(t)
	var indented strings.Builder
	for _, l := range strings.Split(value, "\n") {
		indented.WriteString("          " + l + "\n")
	}
	ws := string(m["workspaces/payments.yaml"].Data)
	old := `        podinfo_message: "Hello from payments"` + "\n"
	require.Contains(t, ws, old)
	if name == "podinfo_message" {
		ws = strings.Replace(ws, old, "        podinfo_message: |-\n"+indented.String(), 1)
	} else {
		ws = strings.Replace(ws, `        podinfo_replicas: "2"`+"\n", "        "+name+": |-\n"+indented.String(), 1)
	}
	m["workspaces/payments.yaml"] = &fstest.MapFile{Data: []byte(ws)}
	return m
}

// attackRefused renders a control repo a value attack was planted in: the render fails with an
// issue at the cluster's values naming the object, and nothing is rendered.
func attackRefused(t *testing.T, m fstest.MapFS, needles ...string) {
	t.Helper()
	is := renderIssues(t, load(t, m))
	requireIssue(t, is, "clusters/prod-eu-1.yaml", append([]string{"app podinfo", "Deployment/podinfo"}, needles...)...)
}

// TestAttackValueAddsDocument: a workspace admin's value that closes the document and starts
// a ClusterRoleBinding must not add that object to the workspace repo.
func TestAttackValueAddsDocument(t *testing.T) {
	t.Parallel()
	crb := "\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: pwned\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: default, namespace: payments}]"
	// replicas: ${podinfo_replicas} is a plain scalar: the text stays valid YAML, two documents.
	// The rest of the Deployment is swallowed by a block scalar key the value opens.
	attackRefused(t, withPaymentsValue(t, "podinfo_replicas", "2"+crb+"\nrest: |"), "added 1 YAML document")
	// value: "${podinfo_message}" is quoted: the text no longer parses.
	attackRefused(t, withPaymentsValue(t, "podinfo_message", "hi"+crb), "does not parse")
}

// TestAttackValueAddsMapKey: a value that ends the line and starts a sibling key.
func TestAttackValueAddsMapKey(t *testing.T) {
	t.Parallel()
	attackRefused(t, withPaymentsValue(t, "podinfo_replicas", "2\n  serviceAccountName: cluster-admin-sa"), "structure")
}

// TestAttackValueRetypesScalar: a value that turns a scalar into a list or a map.
func TestAttackValueRetypesScalar(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"[1, 2]", "{hostNetwork: true}"} {
		attackRefused(t, withPaymentsValue(t, "podinfo_replicas", v), "spec.replicas", "structure")
	}
}

// TestValueStaysAScalar: values with YAML syntax that fits in the scalar are rendered as that
// scalar (a plain number stays a number, as with Flux's substitution).
func TestValueStaysAScalar(t *testing.T) {
	t.Parallel()
	targets := mustRender(t, NewRenderer(Options{}), load(t, withPaymentsValue(t, "podinfo_message", "a: b # not a comment")))
	for _, tg := range targets {
		if tg.Repo == "workspace-payments" {
			f := string(tg.Files["clusters/prod-eu-1/fleetbot/podinfo.yaml"])
			assert.Contains(t, f, "a: b # not a comment")
			assert.Equal(t, 3, strings.Count(f, "\nkind: ")+strings.Count(f[:5], "kind:"), "still three objects")
			return
		}
	}
	t.Fatal("no workspace-payments target")
}

// TestAttackValueInLabelAndSelector: a variable in labels and label selectors stays a string
// whatever the value ("true" would otherwise become a boolean the API server refuses), and a
// value that reshapes them is refused.
func TestAttackValueInLabelAndSelector(t *testing.T) {
	t.Parallel()
	m := exampleFS(t)
	k := string(m["catalog/podinfo/kustomization.yaml"].Data)
	k = strings.Replace(k, "      app.kubernetes.io/name: podinfo\n", "      app.kubernetes.io/name: podinfo\n      tier: ${podinfo_replicas}\n", 1)
	m["catalog/podinfo/kustomization.yaml"] = &fstest.MapFile{Data: []byte(k)}
	ws := strings.Replace(string(m["workspaces/payments.yaml"].Data), `podinfo_replicas: "2"`, `podinfo_replicas: "true"`, 1)
	m["workspaces/payments.yaml"] = &fstest.MapFile{Data: []byte(ws)}
	targets := mustRender(t, NewRenderer(Options{}), load(t, m))
	for _, tg := range targets {
		if tg.Repo == "workspace-payments" {
			f := string(tg.Files["clusters/prod-eu-1/fleetbot/podinfo.yaml"])
			assert.Contains(t, f, `tier: "true"`, "label values are strings")
			assert.NotContains(t, f, "tier: true\n")
		}
	}
	m["workspaces/payments.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(ws, `podinfo_replicas: "true"`, "podinfo_replicas: \"x\\n      evil: y\"", 1))}
	is := renderIssues(t, load(t, m))
	requireIssue(t, is, "clusters/prod-eu-1.yaml", "app podinfo")
}

// TestAttackValueChangeKeepsGeneratedName: kustomize hashes a configMapGenerator's content
// with the ${name} references in it, so without rehashing a values change kept the
// ConfigMap's name and the pods mounting it never rolled (or two clusters with different
// values shared a name for different content). The name must carry the hash of the
// substituted content, the one kustomize gives the same input with the value written in, and
// every reference must follow it.
func TestAttackValueChangeKeepsGeneratedName(t *testing.T) {
	t.Parallel()
	m := exampleFS(t)
	k := string(m["catalog/podinfo/kustomization.yaml"].Data)
	k = strings.Replace(k, "  - configmap.yaml\n", "configMapGenerator:\n  - name: podinfo\n    literals: [\"message=${podinfo_message}\"]\n", 1)
	m["catalog/podinfo/kustomization.yaml"] = &fstest.MapFile{Data: []byte(k)}
	delete(m, "catalog/podinfo/configmap.yaml")
	us := string(m["clusters/prod-us-1.yaml"].Data) + "    podinfo_message: Hello from the US\n"
	m["clusters/prod-us-1.yaml"] = &fstest.MapFile{Data: []byte(us)}

	want := func(message string) string {
		fs := filesys.MakeFsInMemory()
		require.NoError(t, fs.WriteFile("/k/kustomization.yaml", []byte("configMapGenerator:\n  - name: podinfo\n    literals: [\"message="+message+"\"]\n")))
		rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, "/k")
		require.NoError(t, err)
		return rm.Resources()[0].GetName()
	}
	names := map[string]string{}
	for _, tg := range mustRender(t, NewRenderer(Options{}), load(t, m)) {
		if tg.Repo != "workspace-payments" {
			continue
		}
		for cluster, message := range map[string]string{"prod-eu-1": "Hello from payments", "prod-us-1": "Hello from the US"} {
			f := string(tg.Files["clusters/"+cluster+"/fleetbot/podinfo.yaml"])
			name := want(message)
			assert.Contains(t, f, "  name: "+name+"\n", "%s: the ConfigMap carries the hash of its substituted content", cluster)
			assert.Contains(t, f, "          name: "+name+"\n", "%s: the Deployment's volume follows the name", cluster)
			assert.NotContains(t, f, "message: ${", cluster)
			names[cluster] = name
		}
	}
	require.Len(t, names, 2)
	assert.NotEqual(t, names["prod-eu-1"], names["prod-us-1"], "different values, different names")
}
