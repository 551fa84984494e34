package fanout

import (
	"path"
	"strings"
	"testing"
	"testing/fstest"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// fluxKustomizations decodes the Kustomizations of a cluster's
// flux/fleetbot.yaml, strictly, in file order.
func fluxKustomizations(t *testing.T, tg *Target) []*kustomizev1.Kustomization {
	t.Helper()
	var out []*kustomizev1.Kustomization
	for _, d := range strings.Split(string(tg.Files[FluxPath]), "\n---\n") {
		var tm struct{ Kind string }
		require.NoError(t, yaml.Unmarshal([]byte(d), &tm))
		if tm.Kind != kustomizev1.KustomizationKind {
			continue
		}
		k := &kustomizev1.Kustomization{}
		require.NoError(t, yaml.UnmarshalStrict([]byte(d), k), d)
		out = append(out, k)
	}
	return out
}

// withDependsOn is the example control repo where metallb declares that it
// is applied after monitoring (which every cluster runs).
func withDependsOn(t *testing.T) fstest.MapFS {
	m := exampleFS(t)
	app := string(m["catalog/metallb/app.yaml"].Data)
	m["catalog/metallb/app.yaml"] = &fstest.MapFile{Data: []byte(strings.Replace(app, "  scope: cluster\n", "  scope: cluster\n  dependsOn: [monitoring]\n", 1))}
	return m
}

func TestComponentKustomizations(t *testing.T) {
	t.Parallel()
	targets := mustRender(t, NewRenderer(Options{}), load(t, withDependsOn(t)))
	byName := map[string]*Target{}
	for _, tg := range targets {
		byName[tg.Repo] = tg
	}
	tg := byName["cluster-prod-eu-1"]
	require.NotNil(t, tg)

	var names []string
	ks := map[string]*kustomizev1.Kustomization{}
	for _, k := range fluxKustomizations(t, tg) {
		if k.Namespace == FluxNamespace {
			names = append(names, k.Name)
			ks[k.Name] = k
		}
	}
	assert.Equal(t, []string{"fleetbot-tenancy", "platform-metallb", "platform-monitoring", "apps"}, names)

	for _, app := range []string{"metallb", "monitoring"} {
		k := ks["platform-"+app]
		assert.Equal(t, "./platform/"+app, k.Spec.Path)
		assert.True(t, k.Spec.Prune)
		assert.False(t, k.Spec.Suspend)
		assert.Equal(t, fluxControllerAccount, k.Spec.ServiceAccountName)
		assert.Equal(t, FluxBootstrapSource, k.Spec.SourceRef.Name)
		assert.Equal(t, "# Managed by fleetbot. Do not edit: changes are overwritten.\napiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- "+app+".yaml\n",
			string(tg.Files["platform/"+app+"/kustomization.yaml"]))
		assert.NotEmpty(t, tg.Files["platform/"+app+"/"+app+".yaml"])
	}
	assert.Equal(t, []kustomizev1.DependencyReference{{Name: "platform-monitoring"}}, ks["platform-metallb"].Spec.DependsOn)
	assert.Empty(t, ks["platform-monitoring"].Spec.DependsOn)
	assert.Empty(t, ks["apps"].Spec.DependsOn, "apps waits for no component")
	assert.Equal(t, "./platform/"+TenancyDir, ks["fleetbot-tenancy"].Spec.Path)
	assert.Empty(t, ks["fleetbot-tenancy"].Spec.DependsOn)

	// The workspace Kustomization waits for nothing either.
	for _, k := range fluxKustomizations(t, tg) {
		if k.Namespace != FluxNamespace {
			assert.Empty(t, k.Spec.DependsOn, k.Name)
		}
	}
	assert.Contains(t, string(tg.Files[ReadmePath]), "| metallb | `platform/metallb/` | `platform-metallb` | `platform-monitoring` |")

	// staging-eu-1 has no metallb: no Kustomization, no directory.
	staging := byName["cluster-staging-eu-1"]
	for _, k := range fluxKustomizations(t, staging) {
		assert.NotEqual(t, "platform-metallb", k.Name)
	}
	for p := range staging.Files {
		assert.False(t, strings.HasPrefix(p, "platform/metallb/"), p)
	}
}

// TestPlatformDirs: platform/ holds one directory per component, each with its
// kustomization.yaml and its Kustomization platform-<app>, and nothing else.
func TestPlatformDirs(t *testing.T) {
	t.Parallel()
	for _, tg := range mustRender(t, NewRenderer(Options{}), load(t, withDependsOn(t))) {
		if tg.Kind != KindCluster {
			continue
		}
		paths := map[string]bool{}
		for _, k := range fluxKustomizations(t, tg) {
			if k.Namespace == FluxNamespace && !k.Spec.Suspend && k.Name != "apps" {
				paths[strings.TrimPrefix(k.Spec.Path, "./")] = true
			}
		}
		dirs := map[string]bool{}
		for p := range tg.Files {
			if !strings.HasPrefix(p, PlatformDir+"/") {
				continue
			}
			dir, file := path.Split(p)
			dir = strings.TrimSuffix(dir, "/")
			require.NotEqual(t, PlatformDir, dir, "%s: %s: platform/ itself holds nothing but directories", tg.Repo, p)
			require.Equal(t, PlatformDir, path.Dir(dir), "%s: %s: one level of directories", tg.Repo, p)
			if file == "kustomization.yaml" {
				dirs[dir] = true
			}
		}
		for p := range tg.Files {
			if strings.HasPrefix(p, PlatformDir+"/") {
				assert.True(t, dirs[path.Dir(p)], "%s: %s is in a directory without kustomization.yaml", tg.Repo, p)
			}
		}
		assert.Equal(t, paths, dirs, "%s: every platform directory has its Kustomization and the reverse", tg.Repo)
	}
}

// TestRenderDependencyNotSelected: Render refuses, on its own, a dependsOn
// on an app that is no component of the cluster (control.Load reports it
// first; Render must not write a Kustomization waiting forever).
func TestRenderDependencyNotSelected(t *testing.T) {
	t.Parallel()
	repo := load(t, withDependsOn(t))
	repo.App("metallb").Spec.DependsOn = []string{"podinfo"}
	is := renderIssues(t, repo)
	requireIssue(t, is, "catalog/metallb/app.yaml", "component metallb depends on podinfo, which is not a component of cluster", "Kustomization platform-podinfo")
}
