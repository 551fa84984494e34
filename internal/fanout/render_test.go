package fanout

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	sourcev1 "github.com/fluxcd/source-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// exampleFS reads the example control repo into memory so a test can break
// one file of it.
func exampleFS(t testing.TB) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	root := os.DirFS(exampleDir)
	err := fs.WalkDir(root, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(root, p)
		m[p] = &fstest.MapFile{Data: data}
		return err
	})
	require.NoError(t, err)
	return m
}

func load(t testing.TB, m fstest.MapFS) *control.Repo {
	t.Helper()
	repo, err := control.Load(m)
	require.NoError(t, err, "loading the test control repo")
	return repo
}

// renderIssues renders repo, which must fail, and returns its issues. Tests
// break a loaded repo rather than the files: control.Load validates some of
// these problems too, and Render must stand on its own.
func renderIssues(t *testing.T, repo *control.Repo) control.Issues {
	t.Helper()
	targets, err := NewRenderer(Options{}).Render(repo)
	require.Error(t, err)
	assert.Nil(t, targets, "a failed render returns no targets")
	var is control.Issues
	require.True(t, errors.As(err, &is), "render errors are control.Issues: %v", err)
	return is
}

// requireIssue asserts one issue at file mentions every needle.
func requireIssue(t *testing.T, is control.Issues, file string, needles ...string) {
	t.Helper()
	for _, i := range is {
		if i.Pos.File != file {
			continue
		}
		all := true
		for _, n := range needles {
			all = all && strings.Contains(i.String(), n)
		}
		if all {
			return
		}
	}
	t.Fatalf("no issue at %s mentioning %q in:\n%v", file, needles, is)
}

