package fanout

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

// renderBothWays renders repo with the shortcuts (relayout of namespaces from one placeholder
// layout, no parse check of inert values) and exactly (every namespace serialised from the
// objects, every substitution parsed), and requires the same trees or the same issues.
func renderBothWays(t *testing.T, repo *control.Repo, what string) {
	t.Helper()
	fast, exact := bothWays()
	renderBothWaysWith(t, fast, exact, repo, what)
}

// bothWays returns a Renderer with the shortcuts and an exact one.
func bothWays() (fast, exact *Renderer) {
	exact = NewRenderer(Options{})
	exact.exact = true
	return NewRenderer(Options{}), exact
}

// renderBothWaysWith is renderBothWays with the two Renderers given: warm ones (their builds
// cached by a previous render) render what cold ones render (TestWarmRenderReusesFiles), so a
// test of many values renders each app once per way instead of once per value.
func renderBothWaysWith(t *testing.T, fastR, exactR *Renderer, repo *control.Repo, what string) {
	t.Helper()
	fast, ferr := fastR.Render(repo)
	slow, serr := exactR.Render(repo)
	if serr != nil || ferr != nil {
		require.Error(t, ferr, "%s: the exact render failed, the fast one did not: %v", what, serr)
		require.Error(t, serr, "%s: the fast render failed, the exact one did not: %v", what, ferr)
		require.Equal(t, serr.Error(), ferr.Error(), what)
		return
	}
	assertSameTree(t, tree(t, slow), tree(t, fast), "%s", what)
}

// TestFastPathEqualsExactGenerated: generated fleets (platform components on selectors,
// workspace apps in many namespaces, per-cluster values) render byte for byte the same with
// and without the render's shortcuts.
func TestFastPathEqualsExactGenerated(t *testing.T) {
	t.Parallel()
	for _, o := range []fleetgen.Options{{Clusters: 120, Apps: 20, Seed: 1}, {Clusters: 30, Workspaces: 7, Apps: 9, Seed: 3}} {
		repo, err := control.Load(fleetgen.Generate(o))
		require.NoError(t, err)
		fast, exact := bothWays()
		renderBothWaysWith(t, fast, exact, repo, "generated fleet")

		// The shortcuts are taken: namespaces relaid out, documents found inert.
		relaid, inert := 0, 0
		for _, b := range fast.cache {
			for ns, v := range b.variants {
				if v.nsTo == ns && ns != "" {
					relaid++
				}
				for _, d := range v.docs {
					if d.inert {
						inert++
					}
				}
			}
		}
		require.NotZero(t, relaid, "no namespace was relaid out")
		require.NotZero(t, inert, "no document was found inert")
	}
	renderBothWays(t, loadExample(t), "example")
}

// TestFastPathEqualsExactNamespaces: workspace namespaces the YAML encoder quotes or that an
// app's object already names are laid out the exact way, with the same result.
func TestFastPathEqualsExactNamespaces(t *testing.T) {
	t.Parallel()
	rendered := 0
	fast, exact := bothWays()
	for _, ns := range []string{"123", "yes", "no", "null", "true", "1e3", "0x1f", "default", "fleetbot-ns-placeholder-5e2a9c0b", "a", "payments-2"} {
		m := exampleFS(t)
		ws := string(m["workspaces/payments.yaml"].Data)
		ws = strings.Replace(ws, "namespace: payments", "namespace: \""+ns+"\"", 1)
		m["workspaces/payments.yaml"] = &fstest.MapFile{Data: []byte(ws)}
		repo, err := control.Load(m)
		if err != nil {
			continue // a namespace validation refuses is not rendered at all
		}
		rendered++
		renderBothWaysWith(t, fast, exact, repo, "namespace "+ns)
	}
	require.GreaterOrEqual(t, rendered, 8, "most of these namespaces are valid")
}

