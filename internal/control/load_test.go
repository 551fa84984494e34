package control

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const validDir = "testdata/valid"

// fixture returns the valid control repo as a MapFS with files replaced
// (or, for an empty content, deleted).
func fixture(t *testing.T, files map[string]string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	err := fs.WalkDir(os.DirFS(validDir), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(os.DirFS(validDir), p)
		m[p] = &fstest.MapFile{Data: b}
		return err
	})
	require.NoError(t, err)
	for p, content := range files {
		if content == "" {
			delete(m, p)
			continue
		}
		m[p] = &fstest.MapFile{Data: []byte(content)}
	}
	return m
}

// loadIssues loads fsys and returns its issues, failing when it loads.
func loadIssues(t *testing.T, fsys fs.FS, name string) Issues {
	t.Helper()
	repo, err := Load(fsys)
	require.Error(t, err, "%s: expected Load to fail", name)
	require.Nil(t, repo, "%s: no repo on error", name)
	var is Issues
	require.True(t, errors.As(err, &is), "%s: error is %T, want Issues: %v", name, err, err)
	require.False(t, errors.Is(err, ErrUnreadable), "%s: invalid is not unreadable", name)
	return is
}

// want is an expected issue: its position and fragments of its message and
// hint.
type want struct {
	pos  string
	msg  string
	hint string
}

func assertIssue(t *testing.T, is Issues, name string, w want) {
	t.Helper()
	for _, i := range is {
		if i.Pos.String() == w.pos && strings.Contains(i.Message, w.msg) && strings.Contains(i.Hint, w.hint) {
			return
		}
	}
	assert.Failf(t, "missing issue", "%s: no issue at %s with message containing %q and hint containing %q; got:\n%v",
		name, w.pos, w.msg, w.hint, is.Error())
}

const cluster = `apiVersion: fleetbot.io/v1alpha1
kind: Cluster
metadata:
  name: %s
spec:
  workspace: payments
`