func TestRenderBadInput(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		edit    func(r *control.Repo)
		file    string
		needles []string
	}{{
		name: "remote resource",
		edit: func(r *control.Repo) {
			r.App("redis").Files["kustomization.yaml"] = []byte("resources:\n  - statefulset.yaml\n  - github.com/acme/redis//base?ref=v1\n")
		},
		file:    "catalog/redis/kustomization.yaml",
		needles: []string{"app redis", "kustomization.yaml", `"github.com/acme/redis//base?ref=v1" is remote`, "hint:"},
	}, {
		name: "https resource",
		edit: func(r *control.Repo) {
			r.App("redis").Files["kustomization.yaml"] = []byte("resources:\n  - https://example.com/redis.yaml\n")
		},
		file:    "catalog/redis/kustomization.yaml",
		needles: []string{"app redis", "is remote"},
	}, {
		name: "escape",
		edit: func(r *control.Repo) {
			r.App("redis").Files["kustomization.yaml"] = []byte("resources:\n  - statefulset.yaml\n  - ../podinfo\n")
		},
		file:    "catalog/redis/kustomization.yaml",
		needles: []string{"app redis", `"../podinfo" escapes the app directory`},
	}, {
		name: "helm",
		edit: func(r *control.Repo) {
			r.App("redis").Files["kustomization.yaml"] = []byte("helmCharts:\n  - name: redis\n    repo: https://charts.bitnami.com/bitnami\n")
		},
		file:    "catalog/redis/kustomization.yaml",
		needles: []string{"app redis", "helmCharts", "Helm"},
	}, {
		name: "exec plugin",
		edit: func(r *control.Repo) {
			r.App("redis").Files["kustomization.yaml"] = []byte("resources: [statefulset.yaml]\ntransformers: [fn.yaml]\n")
			r.App("redis").Files["fn.yaml"] = []byte("apiVersion: example.com/v1\nkind: Sneaky\nmetadata:\n  name: x\n  annotations:\n    config.kubernetes.io/function: |\n      exec: {path: /bin/sh}\n")
		},
		file:    "catalog/redis/kustomization.yaml",
		needles: []string{"app redis", "Sneaky", "not a built-in kustomize plugin"},
	}, {
		name: "missing resource file",
		edit: func(r *control.Repo) {
			delete(r.App("redis").Files, "service.yaml")
		},
		file:    "catalog/redis/kustomization.yaml",
		needles: []string{"app redis", `"service.yaml" does not exist`},
	}, {
		name: "kustomize build failure",
		edit: func(r *control.Repo) {
			r.App("redis").Files["kustomization.yaml"] = []byte("resources: [statefulset.yaml, service.yaml, service2.yaml]\n")
			r.App("redis").Files["service2.yaml"] = r.App("redis").Files["service.yaml"]
		},
		file:    "catalog/redis/kustomization.yaml",
		needles: []string{"app redis", "kustomize build failed", "Service"},
	}, {
		name: "undeclared variable",
		edit: func(r *control.Repo) {
			r.App("redis").Files["service.yaml"] = bytes.Replace(r.App("redis").Files["service.yaml"],
				[]byte("port: 6379"), []byte("port: ${typo}"), 1)
		},
		file:    "catalog/redis/service.yaml",
		needles: []string{"app redis", "${typo}", "does not declare"},
	}, {
		name: "malformed variable",
		edit: func(r *control.Repo) {
			r.App("redis").Files["service.yaml"] = bytes.Replace(r.App("redis").Files["service.yaml"],
				[]byte("port: 6379"), []byte("port: ${redis-port}"), 1)
		},
		file:    "catalog/redis/service.yaml",
		needles: []string{"app redis", "malformed", "${redis-port}"},
	}, {
		name: "namespaced app renders a ClusterRole",
		edit: func(r *control.Repo) {
			r.App("redis").Files["kustomization.yaml"] = []byte("resources: [statefulset.yaml, service.yaml, role.yaml]\n")
			r.App("redis").Files["role.yaml"] = []byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: redis-reader\nrules: []\n")
		},
		file:    "catalog/redis/role.yaml",
		needles: []string{"app redis", "ClusterRole/redis-reader", "cluster-scoped", "workspace payments"},
	}, {
		name: "namespaced app in another namespace",
		edit: func(r *control.Repo) {
			r.App("redis").Files["service.yaml"] = bytes.Replace(r.App("redis").Files["service.yaml"],
				[]byte("  name: redis\n"), []byte("  name: redis\n  namespace: kube-system\n"), 1)
		},
		file:    "catalog/redis/service.yaml",
		needles: []string{"app redis", "Service/redis", `namespace "kube-system"`, "workspace payments"},
	}, {
		name: "value breaks the YAML",
		edit: func(r *control.Repo) {
			r.Cluster("prod-us-1").Spec.Values["podinfo_replicas"] = "[3"
		},
		file:    "clusters/prod-us-1.yaml",
		needles: []string{"cluster prod-us-1", "app podinfo", "Deployment/podinfo", "does not parse"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			repo := loadExample(t)
			tc.edit(repo)
			requireIssue(t, renderIssues(t, repo), tc.file, tc.needles...)
		})
	}
}

func TestRenderReportsEveryProblem(t *testing.T) {
	t.Parallel()
	repo := loadExample(t)
	repo.App("redis").Files["kustomization.yaml"] = []byte("resources:\n  - ../x\n  - git@github.com:acme/x.git\n")
	svc := repo.App("podinfo").Files
	svc["service.yaml"] = append(svc["service.yaml"], []byte("  clusterIP: ${nope}\n")...)
	is := renderIssues(t, repo)
	requireIssue(t, is, "catalog/redis/kustomization.yaml", "escapes")
	requireIssue(t, is, "catalog/redis/kustomization.yaml", "remote")
	requireIssue(t, is, "catalog/podinfo/service.yaml", "${nope}")
	// The undeclared variable is reported once for the app, not per cluster.
	n := 0
	for _, i := range is {
		if strings.Contains(i.Message, "${nope}") {
			n++
		}
	}
	assert.Equal(t, 1, n, "one issue per app:\n%v", is)
}

func TestRenderMissingRequiredValue(t *testing.T) {
	t.Parallel()
	// Validate reports it too; Render must not write a half-substituted file.
	repo := loadExample(t)
	delete(repo.Cluster("edge-1").Spec.Values, "metallb_range")
	_, err := NewRenderer(Options{}).Render(repo)
	var is control.Issues
	require.ErrorAs(t, err, &is)
	requireIssue(t, is, "clusters/edge-1.yaml", "cluster edge-1", "app metallb", "metallb_range")
}

