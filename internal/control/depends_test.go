package control

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// appYAML is a cluster-scoped catalog app with spec.dependsOn on line 6.
func appYAML(name string, deps ...string) string {
	return "apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata: {name: " + name + "}\nspec:\n  scope: cluster\n  dependsOn:\n" +
		func() string {
			var b strings.Builder
			for _, d := range deps {
				b.WriteString("    - " + d + "\n")
			}
			return b.String()
		}()
}

const metallbValues = "  values:\n    metallb_range: {required: true}\n    metallb_speaker_tolerations: {default: \"true\"}\n"

func TestDependsOnBadInput(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []want
	}{
		{
			name:  "unknown app",
			files: map[string]string{"catalog/monitoring/app.yaml": appYAML("monitoring", "prometheus-crds")},
			want: []want{{pos: "catalog/monitoring/app.yaml:7", msg: `app monitoring depends on unknown app "prometheus-crds"`,
				hint: "add catalog/prometheus-crds/app.yaml or use one of: metallb, monitoring, podinfo"}},
		},
		{
			name:  "itself",
			files: map[string]string{"catalog/monitoring/app.yaml": appYAML("monitoring", "monitoring")},
			want:  []want{{pos: "catalog/monitoring/app.yaml:7", msg: "app monitoring depends on itself", hint: "remove it"}},
		},
		{
			name: "twice",
			files: map[string]string{
				"catalog/metallb/app.yaml": appYAML("metallb", "monitoring", "monitoring") + metallbValues,
			},
			want: []want{{pos: "catalog/metallb/app.yaml:8", msg: `lists dependency "monitoring" twice (first at catalog/metallb/app.yaml:7)`}},
		},
		{
			name: "cycle",
			files: map[string]string{
				"catalog/metallb/app.yaml":    appYAML("metallb", "monitoring") + metallbValues,
				"catalog/monitoring/app.yaml": appYAML("monitoring", "metallb"),
			},
			want: []want{{pos: "catalog/metallb/app.yaml:7", msg: "dependsOn cycle: metallb -> monitoring -> metallb", hint: "remove one of these dependsOn entries"}},
		},
		{
			name: "dependency not selected where the dependent is",
			// monitoring runs on every cluster, metallb only on network=metal
			// clusters: dev-us-1 would have platform-monitoring wait forever.
			files: map[string]string{"catalog/monitoring/app.yaml": appYAML("monitoring", "metallb")},
			want: []want{{pos: "catalog/monitoring/app.yaml:7",
				msg:  "component monitoring depends on metallb, which is not a component of cluster(s) dev-us-1: Flux would wait forever for Kustomization platform-metallb there",
				hint: "select metallb on these clusters too (spec.components in platform.yaml), narrow monitoring's clusterSelector (platform.yaml:11)"}},
		},
		{
			name: "dependency that is no component at all",
			files: map[string]string{
				"catalog/monitoring/app.yaml": appYAML("monitoring", "podinfo"),
			},
			want: []want{{pos: "catalog/monitoring/app.yaml:7",
				msg:  "component monitoring depends on podinfo, which is not a component of cluster(s) dev-us-1, prod-eu-1",
				hint: "add podinfo to spec.components in platform.yaml"}},
		},
		{
			name: "component name too long for its Kustomization",
			files: map[string]string{
				"catalog/" + strings.Repeat("m", 55) + "/app.yaml":           appYAML(strings.Repeat("m", 55)),
				"catalog/" + strings.Repeat("m", 55) + "/kustomization.yaml": "resources: []\n",
				"platform.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  components:\n    - app: " + strings.Repeat("m", 55) + "\n      clusterSelector: {}\n",
			},
			want: []want{{pos: "platform.yaml:8", msg: "name is 55 characters long; its Flux Kustomization platform-" + strings.Repeat("m", 55) + " would exceed the 63 characters", hint: "at most 54 characters"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := loadIssues(t, fixture(t, tc.files), tc.name)
			for _, w := range tc.want {
				assertIssue(t, is, tc.name, w)
			}
		})
	}
}

func TestDependsOnValid(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{
		// monitoring everywhere, metallb after it where metallb runs.
		"catalog/metallb/app.yaml": appYAML("metallb", "monitoring") + metallbValues,
	}))
	require.NoError(t, err)
	assert.Equal(t, []string{"monitoring"}, repo.App("metallb").Spec.DependsOn)
	assert.Equal(t, []string{"monitoring"}, repo.DependencyClosure("metallb"))
	assert.Empty(t, repo.DependencyClosure("monitoring"))
}

func TestDependencyClosureIsTransitive(t *testing.T) {
	r := &Repo{Apps: []*App{
		{Metadata: Meta{Name: "a"}, Spec: AppSpec{DependsOn: []string{"b"}}},
		{Metadata: Meta{Name: "b"}, Spec: AppSpec{DependsOn: []string{"c", "gone"}}},
		{Metadata: Meta{Name: "c"}, Spec: AppSpec{DependsOn: []string{"a"}}}, // a cycle ends the walk
	}}
	assert.Equal(t, []string{"b", "c"}, r.DependencyClosure("a"))
}