func TestLoadBadInput(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []want
	}{
		{
			name: "unknown field",
			files: map[string]string{"clusters/dev-us-1.yml": `apiVersion: fleetbot.io/v1alpha1
kind: Cluster
metadata:
  name: dev-us-1
spec:
  workspce: payments
`},
			want: []want{{pos: "clusters/dev-us-1.yml:6", msg: `unknown field "workspce" in spec`, hint: `did you mean "workspace"?`}},
		},
		{
			name:  "unknown top-level field",
			files: map[string]string{"workspaces/payments.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: payments}\nspecs: {}\n"},
			want:  []want{{pos: "workspaces/payments.yaml:4", msg: `unknown field "specs" at the top level`, hint: `did you mean "spec"?`}},
		},
		{
			name:  "unknown field in values declaration",
			files: map[string]string{"catalog/podinfo/app.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata: {name: podinfo}\nspec:\n  scope: namespaced\n  values:\n    podinfo_replicas: {defualt: 1}\n    podinfo_color: {}\n"},
			want:  []want{{pos: "catalog/podinfo/app.yaml:7", msg: `unknown field "defualt" in spec.values.podinfo_replicas`, hint: `did you mean "default"?`}},
		},
		{
			name:  "wrong type",
			files: map[string]string{"platform.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: platform\n"},
			want:  []want{{pos: "platform.yaml:6", msg: "spec.admins: expected a list of strings, got a string"}},
		},
		{
			name:  "YAML syntax error",
			files: map[string]string{"clusters/dev-us-1.yml": "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: dev-us-1\n spec: [\n"},
			want:  []want{{pos: "clusters/dev-us-1.yml:4", msg: "YAML syntax error: did not find expected key"}},
		},
		{
			name:  "missing platform.yaml",
			files: map[string]string{"platform.yaml": ""},
			want:  []want{{pos: "platform.yaml", msg: "platform.yaml is missing", hint: "create platform.yaml"}},
		},
		{
			name:  "platform.yml instead of platform.yaml",
			files: map[string]string{"platform.yaml": "", "platform.yml": "kind: Platform\n"},
			want:  []want{{pos: "platform.yaml", msg: "platform.yaml is missing", hint: "rename platform.yml to platform.yaml"}},
		},
		{
			name:  "two platforms",
			files: map[string]string{"clusters/other.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: other}\nspec: {owner: acme, admins: [x]}\n"},
			want:  []want{{pos: "clusters/other.yaml:2", msg: "a second Platform", hint: "platform.yaml:1"}},
		},
		{
			name:  "two documents",
			files: map[string]string{"platform.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec: {owner: acme, admins: [platform]}\n---\napiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme2}\n"},
			want:  []want{{pos: "platform.yaml:5", msg: "more than one YAML document", hint: "one object per file"}},
		},
		{
			name:  "workspace in clusters/",
			files: map[string]string{"clusters/ws.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: ws}\n"},
			want:  []want{{pos: "clusters/ws.yaml:2", msg: "a Workspace does not belong in clusters/", hint: "workspaces/<name>.yaml"}},
		},
		{
			name:  "unknown kind and apiVersion",
			files: map[string]string{"clusters/dev-us-1.yml": "apiVersion: fleetbot.io/v1\nkind: Cluser\nmetadata: {name: dev-us-1}\n"},
			want: []want{
				{pos: "clusters/dev-us-1.yml:1", msg: `apiVersion "fleetbot.io/v1" is not supported`, hint: "fleetbot.io/v1alpha1"},
				{pos: "clusters/dev-us-1.yml:2", msg: `kind "Cluser" where a Cluster is expected`},
			},
		},
		{
			name:  "duplicate names",
			files: map[string]string{"clusters/a-copy.yaml": strings.Replace(cluster, "%s", "dev-us-1", 1)},
			want:  []want{{pos: "clusters/dev-us-1.yml:4", msg: `duplicate cluster name "dev-us-1" (first defined at clusters/a-copy.yaml:4)`}},
		},
		{
			name: "invalid names",
			files: map[string]string{
				"clusters/dev-us-1.yml":    strings.Replace(cluster, "%s", "Dev_US", 1),
				"workspaces/payments.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {}\n",
			},
			want: []want{
				{pos: "clusters/dev-us-1.yml:4", msg: `invalid name "Dev_US"`, hint: "lowercase"},
				{pos: "workspaces/payments.yaml:3", msg: "metadata.name is required"},
			},
		},
		{
			name: "unknown references",
			files: map[string]string{
				"clusters/dev-us-1.yml":    strings.Replace(strings.Replace(cluster, "%s", "dev-us-1", 1), "payments", "payment", 1),
				"workspaces/payments.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: payments}\nspec:\n  apps:\n    - app: podinfo\n    - app: grafana\n",
				"platform.yaml":            "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  components:\n    - app: monitoring\n      clusterSelector: {}\n    - app: loki\n",
			},
			want: []want{
				{pos: "clusters/dev-us-1.yml:6", msg: `unknown workspace "payment"`, hint: "payments"},
				{pos: "workspaces/payments.yaml:7", msg: `unknown app "grafana"`, hint: "metallb, monitoring, podinfo"},
				{pos: "platform.yaml:10", msg: `unknown app "loki"`, hint: "catalog/loki/app.yaml"},
			},
		},
		{
			name:  "app listed twice",
			files: map[string]string{"workspaces/payments.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: payments}\nspec:\n  apps:\n    - app: podinfo\n    - app: podinfo\n"},
			want:  []want{{pos: "workspaces/payments.yaml:7", msg: `app "podinfo" is listed twice in the workspace's apps (first at workspaces/payments.yaml:6)`}},
		},
		{
			name:  "cluster-scoped app used by a workspace",
			files: map[string]string{"workspaces/payments.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: payments}\nspec:\n  apps:\n    - app: podinfo\n    - app: monitoring\n"},
			want:  []want{{pos: "workspaces/payments.yaml:7", msg: "cluster-scoped app monitoring can only be a platform component", hint: "platform component"}},
		},
		{
			name: "undeclared values",
			files: map[string]string{
				"workspaces/payments.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: payments}\nspec:\n  apps:\n    - app: podinfo\n      values:\n        podinfo_replica: 2\n",
				"clusters/dev-us-1.yml":    "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: dev-us-1}\nspec:\n  workspace: payments\n  values:\n    podinfo_colour: red\n",
			},
			want: []want{
				{pos: "workspaces/payments.yaml:8", msg: "app podinfo declares no value podinfo_replica; declared: podinfo_color, podinfo_replicas", hint: `did you mean "podinfo_replicas"?`},
				{pos: "clusters/dev-us-1.yml:7", msg: "no app deployed to cluster dev-us-1 declares value podinfo_colour", hint: `did you mean "podinfo_color"?`},
			},
		},
		{
			name:  "cluster value of an app not deployed there",
			files: map[string]string{"clusters/dev-us-1.yml": "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: dev-us-1}\nspec:\n  values:\n    metallb_range: 10.0.0.0/24\n"},
			want: []want{
				{pos: "clusters/dev-us-1.yml:6", msg: "no app deployed to cluster dev-us-1 declares value metallb_range", hint: "declared by app metallb (not deployed to dev-us-1)"},
			},
		},
		{
			name:  "invalid value name",
			files: map[string]string{"catalog/podinfo/app.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata: {name: podinfo}\nspec:\n  scope: namespaced\n  values:\n    podinfo-replicas: {default: 1}\n    podinfo_replicas: {required: true, default: 1}\n"},
			want: []want{
				{pos: "catalog/podinfo/app.yaml:7", msg: `invalid value name "podinfo-replicas"`},
				{pos: "catalog/podinfo/app.yaml:8", msg: "value podinfo_replicas is required and has a default"},
			},
		},
		{
			name:  "missing required value",
			files: map[string]string{"clusters/prod-eu-1.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: prod-eu-1\n  labels: {network: metal}\n"},
			want:  []want{{pos: "clusters/prod-eu-1.yaml:4", msg: "cluster prod-eu-1: app metallb requires value metallb_range, which is not set", hint: "metallb_range: \"...\""}},
		},
		{
			name:  "bad selector operator",
			files: map[string]string{"platform.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  components:\n    - app: monitoring\n      clusterSelector:\n        matchExpressions:\n          - key: env\n            operator: Equals\n            values: [prod]\n          - {key: env, operator: Exists, values: [prod]}\n          - {key: env, operator: In}\n        matchLabels: {\"bad key!\": x}\n"},
			want: []want{
				{pos: "platform.yaml:12", msg: `operator: "Equals" not a valid selector operator`, hint: "In and NotIn"},
				{pos: "platform.yaml:14", msg: "values: Forbidden"},
				{pos: "platform.yaml:15", msg: "values: Required"},
				{pos: "platform.yaml:16", msg: `invalid label key "bad key!"`},
			},
		},
		{
			name:  "bad cluster labels",
			files: map[string]string{"clusters/dev-us-1.yml": "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: dev-us-1\n  labels:\n    env: not ok\n"},
			want:  []want{{pos: "clusters/dev-us-1.yml:6", msg: `invalid value "not ok" of label "env"`}},
		},
		{
			name:  "bad repo patterns",
			files: map[string]string{"platform.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  repos:\n    cluster: clusters\n    workspace: \"ws/{name}\"\n"},
			want: []want{
				{pos: "platform.yaml:8", msg: `repo name pattern "clusters" does not contain {name}`},
				{pos: "platform.yaml:9", msg: `repo name pattern "ws/{name}" contains characters`},
			},
		},
		{
			name: "two targets with one repo name",
			files: map[string]string{
				"platform.yaml":        "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  repos: {cluster: \"{name}\", workspace: \"{name}\"}\n",
				"clusters/pay.yaml":    "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: payments}\n",
				"catalog/metallb/x.md": "x",
			},
			want: []want{{pos: "workspaces/payments.yaml:3", msg: "workspace payments and cluster payments (clusters/pay.yaml:3) both map to repo acme/payments"}},
		},
		{
			name:  "repo name too long",
			files: map[string]string{"clusters/dev-us-1.yml": strings.Replace(cluster, "%s", strings.Repeat("a", 63), 1), "platform.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  repos: {cluster: \"a-very-long-prefix-for-cluster-repositories-{name}\"}\n"},
			want:  []want{{pos: "clusters/dev-us-1.yml:4", msg: "is longer than 100 characters", hint: "spec.repos.cluster in platform.yaml:7"}},
		},
		{
			name:  "bad platform settings",
			files: map[string]string{"platform.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: -acme\n  admins: [Platform Team]\n  repos: {visibility: secret}\n  pullRequests: {merge: squash, branch: \"bad..branch\"}\n  flux: {interval: 10 minutes, secretRef: Flux_Secret}\n  access: {mode: strict, maxAccessRemovals: -1}\n  maxRemovals: \"10\"\n"},
			want: []want{
				{pos: "platform.yaml:5", msg: `invalid GitHub owner "-acme"`},
				{pos: "platform.yaml:6", msg: `invalid team slug "Platform Team"`},
				{pos: "platform.yaml:7", msg: `invalid visibility "secret"`},
				{pos: "platform.yaml:8", msg: `invalid merge mode "squash"`},
				{pos: "platform.yaml:8", msg: `invalid branch name "bad..branch"`},
				{pos: "platform.yaml:9", msg: `invalid flux interval "10 minutes"`},
				{pos: "platform.yaml:9", msg: `invalid flux secretRef "Flux_Secret"`},
				{pos: "platform.yaml:10", msg: `invalid access mode "strict"`},
				{pos: "platform.yaml:10", msg: "spec.access.maxAccessRemovals must not be negative"},
				{pos: "platform.yaml:11", msg: `invalid spec.maxRemovals "10"`, hint: `"10%"`},
			},
		},
		{
			name:  "bad branch rules",
			files: map[string]string{"platform.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  access:\n    branchRules:\n      requiredApprovals: 11\n      requiredChecks:\n        - context: ci\n        - context: ci\n        - {context: \"\", appId: -3}\n      bypass:\n        - {team: platform, role: admin}\n        - {role: owner}\n        - {app: 7}\n        - {app: 7}\n        - {}\n"},
			want: []want{
				{pos: "platform.yaml:9", msg: "invalid requiredApprovals 11", hint: "use 0 to 10"},
				{pos: "platform.yaml:12", msg: `required check "ci" is listed twice`},
				{pos: "platform.yaml:13", msg: "required check without a context"},
				{pos: "platform.yaml:13", msg: "invalid appId -3"},
				{pos: "platform.yaml:15", msg: "bypass actor 0 names 2 actors", hint: "exactly one of team, app, role or organizationAdmin"},
				{pos: "platform.yaml:16", msg: `invalid bypass role "owner"`, hint: "admin, maintain or write"},
				{pos: "platform.yaml:18", msg: "bypass actor app/7 is listed twice"},
				{pos: "platform.yaml:19", msg: "bypass actor 4 names 0 actors"},
			},
		},
		{
			name:  "unknown branch rule field",
			files: map[string]string{"platform.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  access:\n    branchRules:\n      requireApprovals: 2\n"},
			want:  []want{{pos: "platform.yaml:9", msg: "requireApprovals"}},
		},
		{
			name:  "platform without owner and admins",
			files: map[string]string{"platform.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec: {}\n"},
			want: []want{
				{pos: "platform.yaml:4", msg: "spec.owner is required"},
				{pos: "platform.yaml:4", msg: "spec.admins must name at least one team"},
			},
		},
		{
			name: "reserved and invalid namespaces",
			files: map[string]string{
				"workspaces/payments.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: payments}\nspec:\n  namespace: kube-system\n",
				"workspaces/default.yaml":  "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: default}\n",
				"workspaces/other.yaml":    "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: other}\nspec: {namespace: Other.NS}\n",
			},
			want: []want{
				{pos: "workspaces/payments.yaml:5", msg: `namespace "kube-system" is reserved`},
				{pos: "workspaces/default.yaml:3", msg: `namespace "default" is reserved`},
				{pos: "workspaces/other.yaml:4", msg: `invalid namespace "Other.NS"`},
			},
		},
		{
			name: "app without kustomization, misnamed, bad scope",
			files: map[string]string{
				"catalog/monitoring/kustomization.yaml": "",
				"catalog/metallb/app.yaml":              "apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata: {name: metal-lb}\nspec: {scope: global}\n",
				"catalog/empty/README.md":               "no app here",
			},
			want: []want{
				{pos: "catalog/monitoring", msg: "app monitoring has no kustomization.yaml"},
				{pos: "catalog/metallb/app.yaml:3", msg: `app "metal-lb" lives in catalog/metallb`},
				{pos: "catalog/metallb/app.yaml:4", msg: `invalid scope "global"`},
				{pos: "catalog/empty", msg: "catalog/empty has no app.yaml"},
			},
		},
		{
			name: "empty and non-object files",
			files: map[string]string{
				"clusters/empty.yaml": "# nothing\n",
				"clusters/list.yaml":  "- a\n- b\n",
			},
			want: []want{
				{pos: "clusters/empty.yaml:1", msg: "file is empty"},
				{pos: "clusters/list.yaml:1", msg: "expected an object, found a list"},
			},
		},
		{
			name: "undeclared substitution in a manifest",
			files: map[string]string{
				"catalog/podinfo/base/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: podinfo}\nspec:\n  replicas: ${podinfo_replica}\n  note: $${literal} ${podinfo_color}\n",
				"catalog/podinfo/README.md":            "${not_checked}",
			},
			want: []want{{pos: "catalog/podinfo/base/deployment.yaml:5", msg: "${podinfo_replica} is not declared by app podinfo; declared: podinfo_color, podinfo_replicas", hint: "did you mean ${podinfo_replicas}?"}},
		},
		{
			name:  "nested cluster file",
			files: map[string]string{"clusters/eu/prod.yaml": strings.Replace(cluster, "%s", "eu-prod", 1)},
			want:  []want{{pos: "clusters/eu/prod.yaml", msg: "clusters/eu/prod.yaml is not read", hint: "directly into clusters/"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := loadIssues(t, fixture(t, tt.files), tt.name)
			for _, w := range tt.want {
				assertIssue(t, is, tt.name, w)
			}
		})
	}
}