func TestRenderDeterministic(t *testing.T) {
	t.Parallel()
	want := tree(t, mustRender(t, NewRenderer(Options{}), loadExample(t)))

	// Same input again, on the same (warm) and a new renderer.
	r := NewRenderer(Options{})
	mustRender(t, r, loadExample(t))
	assertSameTree(t, want, tree(t, mustRender(t, r, loadExample(t))), "warm renderer")

	// The same repo with every list shuffled renders the same bytes.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5 {
		repo := loadExample(t)
		rng.Shuffle(len(repo.Clusters), func(a, b int) { repo.Clusters[a], repo.Clusters[b] = repo.Clusters[b], repo.Clusters[a] })
		rng.Shuffle(len(repo.Workspaces), func(a, b int) { repo.Workspaces[a], repo.Workspaces[b] = repo.Workspaces[b], repo.Workspaces[a] })
		rng.Shuffle(len(repo.Apps), func(a, b int) { repo.Apps[a], repo.Apps[b] = repo.Apps[b], repo.Apps[a] })
		for _, w := range repo.Workspaces {
			rng.Shuffle(len(w.Spec.Apps), func(a, b int) { w.Spec.Apps[a], w.Spec.Apps[b] = w.Spec.Apps[b], w.Spec.Apps[a] })
		}
		assertSameTree(t, want, tree(t, mustRender(t, NewRenderer(Options{}), repo)), "shuffle %d", i)
	}
}

func mustRender(t testing.TB, r *Renderer, repo *control.Repo) []*Target {
	t.Helper()
	targets, err := r.Render(repo)
	require.NoError(t, err)
	return targets
}

func assertSameTree(t *testing.T, want, got map[string][]byte, msg string, args ...any) {
	t.Helper()
	m := fmt.Sprintf(msg, args...)
	require.Equal(t, slices.Sorted(maps.Keys(want)), slices.Sorted(maps.Keys(got)), m)
	for p := range want {
		assert.Equal(t, string(want[p]), string(got[p]), "%s: %s", p, m)
	}
}

func TestRenderCache(t *testing.T) {
	t.Parallel()
	r := NewRenderer(Options{})
	mustRender(t, r, loadExample(t))
	s := r.Stats()
	assert.Equal(t, 4, s.Builds, "one build per catalog app")
	assert.Equal(t, 4, s.Cached)

	// Values and clusters change, app files do not: no build.
	m := exampleFS(t)
	m["clusters/prod-eu-1.yaml"].Data = bytes.Replace(m["clusters/prod-eu-1.yaml"].Data, []byte("10.10.0.0/24"), []byte("10.11.0.0/24"), 1)
	mustRender(t, r, load(t, m))
	assert.Equal(t, 4, r.Stats().Builds)

	// One app changes: one build, and the stale entry is evicted.
	m["catalog/redis/service.yaml"].Data = append(m["catalog/redis/service.yaml"].Data, []byte("  sessionAffinity: None\n")...)
	mustRender(t, r, load(t, m))
	s = r.Stats()
	assert.Equal(t, 5, s.Builds)
	assert.Equal(t, 4, s.Cached)
	assert.Equal(t, 3, s.Renders)
}

// TestPrebuild: the builds Prebuild runs are the ones the next Render uses (no build of its
// own, the same bytes as a cold render); a build the next Render does not use is dropped;
// a done context stops Prebuild before any build.
func TestPrebuild(t *testing.T) {
	t.Parallel()
	want := tree(t, mustRender(t, NewRenderer(Options{}), loadExample(t)))
	repo := loadExample(t)
	r := NewRenderer(Options{})
	r.Prebuild(context.Background(), repo.Apps)
	assert.Equal(t, Stats{Builds: 4, Cached: 4}, r.Stats())
	assertSameTree(t, want, tree(t, mustRender(t, r, repo)), "prebuilt")
	assert.Equal(t, Stats{Renders: 1, Builds: 4, CacheHits: 4, Cached: 4}, r.Stats())

	// A changed app prebuilt, then a render of the repo without the change: the build is dropped.
	m := exampleFS(t)
	m["catalog/redis/service.yaml"].Data = append(m["catalog/redis/service.yaml"].Data, []byte("  sessionAffinity: None\n")...)
	r.Prebuild(context.Background(), load(t, m).Apps)
	assert.Equal(t, 5, r.Stats().Cached)
	mustRender(t, r, loadExample(t))
	assert.Equal(t, 4, r.Stats().Cached)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cold := NewRenderer(Options{})
	cold.Prebuild(ctx, repo.Apps)
	assert.Zero(t, cold.Stats().Builds)
}

