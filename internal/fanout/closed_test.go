package fanout

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// closedWorld puts recording git, helm and kustomize executables first and
// alone on PATH and serves HTTP on 127.0.0.1, counting requests: each
// program appends its arguments to a marker file named after it.
type closedWorld struct {
	markers string
	hits    atomic.Int64
	url     string
}

func newClosedWorld(t testing.TB) *closedWorld {
	t.Helper()
	w := &closedWorld{markers: t.TempDir()}
	bin := t.TempDir()
	for _, prog := range []string{"git", "helm", "kustomize"} {
		script := fmt.Sprintf("#!/bin/sh\necho \"$@\" >> %q\nexit 0\n", filepath.Join(w.markers, prog))
		require.NoError(t, os.WriteFile(filepath.Join(bin, prog), []byte(script), 0o755))
	}
	t.Setenv("PATH", bin)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		w.hits.Add(1)
		_, _ = rw.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fetched\n"))
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

// assertNothingRan fails when any recording program was started or any
// request reached the server, then clears the record for the next case.
func (w *closedWorld) assertNothingRan(t *testing.T, what string) {
	t.Helper()
	for _, prog := range []string{"git", "helm", "kustomize"} {
		marker := filepath.Join(w.markers, prog)
		if data, err := os.ReadFile(marker); err == nil {
			t.Errorf("%s: %s was run: %s", what, prog, data)
			require.NoError(t, os.Remove(marker))
		}
	}
	assert.Zero(t, w.hits.Swap(0), "%s: HTTP requests were made", what)
}

// remoteForms are references kustomize's loader would clone with git or
// fetch over HTTP.
func remoteForms(srvURL string) []string {
	return []string{
		"github.com:acme/repo",
		"github.com/acme/repo",
		"GitHub.com/acme/repo",
		"https://github.com/acme/repo",
		"git::https://github.com/acme/repo",
		"ssh://git@github.com/acme/repo",
		"git@github.com:acme/repo",
		"deploy@git.example.com:acme/repo",
		"git.example.com/acme/repo?ref=main",
		"github.com/acme/repo//deploy?ref=v1",
		"file:///srv/git/repo",
		srvURL + "/manifests.yaml",
	}
}

// withLocalTwin adds, for a reference, a local directory of the same name
// holding a valid kustomization: the old check let such a reference through
// because the directory existed, and kustomize then fetched it anyway.
func withLocalTwin(files map[string][]byte, dir, ref string) {
	p := path.Join(dir, path.Clean(ref))
	files[p+"/kustomization.yaml"] = []byte("resources: [cm.yaml]\n")
	files[p+"/cm.yaml"] = []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twin\n")
}

// TestAttackRemoteResourceFetchedByRender: a catalog app whose kustomization
// names a remote base, in every form, fails to render with the kustomization's
// file:line, and neither git nor HTTP is ever used.
func TestAttackRemoteResourceFetchedByRender(t *testing.T) {
	w := newClosedWorld(t)
	for _, ref := range remoteForms(w.url) {
		t.Run(ref, func(t *testing.T) {
			defer w.assertNothingRan(t, ref)
			files := map[string][]byte{"kustomization.yaml": []byte("resources:\n- cm.yaml\n- " + ref + "\n"),
				"cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: own\n")}
			withLocalTwin(files, ".", ref)
			repo := loadExample(t)
			repo.Apps = append(repo.Apps, &control.App{
				Metadata: control.Meta{Name: "remote"}, Dir: "catalog/remote",
				Spec: control.AppSpec{Scope: control.ScopeCluster}, Files: files,
			})
			is := renderIssues(t, repo)
			requireIssue(t, is, "catalog/remote/kustomization.yaml", ":3", fmt.Sprintf("%q is remote", ref))
		})
	}
}