// TestLoadReportsAllProblems checks that one repo with many different
// problems lists every one of them in one error.
func TestLoadReportsAllProblems(t *testing.T) {
	fsys := fixture(t, map[string]string{
		"platform.yaml":            "apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec:\n  owner: acme\n  admins: [platform]\n  colour: blue\n  components:\n    - app: monitoring\n      clusterSelector: {matchExpressions: [{key: env, operator: Is, values: [x]}]}\n    - app: metallb\n      clusterSelector: {matchLabels: {network: metal}}\n",
		"clusters/dev-us-1.yml":    "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: dev-us-1}\nspec: {workspace: nope}\n",
		"clusters/broken.yaml":     "kind: Cluster\nmetadata: {name: [\n",
		"workspaces/payments.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: payments}\nspec:\n  apps:\n    - app: metallb\n    - app: podinfo\n      values: {replicas: 2}\n",
		"clusters/prod-eu-1.yaml":  "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: prod-eu-1\n  labels: {network: metal}\nspec: {workspace: payments}\n",
	})
	is := loadIssues(t, fsys, "many problems")
	wants := []want{
		{pos: "platform.yaml:7", msg: `unknown field "colour" in spec`},
		{pos: "platform.yaml:10", msg: `"Is" not a valid selector operator`},
		{pos: "clusters/dev-us-1.yml:4", msg: `unknown workspace "nope"`},
		{pos: "clusters/broken.yaml:2", msg: "YAML syntax error"},
		{pos: "workspaces/payments.yaml:6", msg: "cluster-scoped app metallb can only be a platform component"},
		{pos: "workspaces/payments.yaml:8", msg: "app podinfo declares no value replicas"},
		{pos: "clusters/prod-eu-1.yaml:4", msg: "app metallb requires value metallb_range"},
	}
	for _, w := range wants {
		assertIssue(t, is, "many problems", w)
	}
	assert.GreaterOrEqual(t, len(is), len(wants), "every problem is listed")
	// The error text lists every issue, sorted by file and line.
	text := is.Error()
	assert.Contains(t, text, "clusters/broken.yaml:2")
	assert.Less(t, strings.Index(text, "clusters/"), strings.Index(text, "platform.yaml"), "issues are sorted by file")
}