// TestFluxWorkspaceMemoFollowsTheRepo: a warm renderer's memo of workspace Flux objects gives
// the bytes a cold renderer computes after a change they depend on (the workspace's
// namespace), and keeps only what the last render used.
func TestFluxWorkspaceMemoFollowsTheRepo(t *testing.T) {
	t.Parallel()
	r := NewRenderer(Options{})
	mustRender(t, r, loadExample(t))
	before := len(r.fluxWorkspaces.m)
	require.Positive(t, before)

	m := exampleFS(t)
	m["workspaces/payments.yaml"].Data = bytes.Replace(m["workspaces/payments.yaml"].Data, []byte("namespace: payments"), []byte("namespace: payments-2"), 1)
	want := tree(t, mustRender(t, NewRenderer(Options{}), load(t, m)))
	assertSameTree(t, want, tree(t, mustRender(t, r, load(t, m))), "warm renderer after a namespace change")
	assert.Equal(t, before, len(r.fluxWorkspaces.m), "the entries of the old namespace are dropped")
}

func TestRenderTargets(t *testing.T) {
	t.Parallel()
	targets := mustRender(t, NewRenderer(Options{GitURL: "https://ghe.example.com/"}), loadExample(t))
	var names []string
	for _, tg := range targets {
		names = append(names, string(tg.Kind)+"/"+tg.Repo)
		for p := range tg.Files {
			assert.True(t, tg.Kind.Managed(p), "%s: %s is written as managed but Kind.Managed disagrees", tg.Repo, p)
		}
		for p := range tg.Scaffolds {
			assert.False(t, tg.Kind.Managed(p), "%s: scaffold %s must not be a managed path", tg.Repo, p)
		}
	}
	assert.Equal(t, []string{
		"cluster/cluster-edge-1", "cluster/cluster-prod-eu-1", "cluster/cluster-prod-us-1", "cluster/cluster-staging-eu-1",
		"workspace/workspace-payments", "workspace/workspace-search",
	}, names)
	assert.Contains(t, string(targets[1].Files[FluxPath]), "url: https://ghe.example.com/acme/workspace-payments\n")
	assert.NotContains(t, string(targets[0].Files[FluxPath]), "\nkind: GitRepository\n", "edge-1 has no workspace")
}