// TestFastPathEqualsExactValues: values that are inert (no parse check) and values that are
// not, in plain, quoted, label and generated-ConfigMap positions, give the same files or the
// same issues both ways.
func TestFastPathEqualsExactValues(t *testing.T) {
	t.Parallel()
	m := exampleFS(t)
	k := string(m["catalog/podinfo/kustomization.yaml"].Data)
	k = strings.Replace(k, "      app.kubernetes.io/name: podinfo\n", "      app.kubernetes.io/name: podinfo\n      tier: ${podinfo_replicas}\n", 1)
	k = strings.Replace(k, "  - configmap.yaml\n", "configMapGenerator:\n  - name: podinfo\n    literals: [\"message=${podinfo_message}\"]\n", 1)
	m["catalog/podinfo/kustomization.yaml"] = &fstest.MapFile{Data: []byte(k)}
	delete(m, "catalog/podinfo/configmap.yaml")
	repo := load(t, m)
	var cluster *control.Cluster
	for _, c := range repo.Clusters {
		if c.Metadata.Name == "prod-eu-1" {
			cluster = c
		}
	}
	require.NotNil(t, cluster)
	values := []string{"2", "3.5", "0x1F", "1e3", "true", "null", "yes", "a-b", "a/b.c_d", "_x", "10.10.0.0/24",
		"", " ", "-x", "x-", ".5", "a b", "a:b", "a: b", "a #b", "#", "[a]", "{a: b}", "'q'", "\"q\"", `\`, "a,b",
		"*a", "&a", "!x", "|", ">", "%", "@x", "`x`", "2\n  k: v", "x\n---\nkind: Secret", "~", "a:"}
	fast, exact := bothWays()
	for i, replicas := range values {
		message := values[(i*7+3)%len(values)]
		cluster.Spec.Values["podinfo_replicas"] = replicas
		cluster.Spec.Values["podinfo_message"] = message
		renderBothWaysWith(t, fast, exact, repo, "replicas "+replicas+", message "+message)
		cluster.Spec.Values["podinfo_replicas"] = message
		cluster.Spec.Values["podinfo_message"] = replicas
		renderBothWaysWith(t, fast, exact, repo, "replicas "+message+", message "+replicas)
	}
}

func TestInertValue(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{"2": true, "a-b": true, "10.10.0.0/24": true, "_x": true, "v1.2.3": true,
		"": false, "-x": false, ".x": false, "/x": false, "a b": false, "a:b": false, "a#": false, "x\n": false, "é": false} {
		require.Equal(t, want, inertValue(s), "%q", s)
	}
}

// TestWarmRenderReusesFiles: a warm Renderer, after one cluster's value changed, renders what
// a cold one renders, and gives the deployments that did not change the very bytes of its
// previous render (build.files), so comparing them costs nothing.
func TestWarmRenderReusesFiles(t *testing.T) {
	t.Parallel()
	fsys := fleetgen.Generate(fleetgen.Options{Clusters: 40, Apps: 20, Seed: 1})
	var file string
	for p, f := range fsys {
		if strings.HasPrefix(p, "clusters/") && strings.Contains(string(f.Data), ".0/24") && (file == "" || p < file) {
			file = p
		}
	}
	require.NotEmpty(t, file)
	warm := NewRenderer(Options{})
	prev := mustRender(t, warm, load(t, fsys))
	orig := string(fsys[file].Data)
	for _, edit := range []string{".0/25", ".0/24", ".0/26"} {
		fsys[file] = &fstest.MapFile{Data: []byte(strings.Replace(orig, ".0/24", edit, 1))}
		repo := load(t, fsys)
		next := mustRender(t, warm, repo)
		assertSameTree(t, tree(t, mustRender(t, NewRenderer(Options{}), repo)), tree(t, next), "warm render after %s", edit)
		changed, _ := Changed(prev, next)
		require.Len(t, changed, 1, "one cluster's value changed")
		shared := 0
		for i, tg := range next {
			for p, data := range tg.Files {
				if old, ok := prev[i].Files[p]; ok && len(data) > 0 && len(old) > 0 && &old[0] == &data[0] {
					shared++
				}
			}
		}
		require.Greater(t, shared, 500, "unchanged app files are the previous render's bytes")
		prev = next
	}
}