func TestLoadDirUnreadable(t *testing.T) {
	repo, err := LoadDir(filepath.Join(t.TempDir(), "does-not-exist"))
	require.Error(t, err)
	assert.Nil(t, repo, "never an empty repo")
	assert.True(t, errors.Is(err, ErrUnreadable), "missing dir: %v", err)
	assert.True(t, errors.Is(err, fs.ErrNotExist), "the cause is kept: %v", err)

	_, err = Load(fstest.MapFS{})
	require.Error(t, err, "an empty repo is invalid, not empty")
	assert.False(t, errors.Is(err, ErrUnreadable), "empty fs is readable: %v", err)
	assert.Contains(t, err.Error(), "platform.yaml is missing")

	_, err = Load(failingFS{})
	assert.True(t, errors.Is(err, ErrUnreadable), "I/O error: %v", err)
}

func TestLoadDirUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads files without permission")
	}
	dir := copyFixture(t)
	p := filepath.Join(dir, "clusters", "dev-us-1.yml")
	require.NoError(t, os.Chmod(p, 0))
	_, err := LoadDir(dir)
	assert.True(t, errors.Is(err, ErrUnreadable), "unreadable file: %v", err)
}

type failingFS struct{}

func (failingFS) Open(string) (fs.File, error) { return nil, errors.New("disk on fire") }

