package control

import (
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/fleetgen"
)

func TestSelectorMatches(t *testing.T) {
	prod := map[string]string{"env": "prod", "region": "eu", "network": "metal"}
	dev := map[string]string{"env": "dev", "region": "us"}
	req := func(key, op string, values ...string) Requirement {
		return Requirement{Key: key, Operator: op, Values: values}
	}
	tests := []struct {
		name      string
		sel       *Selector
		prod, dev bool
	}{
		{name: "nil selects none", sel: nil},
		{name: "empty selects all", sel: &Selector{}, prod: true, dev: true},
		{name: "matchLabels", sel: &Selector{MatchLabels: map[string]string{"env": "prod"}}, prod: true},
		{name: "matchLabels all must match", sel: &Selector{MatchLabels: map[string]string{"env": "prod", "region": "us"}}},
		{name: "In", sel: &Selector{MatchExpressions: []Requirement{req("region", "In", "us", "ap")}}, dev: true},
		{name: "NotIn", sel: &Selector{MatchExpressions: []Requirement{req("region", "NotIn", "us")}}, prod: true},
		{name: "NotIn matches a missing label", sel: &Selector{MatchExpressions: []Requirement{req("network", "NotIn", "metal")}}, dev: true},
		{name: "Exists", sel: &Selector{MatchExpressions: []Requirement{req("network", "Exists")}}, prod: true},
		{name: "DoesNotExist", sel: &Selector{MatchExpressions: []Requirement{req("network", "DoesNotExist")}}, dev: true},
		{
			name: "labels and expressions are ANDed",
			sel:  &Selector{MatchLabels: map[string]string{"env": "prod"}, MatchExpressions: []Requirement{req("region", "In", "us")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.sel.Matches(prod)
			require.NoError(t, err, tt.name)
			assert.Equal(t, tt.prod, got, "%s on prod", tt.name)
			got, err = tt.sel.Matches(dev)
			require.NoError(t, err, tt.name)
			assert.Equal(t, tt.dev, got, "%s on dev", tt.name)
		})
	}

	for _, bad := range []*Selector{
		{MatchExpressions: []Requirement{req("env", "Equals", "prod")}},
		{MatchExpressions: []Requirement{req("env", "In")}},
		{MatchExpressions: []Requirement{req("env", "Exists", "x")}},
		{MatchLabels: map[string]string{"bad key": "x"}},
	} {
		_, err := bad.Matches(prod)
		assert.Error(t, err, "invalid selector %+v", bad)
	}
}

func TestDeployments(t *testing.T) {
	repo, err := LoadDir(validDir)
	require.NoError(t, err)

	type row struct {
		cluster, app, workspace string
		values                  map[string]string
		source                  string
	}
	var got []row
	for _, d := range repo.Deployments() {
		ws := ""
		if d.Workspace != nil {
			ws = d.Workspace.Metadata.Name
		}
		got = append(got, row{d.Cluster.Metadata.Name, d.App.Metadata.Name, ws, d.Values, d.Source.String()})
	}
	assert.Equal(t, []row{
		// dev-us-1: monitoring (every cluster), no metallb (no network label).
		{"dev-us-1", "monitoring", "", map[string]string{}, "platform.yaml:10"},
		// podinfo: app default 1 < workspace entry 2; color from the default.
		{"dev-us-1", "podinfo", "payments", map[string]string{"podinfo_replicas": "2", "podinfo_color": "blue"}, "workspaces/payments.yaml:7"},
		// prod-eu-1: platform components first, by app name.
		{"prod-eu-1", "metallb", "", map[string]string{"metallb_range": "10.10.0.0/24", "metallb_speaker_tolerations": "false"}, "platform.yaml:12"},
		{"prod-eu-1", "monitoring", "", map[string]string{}, "platform.yaml:10"},
		// The cluster value 3 beats the entry's 2.
		{"prod-eu-1", "podinfo", "payments", map[string]string{"podinfo_replicas": "3", "podinfo_color": "blue"}, "workspaces/payments.yaml:7"},
	}, got)
}

// TestDeployerListsDeployments: cluster by cluster, a Deployer's components then workspace
// apps are exactly Deployments, in its order, with the same values.
func TestDeployerListsDeployments(t *testing.T) {
	t.Parallel()
	for _, files := range []fs.FS{os.DirFS(validDir), fleetgen.Generate(fleetgen.Options{Clusters: 30, Workspaces: 3, Apps: 8, Seed: 5})} {
		repo, err := Load(files)
		require.NoError(t, err)
		dp := repo.Deployer()
		var got []Deployment
		for _, c := range repo.Clusters {
			comps := dp.Components(c)
			for _, d := range comps {
				assert.Nil(t, d.Workspace, "a component has no workspace")
			}
			apps := dp.WorkspaceApps(c)
			for _, d := range apps {
				assert.NotNil(t, d.Workspace, "a workspace app has its workspace")
			}
			got = append(append(got, comps...), apps...)
		}
		assert.Equal(t, repo.Deployments(), got)
	}
}

func TestValuePrecedence(t *testing.T) {
	def := func(s string) *string { return &s }
	app := &App{Spec: AppSpec{Values: map[string]ValueSpec{
		"a": {Default: def("app")},
		"b": {Default: def("app")},
		"c": {Default: def("app")},
		"d": {Required: true},
	}}}
	got := mergeValues(app, Values{"b": "entry", "c": "entry", "x": "entry"}, Values{"c": "cluster", "y": "cluster"})
	assert.Equal(t, map[string]string{"a": "app", "b": "entry", "c": "cluster"}, got,
		"default < entry < cluster; undeclared names dropped; unset required absent")
}

func TestRepoNames(t *testing.T) {
	r := &Repo{}
	assert.Equal(t, "cluster-x", r.ClusterRepo("x"), "defaults without a platform")
	assert.Equal(t, "workspace-x", r.WorkspaceRepo("x"))
	r.Platform = &Platform{Spec: PlatformSpec{Repos: RepoSpec{Cluster: "{name}.k8s", Workspace: "team-{name}"}}}
	assert.Equal(t, "x.k8s", r.ClusterRepo("x"))
	assert.Equal(t, "team-x", r.WorkspaceRepo("x"))
}

func TestReferences(t *testing.T) {
	got := References([]byte("a: ${one}\nb: $${escaped} ${two}x${two}\nc: ${not valid} ${3x} ${unclosed\nd: $$$${esc2} $$$${three}\n"))
	assert.Equal(t, []Reference{{"one", 1}, {"two", 2}, {"two", 2}}, got)
}

// TestReferencesFromNodes: lines come from the parsed node, a comment holds
// no reference, and a literal block scalar gives the line of its text line.
func TestReferencesFromNodes(t *testing.T) {
	got := References([]byte("# ${commented}\na: 1\nscript: |\n  one\n  two ${two}\nb: >\n  folded\n  ${three}\n---\nc: ${four}\n"))
	assert.Equal(t, []Reference{{"two", 5}, {"three", 6}, {"four", 10}}, got)
	// Text that does not parse is lexed as text: kustomize reports its syntax.
	assert.Equal(t, []Reference{{"x", 2}}, References([]byte("a: [\n${x}\n")))
}

// TestWorkspaceAppsByName: a cluster's workspace apps come by app name whatever order the
// workspace lists them in, for every cluster of the workspace (the order is computed once per
// workspace).
func TestWorkspaceAppsByName(t *testing.T) {
	t.Parallel()
	repo, err := Load(fleetgen.Generate(fleetgen.Options{Clusters: 30, Workspaces: 3, Apps: 8, Seed: 5}))
	require.NoError(t, err)
	for _, w := range repo.Workspaces {
		slices.Reverse(w.Spec.Apps)
	}
	dp := repo.Deployer()
	seen := 0
	for _, c := range repo.Clusters {
		apps := dp.WorkspaceApps(c)
		assert.True(t, slices.IsSortedFunc(apps, func(a, b Deployment) int { return strings.Compare(a.App.Metadata.Name, b.App.Metadata.Name) }),
			"cluster %s", c.Metadata.Name)
		for _, d := range apps {
			assert.Same(t, c, d.Cluster)
		}
		seen += len(apps)
	}
	assert.NotZero(t, seen, "the generated fleet has workspace apps")
}
