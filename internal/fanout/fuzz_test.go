package fanout

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/fstest"

	"go.yaml.in/yaml/v3"
	"sigs.k8s.io/kustomize/api/types"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// fuzzBenign marks the scalars a value lands in: the reference render uses values holding it.
const fuzzBenign = "fuzzbenign"

// maxRenderAlloc bounds what one warm render of the example fleet may allocate.
const maxRenderAlloc = 256 << 20

// FuzzValueSubstitution renders the example fleet with two podinfo values of one cluster set
// to the inputs. podinfo uses them in a plain scalar (replicas), a double-quoted scalar (an
// env value), a label and label selector (tier) and a configMapGenerator literal. Invariants:
// no panic; allocation bounded; a failure is a list of issues at the cluster's file, and
// nothing is rendered; a success has, in every file, exactly the documents and the tree of
// the reference render: same node kinds, keys and list lengths, only the scalars a value
// lands in may differ; label values stay strings; and the generated ConfigMap's name, which
// carries the hash of its content, is the one the Deployment mounts.
func FuzzValueSubstitution(f *testing.F) {
	m := exampleFS(f)
	k := string(m["catalog/podinfo/kustomization.yaml"].Data)
	k = strings.Replace(k, "      app.kubernetes.io/name: podinfo\n", "      app.kubernetes.io/name: podinfo\n      tier: ${podinfo_replicas}\n", 1)
	k = strings.Replace(k, "  - configmap.yaml\n", "configMapGenerator:\n  - name: podinfo\n    literals: [\"message=${podinfo_message}\"]\n", 1)
	m["catalog/podinfo/kustomization.yaml"] = &fstest.MapFile{Data: []byte(k)}
	delete(m, "catalog/podinfo/configmap.yaml")
	repo := load(f, m)
	var cluster *control.Cluster
	for _, c := range repo.Clusters {
		if c.Metadata.Name == "prod-eu-1" {
			cluster = c
		}
	}
	if cluster == nil {
		f.Fatal("no cluster prod-eu-1 in the example")
	}
	const file = "workspace-payments clusters/prod-eu-1/fleetbot/podinfo.yaml"
	r := NewRenderer(Options{})
	exact := NewRenderer(Options{})
	exact.exact = true
	renderWith := func(r *Renderer, replicas, message string) (map[string][]byte, error) {
		cluster.Spec.Values["podinfo_replicas"] = replicas
		cluster.Spec.Values["podinfo_message"] = message
		targets, err := r.Render(repo)
		out := map[string][]byte{}
		for _, tg := range targets {
			for p, data := range tg.Files {
				out[tg.Repo+" "+p] = data
			}
		}
		return out, err
	}
	render := func(replicas, message string) (map[string][]byte, error) { return renderWith(r, replicas, message) }
	ref, err := render(fuzzBenign+"1", fuzzBenign+"2")
	if err != nil {
		f.Fatal(err)
	}
	refDocs := yamlDocs(f, ref[file])
	if len(refDocs) != 3 {
		f.Fatalf("reference %s has %d documents, want 3", file, len(refDocs))
	}
	for _, s := range [][2]string{{"2", "hello"}, {"true", "yes"}, {"2\n---\nkind: ClusterRoleBinding", "x"}, {"[1, 2]", "{a: b}"}, {"1", "a\" : b"}, {"", ""}} {
		f.Add(s[0], s[1])
	}

	f.Fuzz(func(t *testing.T, replicas, message string) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		got, err := render(replicas, message)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > maxRenderAlloc {
			t.Fatalf("a render with values of %d and %d bytes allocated %d bytes", len(replicas), len(message), n)
		}
		// The render's shortcuts (relayout, inert values) change nothing.
		want, werr := renderWith(exact, replicas, message)
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("render error %v, without the shortcuts %v", err, werr)
		}
		for p, data := range want {
			if !bytes.Equal(got[p], data) {
				t.Fatalf("%s differs from the render without the shortcuts:\n%s\nwant:\n%s", p, got[p], data)
			}
		}
		if err != nil {
			var is control.Issues
			if !errors.As(err, &is) {
				t.Fatalf("render error is not a list of issues: %v", err)
			}
			for _, i := range is {
				if i.Pos.File != "clusters/prod-eu-1.yaml" {
					t.Fatalf("issue not at the cluster whose values broke the render: %s", i)
				}
			}
			if len(got) != 0 {
				t.Fatalf("a failed render returned files")
			}
			return
		}
		if len(got) != len(ref) {
			t.Fatalf("%d files rendered, the reference has %d", len(got), len(ref))
		}
		for p, data := range got {
			if _, ok := ref[p]; !ok {
				t.Fatalf("a value added the file %s", p)
			}
			if p != file {
				continue
			}
			docs := yamlDocs(t, data)
			if len(docs) != len(refDocs) {
				t.Fatalf("%s: %d documents, the reference has %d:\n%s", p, len(docs), len(refDocs), data)
			}
			for i := range docs {
				if where := sameShape(refDocs[i], docs[i], ""); where != "" {
					t.Fatalf("%s: document %d changed at %s:\n%s", p, i, where, data)
				}
			}
			checkLabels(t, docs)
			cm := scalarAt(docs[0], "metadata", "name")
			if !strings.HasPrefix(cm, "podinfo-") || !bytes.Contains(data, []byte("name: "+cm+"\n")) || strings.Count(string(data), cm) < 2 {
				t.Fatalf("%s: the ConfigMap %q is not what the Deployment mounts:\n%s", p, cm, data)
			}
		}
	})
}