// copyFixture copies the valid control repo into a temp dir.
func copyFixture(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(validDir)))
	return dir
}

func TestLoadDirSymlinks(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.yaml")
	require.NoError(t, os.WriteFile(secret, []byte("apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata: {name: stolen}\n"), 0o644))
	require.NoError(t, os.Mkdir(filepath.Join(outside, "dir"), 0o755))

	t.Run("leaving the repo", func(t *testing.T) {
		dir := copyFixture(t)
		require.NoError(t, os.Symlink(secret, filepath.Join(dir, "clusters", "abs.yaml")))
		rel, err := filepath.Rel(filepath.Join(dir, "catalog", "podinfo"), secret)
		require.NoError(t, err)
		require.NoError(t, os.Symlink(rel, filepath.Join(dir, "catalog", "podinfo", "rel.yaml")))
		require.NoError(t, os.Symlink(filepath.Join(outside, "dir"), filepath.Join(dir, "workspaces", "linked")))
		_, err = LoadDir(dir)
		var is Issues
		require.True(t, errors.As(err, &is), "want issues, got %v", err)
		assertIssue(t, is, "absolute symlink out", want{pos: "clusters/abs.yaml", msg: "symlink leaves the control repo"})
		assertIssue(t, is, "relative symlink out", want{pos: "catalog/podinfo/rel.yaml", msg: "symlink leaves the control repo"})
		assertIssue(t, is, "dir symlink out", want{pos: "workspaces/linked", msg: "symlink leaves the control repo"})
		assert.NotContains(t, err.Error(), "stolen", "the target is never read")
	})

	t.Run("inside the repo", func(t *testing.T) {
		dir := copyFixture(t)
		// A file link inside the repo is followed.
		require.NoError(t, os.Rename(filepath.Join(dir, "catalog", "podinfo", "base", "deployment.yaml"), filepath.Join(dir, "deployment.yaml")))
		require.NoError(t, os.Symlink("../../../deployment.yaml", filepath.Join(dir, "catalog", "podinfo", "base", "deployment.yaml")))
		repo, err := LoadDir(dir)
		require.NoError(t, err)
		assert.Contains(t, string(repo.App("podinfo").Files["base/deployment.yaml"]), "${podinfo_replicas}", "followed link inside the repo")

		// A directory link is refused with a hint.
		require.NoError(t, os.Symlink("base", filepath.Join(dir, "catalog", "podinfo", "base2")))
		_, err = LoadDir(dir)
		var is Issues
		require.True(t, errors.As(err, &is), "want issues, got %v", err)
		assertIssue(t, is, "dir link inside", want{pos: "catalog/podinfo/base2", msg: "symlinked directories are not followed"})
	})

	t.Run("Load on os.DirFS follows the same policy", func(t *testing.T) {
		dir := copyFixture(t)
		require.NoError(t, os.Symlink(secret, filepath.Join(dir, "clusters", "abs.yaml")))
		is := loadIssues(t, os.DirFS(dir), "Load on os.DirFS")
		assertIssue(t, is, "Load on os.DirFS", want{pos: "clusters/abs.yaml", msg: "symlink leaves the control repo: its target \"" + secret + "\" is absolute"})
		assert.NotContains(t, is.Error(), "stolen", "the target is never read")
	})
}