// TestFluxObjectsStrict decodes every object of every flux/fleetbot.yaml
// strictly into the Flux v1 and Kubernetes types.
func TestFluxObjectsStrict(t *testing.T) {
	t.Parallel()
	for _, tg := range mustRender(t, NewRenderer(Options{}), loadExample(t)) {
		data, ok := tg.Files[FluxPath]
		if tg.Kind != KindCluster {
			assert.False(t, ok)
			continue
		}
		require.True(t, ok, tg.Repo)
		kinds := map[string]int{}
		for _, d := range strings.Split(string(data), "\n---\n") {
			var tm struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(d), &tm))
			var obj any
			switch tm.APIVersion + " " + tm.Kind {
			case "kustomize.toolkit.fluxcd.io/v1 Kustomization":
				k := &kustomizev1.Kustomization{}
				obj = k
				require.NoError(t, yaml.UnmarshalStrict([]byte(d), obj), "%s:\n%s", tg.Repo, d)
				// Every Kustomization reconciles and prunes.
				assert.False(t, k.Spec.Suspend, k.Name)
				assert.True(t, k.Spec.Prune, k.Name)
				assert.NotZero(t, k.Spec.Interval.Duration)
				assert.Empty(t, k.Spec.SourceRef.Namespace, "no cross-namespace refs (lockdown)")
				for _, dep := range k.Spec.DependsOn {
					assert.Empty(t, dep.Namespace, "no cross-namespace dependsOn (lockdown)")
				}
				if k.Namespace != FluxNamespace {
					assert.Equal(t, "./clusters/"+tg.Name, k.Spec.Path)
					assert.Equal(t, k.Namespace, k.Spec.TargetNamespace)
					assert.NotEmpty(t, k.Spec.ServiceAccountName)
				}
			case "source.toolkit.fluxcd.io/v1 GitRepository":
				g := &sourcev1.GitRepository{}
				obj = g
				require.NoError(t, yaml.UnmarshalStrict([]byte(d), obj), "%s:\n%s", tg.Repo, d)
				assert.Equal(t, "flux-system", g.Spec.SecretRef.Name)
				assert.Equal(t, "main", g.Spec.Reference.Branch)
			case "v1 Namespace":
				obj = &corev1.Namespace{}
			case "v1 ServiceAccount":
				obj = &corev1.ServiceAccount{}
			case "rbac.authorization.k8s.io/v1 RoleBinding":
				rb := &rbacv1.RoleBinding{}
				obj = rb
				require.NoError(t, yaml.UnmarshalStrict([]byte(d), obj))
				assert.Equal(t, "admin", rb.RoleRef.Name)
				assert.Equal(t, "ClusterRole", rb.RoleRef.Kind)
			default:
				t.Fatalf("%s: unexpected object %s", tg.Repo, tm.Kind)
			}
			require.NoError(t, yaml.UnmarshalStrict([]byte(d), obj), "%s:\n%s", tg.Repo, d)
			assert.NotContains(t, d, "status:")
			assert.NotContains(t, d, "creationTimestamp")
			kinds[tm.Kind]++
		}
		c := loadExample(t).Cluster(tg.Name)
		// fleetbot-tenancy, one per component, apps.
		ks := 2 + countComponents(tg)
		if c.Spec.Workspace == "" {
			assert.Equal(t, map[string]int{"Kustomization": ks}, kinds, tg.Repo)
		} else {
			assert.Equal(t, map[string]int{"Kustomization": ks + 1, "GitRepository": 1, "Namespace": 1, "ServiceAccount": 1, "RoleBinding": 1}, kinds, tg.Repo)
		}
	}
}

func TestFluxMemoMatchesDirect(t *testing.T) {
	t.Parallel()
	x := &run{fluxWorkspace: newMemo[fluxInput](), fluxComponents: map[string][]byte{}}
	crds := component{app: "crds"}
	config := component{app: "config", dependsOn: []string{"crds"}}
	for i, tc := range []struct {
		in         fluxInput
		components []component
	}{
		{fluxInput{interval: time.Minute, cluster: "prod-eu-1", workspace: "payments", namespace: "pay", repoURL: "https://x/acme/workspace-payments", branch: "main", secretRef: "s"}, []component{config, crds}},
		{fluxInput{interval: time.Minute, cluster: "prod-us-1", workspace: "payments", namespace: "pay", repoURL: "https://x/acme/workspace-payments", branch: "main", secretRef: "s"}, []component{crds}},
		{fluxInput{interval: time.Minute, cluster: "edge-1"}, []component{config, crds}},
		{fluxInput{interval: time.Minute, cluster: "bare"}, nil},
		{fluxInput{interval: time.Minute, cluster: "Not-A-Label", workspace: "payments", namespace: "pay", branch: "main"}, []component{crds}},
	} {
		want, err := fluxObjects(tc.in, tc.components)
		require.NoError(t, err)
		got, err := x.flux(tc.in, tc.components)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "case %d: %+v", i, tc.in)
	}
}

// TestRenderConcurrent shares one Renderer between goroutines (as a service
// does between webhook jobs): calls serialise, results stay identical.
func TestRenderConcurrent(t *testing.T) {
	t.Parallel()
	r := NewRenderer(Options{})
	want := tree(t, mustRender(t, NewRenderer(Options{}), loadExample(t)))
	done := make(chan []*Target)
	for range 4 {
		repo := loadExample(t)
		go func() {
			targets, _ := r.Render(repo)
			done <- targets
		}()
	}
	for range 4 {
		got := <-done
		require.NotNil(t, got, "render failed")
		assertSameTree(t, want, tree(t, got), "concurrent render")
	}
	assert.Equal(t, 4, r.Stats().Builds, "later renders hit the cache")
}