// TestAttackRemoteResourceFetchedByCheck: the same in a workspace repo's
// apps/ and in a cluster repo's apps/, through check workspace and check
// cluster.
func TestAttackRemoteResourceFetchedByCheck(t *testing.T) {
	w := newClosedWorld(t)
	for _, ref := range remoteForms(w.url) {
		for _, c := range []RepoCheck{paymentsCheck, {Entries: []string{"apps"}}} {
			t.Run(ref, func(t *testing.T) {
				defer w.assertNothingRan(t, ref)
				files := workspaceRepo(t)
				files["apps/kustomization.yaml"] = []byte("resources:\n- " + ref + "\n")
				withLocalTwin(files, "apps", ref)
				got := CheckRepo(files, c)
				require.NotEmpty(t, got)
				assert.Equal(t, "apps/kustomization.yaml", got[0].File)
				assert.Equal(t, 2, got[0].Line)
				assert.Contains(t, got[0].Message, fmt.Sprintf("%q is remote", ref))
				assert.NotEmpty(t, got[0].Hint)
			})
		}
	}
}

// TestAttackRemoteFormInEveryKustomizationField: each field kustomize loads
// through its loader refuses a remote form, whatever case the key is
// written in (kustomize matches keys case-insensitively).
func TestAttackRemoteFormInEveryKustomizationField(t *testing.T) {
	w := newClosedWorld(t)
	ref := "github.com:acme/repo"
	u := w.url + "/x.yaml"
	for name, k := range map[string]string{
		"Resources key":         "Resources:\n- " + ref + "\n",
		"bases":                 "bases:\n- " + ref + "\n",
		"components":            "components:\n- " + ref + "\n",
		"crds":                  "crds:\n- " + u + "\n",
		"configurations":        "configurations:\n- " + u + "\n",
		"patches path":          "resources: [cm.yaml]\npatches:\n- path: " + u + "\n",
		"patchesStrategicMerge": "resources: [cm.yaml]\npatchesStrategicMerge:\n- " + u + "\n",
		"patchesJson6902":       "resources: [cm.yaml]\npatchesJson6902:\n- path: " + u + "\n  target: {kind: ConfigMap, name: own}\n",
		"replacements path":     "resources: [cm.yaml]\nreplacements:\n- path: " + u + "\n",
		"configMapGenerator":    "configMapGenerator:\n- name: c\n  files: [k=" + u + "]\n",
		"secretGenerator envs":  "secretGenerator:\n- name: s\n  envs: [" + u + "]\n",
		"openapi":               "resources: [cm.yaml]\nopenapi:\n  path: " + u + "\n",
		"generators":            "generators:\n- " + ref + "\n",
		"transformers":          "resources: [cm.yaml]\ntransformers:\n- " + ref + "\n",
		"anchor and alias":      "namePrefix: &r " + ref + "\nresources:\n- *r\n",
	} {
		t.Run(name, func(t *testing.T) {
			defer w.assertNothingRan(t, name)
			files := map[string][]byte{"kustomization.yaml": []byte(k),
				"cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: own\n")}
			withLocalTwin(files, ".", ref)
			probs := precheck(files)
			require.NotEmpty(t, probs, "kustomization:\n%s", k)
			assert.Contains(t, probs[0].Message, "is remote")
			assert.Positive(t, probs[0].Line)
			// Even past the precheck, what kustomize gets is local only.
			b := kustomize(NewRenderer(Options{}).kustomizer, files)
			assert.NotEmpty(t, b.problems)
		})
	}
}