// yamlDocs parses every document of data (an independent decoder from the renderer's).
func yamlDocs(t testing.TB, data []byte) []*yaml.Node {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*yaml.Node
	for {
		var n yaml.Node
		if err := dec.Decode(&n); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatalf("rendered YAML does not parse: %v\n%s", err, data)
		}
		out = append(out, &n)
	}
}

// sameShape compares a document with the reference and returns where they differ: a node of
// another kind, other keys, another list length, or another scalar where the reference holds
// no value (fuzzBenign) and no generated name.
func sameShape(ref, got *yaml.Node, at string) string {
	if ref.Kind != got.Kind {
		return fmt.Sprintf("%s (kind %d became %d)", at, ref.Kind, got.Kind)
	}
	if len(ref.Content) != len(got.Content) {
		return fmt.Sprintf("%s (%d children became %d)", at, len(ref.Content), len(got.Content))
	}
	if ref.Kind == yaml.ScalarNode && ref.Value != got.Value &&
		!strings.Contains(ref.Value, fuzzBenign) && !strings.HasPrefix(ref.Value, "podinfo-") {
		return fmt.Sprintf("%s (%q became %q)", at, ref.Value, got.Value)
	}
	for i := range ref.Content {
		if w := sameShape(ref.Content[i], got.Content[i], fmt.Sprintf("%s/%d", at, i)); w != "" {
			return w
		}
	}
	return ""
}

// checkLabels fails when a label or label selector value is not a string.
func checkLabels(t *testing.T, docs []*yaml.Node) {
	t.Helper()
	var walk func(n *yaml.Node, labels bool)
	walk = func(n *yaml.Node, labels bool) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, false)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if labels && (v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str") {
					t.Fatalf("label %s is not a string (%s %q)", k.Value, v.ShortTag(), v.Value)
				}
				walk(v, k.Value == "labels" || k.Value == "matchLabels")
			}
		}
	}
	for _, d := range docs {
		walk(d, false)
	}
}

// scalarAt returns the scalar at a path of mapping keys, or "".
func scalarAt(n *yaml.Node, keys ...string) string {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, k := range keys {
		var next *yaml.Node
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return ""
		}
		n = next
	}
	return n.Value
}

// FuzzKustomizationLoad checks a cluster repo whose apps/kustomization.yaml is the input,
// beside a ConfigMap, a local base, a directory named like a remote (github.com:acme/repo)
// and a 127.0.0.1 URL, with recording git, helm and kustomize alone on PATH. Invariants: no
// panic; allocation bounded; no process started and no request made; every problem names a
// file of the repo; and every kustomization staged for kustomize names only explicit local
// paths (., .., ./x or ../x) in resources, bases and components.
func FuzzKustomizationLoad(f *testing.F) {
	w := newClosedWorld(f)
	const kfile = "apps/kustomization.yaml"
	base := map[string][]byte{
		"apps/cm.yaml":                                 []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: own\n"),
		"apps/base/kustomization.yaml":                 []byte("resources: [cm.yaml]\n"),
		"apps/base/cm.yaml":                            []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: base\n"),
		"apps/github.com:acme/repo/kustomization.yaml": []byte("resources: [cm.yaml]\n"),
		"apps/github.com:acme/repo/cm.yaml":            []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twin\n"),
		"apps/patch.yaml":                              []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: own\ndata: {a: b}\n"),
		"apps/values.env":                              []byte("A=1\n"),
	}
	for _, s := range []string{
		"resources: [cm.yaml, base]\n",
		"resources:\n- github.com:acme/repo\n",
		"resources:\n- " + w.url + "/x.yaml\n",
		"Resources:\n- ./base\npatches:\n- path: patch.yaml\n",
		"namePrefix: &r github.com/acme/repo\nresources:\n- *r\n",
		"configMapGenerator:\n- name: c\n  envs: [values.env]\n",
		"helmCharts:\n- name: podinfo\n  repo: " + w.url + "\n",
		"resources: [../../etc/passwd]\n",
		"components: [/abs]\n",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		files := make(map[string][]byte, len(base)+1)
		for p, d := range base {
			files[p] = d
		}
		files[kfile] = data
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		probs := CheckRepo(files, RepoCheck{Entries: []string{"apps"}})
		staged, _ := closeTree(files, []string{"apps"}, false)
		runtime.ReadMemStats(&after)
		if n := after.TotalAlloc - before.TotalAlloc; n > 512<<20 {
			t.Fatalf("checking a %d-byte kustomization allocated %d bytes", len(data), n)
		}
		w.assertNothingRan(t, "fuzz input")
		for _, p := range probs {
			if _, ok := files[p.File]; !ok && !strings.HasPrefix(p.File, "apps") {
				t.Fatalf("problem names %q, not a file of the repo: %s", p.File, p)
			}
			if p.Message == "" {
				t.Fatalf("problem without a message at %s", p.File)
			}
		}
		for p, d := range staged {
			if !isKustomization(p) {
				continue
			}
			var k types.Kustomization
			if err := k.Unmarshal(d); err != nil {
				t.Fatalf("staged %s does not decode: %v\n%s", p, err, d)
			}
			//lint:ignore SA1019 kustomize still reads bases.
			for _, list := range [][]string{k.Resources, k.Bases, k.Components} {
				for _, r := range list {
					if r != "." && r != ".." && !strings.HasPrefix(r, "./") && !strings.HasPrefix(r, "../") {
						t.Fatalf("staged %s names %q, not an explicit local path:\n%s", p, r, d)
					}
				}
			}
		}
	})
}