func TestLoadValid(t *testing.T) {
	repo, err := LoadDir(validDir)
	require.NoError(t, err)

	names := func(n int, name func(int) string) []string {
		var out []string
		for i := 0; i < n; i++ {
			out = append(out, name(i))
		}
		return out
	}
	assert.Equal(t, []string{"dev-us-1", "prod-eu-1"}, names(len(repo.Clusters), func(i int) string { return repo.Clusters[i].Metadata.Name }), "clusters sorted, README.md ignored")
	assert.Equal(t, []string{"payments"}, names(len(repo.Workspaces), func(i int) string { return repo.Workspaces[i].Metadata.Name }))
	assert.Equal(t, []string{"metallb", "monitoring", "podinfo"}, names(len(repo.Apps), func(i int) string { return repo.Apps[i].Metadata.Name }), "apps sorted")

	c := repo.Cluster("prod-eu-1")
	require.NotNil(t, c)
	assert.Equal(t, Values{"metallb_range": "10.10.0.0/24", "podinfo_replicas": "3"}, c.Spec.Values, "scalars keep their literal text")
	assert.Equal(t, "clusters/prod-eu-1.yaml", c.Source.File)
	assert.Equal(t, 1, c.Source.Line)
	assert.Equal(t, 11, c.Source.LineOf("spec.values.podinfo_replicas"))
	assert.Equal(t, 5, c.Source.LineOf("metadata.labels.network"))
	assert.Equal(t, 13, repo.Platform.Source.LineOf("spec.components.1.clusterSelector"))
	assert.Equal(t, "platform.yaml:12", repo.Platform.Source.At("spec.components.1").String())

	a := repo.App("podinfo")
	require.NotNil(t, a)
	assert.Equal(t, "catalog/podinfo", a.Dir)
	assert.ElementsMatch(t, []string{"Kustomization", "README.md", "base/kustomization.yaml", "base/deployment.yaml"}, keys(a.Files), "every file but app.yaml")
	require.NotNil(t, a.Spec.Values["podinfo_replicas"].Default)
	assert.Equal(t, "1", *a.Spec.Values["podinfo_replicas"].Default)

	fromFS, err := Load(os.DirFS(validDir))
	require.NoError(t, err)
	assert.Equal(t, repo, fromFS, "LoadDir and Load(os.DirFS) agree")
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestLoadDefaults(t *testing.T) {
	repo, err := Load(fstest.MapFS{
		"platform.yaml":       {Data: []byte("apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec: {owner: acme, admins: [platform]}\n")},
		"workspaces/web.yaml": {Data: []byte("apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: web}\n")},
	})
	require.NoError(t, err)
	s := repo.Platform.Spec
	assert.Equal(t, DefaultBranch, s.DefaultBranch)
	assert.Equal(t, DefaultClusterRepo, s.Repos.Cluster)
	assert.Equal(t, DefaultWorkspaceRepo, s.Repos.Workspace)
	assert.Equal(t, DefaultVisibility, s.Repos.Visibility)
	assert.Equal(t, DefaultPRBranch, s.PullRequests.Branch)
	assert.Equal(t, MergeManual, s.PullRequests.Merge)
	assert.Equal(t, DefaultFluxInterval, s.Flux.Interval)
	require.NotNil(t, s.Flux.SecretRef)
	assert.Equal(t, DefaultFluxSecretRef, *s.Flux.SecretRef)
	assert.Equal(t, AccessEnforce, s.Access.Mode)
	assert.Equal(t, intstr.FromString(DefaultMaxRemovals), *s.MaxRemovals)
	assert.Equal(t, intstr.FromString(DefaultMaxAccessRemovals), *s.Access.MaxAccessRemovals)
	assert.Equal(t, "web", repo.Workspace("web").Spec.Namespace)
	assert.Equal(t, "web", repo.Workspace("web").Namespace())
	assert.Equal(t, "cluster-prod", repo.ClusterRepo("prod"))
	assert.Equal(t, "workspace-web", repo.WorkspaceRepo("web"))
}

func TestLoadExplicitSettings(t *testing.T) {
	repo, err := Load(fstest.MapFS{
		"platform.yaml": {Data: []byte(`apiVersion: fleetbot.io/v1alpha1
kind: Platform
metadata: {name: acme}
spec:
  owner: acme
  admins: [platform]
  defaultBranch: trunk
  repos: {cluster: "k8s-{name}", workspace: "{name}-gitops", visibility: internal}
  pullRequests: {branch: bot/sync, merge: auto}
  flux: {interval: 1h30m, secretRef: git-auth}
  access: {mode: additive, maxAccessRemovals: 3}
  maxRemovals: 2
`)},
	})
	require.NoError(t, err)
	s := repo.Platform.Spec
	assert.Equal(t, "trunk", s.DefaultBranch)
	assert.Equal(t, "k8s-prod", repo.ClusterRepo("prod"))
	assert.Equal(t, "web-gitops", repo.WorkspaceRepo("web"))
	assert.Equal(t, MergeAuto, s.PullRequests.Merge)
	assert.Equal(t, AccessAdditive, s.Access.Mode)
	assert.Equal(t, intstr.FromInt32(2), *s.MaxRemovals)
	assert.Equal(t, intstr.FromInt32(3), *s.Access.MaxAccessRemovals)
}

// TestPlatformDocMirrorsPlatform keeps the decoding mirror in step with the
// public types: same yaml field names.
func TestPlatformDocMirrorsPlatform(t *testing.T) {
	tags := func(v any) []string {
		var names []string
		collectFields(reflect.TypeOf(v), &names)
		return names
	}
	assert.Equal(t, tags(Platform{}), tags(platformDoc{}))
	assert.Equal(t, tags(PlatformSpec{}), tags(platformSpecDoc{}))
	assert.Equal(t, tags(AccessSpec{}), tags(accessSpecDoc{}))
}

func TestValuesKeepLiteralText(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{
		"catalog/podinfo/app.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: App\nmetadata: {name: podinfo}\nspec:\n  scope: namespaced\n  values:\n    podinfo_replicas: {default: 01}\n    podinfo_color: {default: yes}\n",
		"workspaces/payments.yaml": "apiVersion: fleetbot.io/v1alpha1\nkind: Workspace\nmetadata: {name: payments}\nspec:\n  apps:\n    - app: podinfo\n      values: {podinfo_replicas: 1.50, podinfo_color: 0x10}\n",
		"clusters/prod-eu-1.yaml":  "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: prod-eu-1\n  labels: {network: metal}\nspec:\n  workspace: payments\n  values: {metallb_range: 10.0.0.0/8, podinfo_color: true}\n",
	}))
	require.NoError(t, err)
	a := repo.App("podinfo")
	assert.Equal(t, "01", *a.Spec.Values["podinfo_replicas"].Default, "int default kept as written")
	assert.Equal(t, "yes", *a.Spec.Values["podinfo_color"].Default, "bool-like default kept as written")
	assert.Equal(t, Values{"podinfo_replicas": "1.50", "podinfo_color": "0x10"}, repo.Workspace("payments").Spec.Apps[0].Values)
	assert.Equal(t, "true", repo.Cluster("prod-eu-1").Spec.Values["podinfo_color"])
}

// secretRef: "" means no secret (public or unauthenticated repos); absent
// means the default.
func TestLoadEmptySecretRef(t *testing.T) {
	repo, err := Load(fstest.MapFS{
		"platform.yaml": {Data: []byte("apiVersion: fleetbot.io/v1alpha1\nkind: Platform\nmetadata: {name: acme}\nspec: {owner: acme, admins: [platform], flux: {secretRef: \"\"}}\n")},
	})
	require.NoError(t, err)
	require.NotNil(t, repo.Platform.Spec.Flux.SecretRef)
	assert.Equal(t, "", *repo.Platform.Spec.Flux.SecretRef)
}