// TestAttackBuiltinPluginConfigFetches: a builtin plugin config, referenced
// by file or through a directory, that names a URL (which kustomize's loader
// would GET), or the builtin Helm generator (which runs helm), is refused.
func TestAttackBuiltinPluginConfigFetches(t *testing.T) {
	w := newClosedWorld(t)
	patch := "apiVersion: builtin\nkind: PatchTransformer\nmetadata:\n  name: p\npath: " + w.url + "/patch.yaml\ntarget: {kind: ConfigMap}\n"
	helm := "apiVersion: builtin\nkind: HelmChartInflationGenerator\nmetadata:\n  name: h\nname: podinfo\nrepo: " + w.url + "\n"
	cm := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: own\n")
	for name, files := range map[string]map[string][]byte{
		"transformer file": {"kustomization.yaml": []byte("resources: [cm.yaml]\ntransformers: [t.yaml]\n"), "t.yaml": []byte(patch), "cm.yaml": cm},
		"transformer dir": {"kustomization.yaml": []byte("resources: [cm.yaml]\ntransformers: [t]\n"),
			"t/kustomization.yaml": []byte("resources: [t.yaml]\n"), "t/t.yaml": []byte(patch), "cm.yaml": cm},
		"inline transformer": {"kustomization.yaml": []byte("resources: [cm.yaml]\ntransformers:\n- |\n" + indent(patch) + "\n"), "cm.yaml": cm},
		"helm generator":     {"kustomization.yaml": []byte("generators: [h.yaml]\n"), "h.yaml": []byte(helm)},
		"helmCharts":         {"kustomization.yaml": []byte("helmCharts:\n- name: podinfo\n  repo: " + w.url + "\n")},
	} {
		t.Run(name, func(t *testing.T) {
			defer w.assertNothingRan(t, name)
			b := kustomize(NewRenderer(Options{}).kustomizer, files)
			require.NotEmpty(t, b.problems, "%s must be refused", name)
			assert.NotContains(t, b.problems[0].Message, "kustomize build failed", "refused before kustomize runs: %+v", b.problems)
		})
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ")
}

// TestLocalTwinStillRenders: a local directory whose name merely resembles
// a host renders from the staged tree when named by an explicit relative
// path.
func TestLocalTwinStillRenders(t *testing.T) {
	w := newClosedWorld(t)
	defer w.assertNothingRan(t, "local twin")
	files := map[string][]byte{"kustomization.yaml": []byte("resources:\n- ./vendor/github.com/acme/repo\n")}
	withLocalTwin(files, ".", "vendor/github.com/acme/repo")
	b := kustomize(NewRenderer(Options{}).kustomizer, files)
	require.Empty(t, b.problems)
	require.Len(t, b.objects, 1)
	assert.Equal(t, "ConfigMap/twin", b.objects[0].id())
	w.assertNothingRan(t, "local twin")
}

// TestCloseApp: the exported door for krusty callers outside the renderer
// (the naive benchmark) stages a clean app with explicit local paths and
// refuses a remote base with file:line.
func TestCloseApp(t *testing.T) {
	w := newClosedWorld(t)
	defer w.assertNothingRan(t, "CloseApp")
	files := map[string][]byte{"kustomization.yaml": []byte("resources: [cm.yaml]\n"),
		"cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: own\n")}
	staged, err := CloseApp(files)
	require.NoError(t, err)
	assert.Contains(t, string(staged["kustomization.yaml"]), "- ./cm.yaml")
	assert.Equal(t, files["cm.yaml"], staged["cm.yaml"])

	files["kustomization.yaml"] = []byte("resources:\n- cm.yaml\n- github.com:acme/repo\n")
	withLocalTwin(files, ".", "github.com:acme/repo")
	_, err = CloseApp(files)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `kustomization.yaml:3: resources entry "github.com:acme/repo" is remote`)
}

// aliasBomb is a few hundred bytes that a decoder expanding aliases turns into 9^9 strings.
const aliasBomb = `a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
`

// TestAttackAliasBombInWorkspaceRepo: a workspace (or cluster) admin's alias bomb, in a
// manifest or in the kustomization itself, is refused by check workspace and check cluster
// with the file's name before anything decodes it (kustomize, and the kustomization decoder
// of closeTree, expand aliases: ~10 GB).
func TestAttackAliasBombInWorkspaceRepo(t *testing.T) {
	t.Parallel()
	for name, files := range map[string]map[string][]byte{
		"manifest": {"apps/kustomization.yaml": []byte("resources: [bomb.yaml]\n"),
			"apps/bomb.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n" + indent(aliasBomb) + "\n")},
		"kustomization": {"apps/kustomization.yaml": []byte("resources: [cm.yaml]\nx:\n" + indent(aliasBomb) + "\n"),
			"apps/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")},
	} {
		t.Run(name, func(t *testing.T) {
			ws := workspaceRepo(t)
			for p, d := range files {
				ws[p] = d
			}
			for _, c := range []RepoCheck{paymentsCheck, {Entries: []string{"apps"}}} {
				got := CheckRepo(ws, c)
				require.Len(t, got, 1, "%+v", got)
				for p := range files {
					if strings.Contains(string(files[p]), "&a") {
						assert.Equal(t, p, got[0].File)
					}
				}
				assert.Contains(t, got[0].Message, "too many nodes")
			}
		})
	}
}