func TestRenderUnusedBrokenApp(t *testing.T) {
	t.Parallel()
	// A catalog app nobody deploys yet must still build: it fails in the PR
	// that adds it, not in the one that first deploys it.
	repo := loadExample(t)
	repo.Apps = append(repo.Apps, &control.App{
		Metadata: control.Meta{Name: "broken"}, Dir: "catalog/broken",
		Spec:  control.AppSpec{Scope: control.ScopeNamespaced},
		Files: map[string][]byte{"kustomization.yaml": []byte("resources: [gone.yaml]\n")},
	})
	requireIssue(t, renderIssues(t, repo), "catalog/broken/kustomization.yaml", "app broken", `"gone.yaml" does not exist`)
}

// flux.secretRef: "" renders workspace GitRepositories without a secret
// (public repos, an unauthenticated git server), and the cluster README says
// so instead of asking for a Secret; absent, it is flux-system.
func TestFluxSecretRefOptional(t *testing.T) {
	t.Parallel()
	m := exampleFS(t)
	platform := string(m["platform.yaml"].Data)
	require.Contains(t, platform, "    secretRef: flux-system\n")
	m["platform.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(platform, "    secretRef: flux-system\n", "    secretRef: \"\"\n", 1))}
	for _, tg := range mustRender(t, NewRenderer(Options{}), load(t, m)) {
		if tg.Kind != KindCluster || tg.Name != "prod-eu-1" {
			continue
		}
		flux := string(tg.Files[FluxPath])
		assert.Contains(t, flux, "kind: GitRepository")
		assert.NotContains(t, flux, "secretRef", "no secret for the workspace GitRepository")
		readme := string(tg.Files[ReadmePath])
		assert.Contains(t, readme, "without credentials")
		assert.NotContains(t, readme, "flux create secret git")
		return
	}
	t.Fatal("no cluster-prod-eu-1 target")
}

// TestRenderPointsAtTheDefiningNode: render errors take file:line from the
// parsed node: a Service in another namespace is reported at its own `kind:`
// line, not at a ServiceAccount of the same name before it, nor at a file
// whose Service merely has a longer name; an undeclared value is reported at
// the scalar using it, not at a comment or an escaped $${...} before it.
func TestRenderPointsAtTheDefiningNode(t *testing.T) {
	t.Parallel()
	repo := loadExample(t)
	files := repo.App("redis").Files
	files["kustomization.yaml"] = []byte("resources: [statefulset.yaml, service.yaml, a-internal.yaml, web.yaml, config.yaml]\n")
	files["a-internal.yaml"] = []byte("apiVersion: v1\nkind: Service\nmetadata:\n  name: web-internal\nspec:\n  ports: [{port: 80}]\n")
	files["web.yaml"] = []byte("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: web\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: kube-system\nspec:\n  ports: [{port: 80}]\n")
	files["config.yaml"] = []byte("# ${typo} in a comment substitutes nothing\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata:\n  escaped: $${typo}\n  script: |\n    one\n    two ${typo}\n")
	is := renderIssues(t, repo)
	var svc, ref []control.Issue
	for _, i := range is {
		if strings.Contains(i.Message, "Service/web") {
			svc = append(svc, i)
		}
		if strings.Contains(i.Message, "${typo}") {
			ref = append(ref, i)
		}
	}
	require.Len(t, ref, 1, "%v", is)
	assert.Equal(t, control.Position{File: "catalog/redis/config.yaml", Line: 10}, ref[0].Pos, "%v", ref[0])
	require.NotEmpty(t, svc, "%v", is)
	for _, i := range svc {
		assert.Equal(t, control.Position{File: "catalog/redis/web.yaml", Line: 7}, i.Pos, "%v", i)
	}
}

// countComponents counts the component directories of a cluster target.
func countComponents(tg *Target) int {
	n := 0
	for p := range tg.Files {
		dir, file := path.Split(p)
		if file == "kustomization.yaml" && strings.Count(dir, "/") == 2 && strings.HasPrefix(dir, PlatformDir+"/") && dir != PlatformDir+"/"+TenancyDir+"/" {
			n++
		}
	}
	return n
}
