package fanout

import (
	"errors"
	"maps"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/control"
)

// workspaceRepo returns the files of workspace-payments, rendered from the example control
// repo, as its admins would see them after the first merge: a map of the test's own over the
// bytes of one render shared by the package's tests (the tests replace files, never edit
// their bytes), instead of a render of the whole example per call.
func workspaceRepo(t *testing.T) map[string][]byte {
	t.Helper()
	shared, err := paymentsFiles()
	require.NoError(t, err)
	return maps.Clone(shared)
}

// paymentsFiles renders the example control repo once and returns workspace-payments' files
// (managed and scaffolds).
var paymentsFiles = sync.OnceValues(func() (map[string][]byte, error) {
	repo, err := control.LoadDir(filepath.Join("..", "..", "testdata", "control"))
	if err != nil {
		return nil, err
	}
	targets, err := NewRenderer(Options{}).Render(repo)
	if err != nil {
		return nil, err
	}
	for _, tg := range targets {
		if tg.Repo == "workspace-payments" {
			files := map[string][]byte{}
			for p, b := range tg.Files {
				files[p] = b
			}
			for p, b := range tg.Scaffolds {
				files[p] = b
			}
			return files, nil
		}
	}
	return nil, errors.New("the example control repo renders no workspace-payments target")
})

var paymentsCheck = RepoCheck{Entries: []string{"clusters/prod-eu-1", "clusters/prod-us-1"}, Namespace: "payments", ServiceAccount: "payments"}

func TestCheckRepoClean(t *testing.T) {
	t.Parallel()
	files := workspaceRepo(t)
	files["apps/kustomization.yaml"] = []byte("resources:\n- web.yaml\n")
	files["apps/web.yaml"] = []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: payments\nspec:\n  ports: [{port: 80}]\n")
	assert.Empty(t, CheckRepo(files, paymentsCheck))
}

func TestCheckRepoConfinement(t *testing.T) {
	t.Parallel()
	files := workspaceRepo(t)
	files["apps/kustomization.yaml"] = []byte("resources:\n- rbac.yaml\n- sneaky.yaml\n")
	files["apps/rbac.yaml"] = []byte("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: god\nrules:\n- apiGroups: ['*']\n  resources: ['*']\n  verbs: ['*']\n")
	files["apps/sneaky.yaml"] = []byte("# another team's namespace\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: sneaky\n  namespace: kube-system\n")
	got := CheckRepo(files, paymentsCheck)
	var lines []string
	for _, p := range got {
		lines = append(lines, p.String())
	}
	// Once per cluster that renders apps/.
	assert.Equal(t, []string{
		"apps/rbac.yaml:2: ClusterRole/god: is cluster-scoped: rendered by clusters/prod-eu-1/kustomization.yaml, it would be refused on the cluster (the workspace may only create objects in namespace payments)",
		"apps/rbac.yaml:2: ClusterRole/god: is cluster-scoped: rendered by clusters/prod-us-1/kustomization.yaml, it would be refused on the cluster (the workspace may only create objects in namespace payments)",
		`apps/sneaky.yaml:3: ConfigMap/sneaky: is in namespace "kube-system": rendered by clusters/prod-eu-1/kustomization.yaml, the workspace may only create objects in namespace payments`,
		`apps/sneaky.yaml:3: ConfigMap/sneaky: is in namespace "kube-system": rendered by clusters/prod-us-1/kustomization.yaml, the workspace may only create objects in namespace payments`,
	}, lines)
}

func TestCheckRepoRemoteAndEscapes(t *testing.T) {
	t.Parallel()
	files := workspaceRepo(t)
	files["apps/kustomization.yaml"] = []byte("resources:\n- github.com/evil/manifests//base?ref=main\n- ../../outside\n- https://example.com/x.yaml\n")
	got := CheckRepo(files, paymentsCheck)
	require.Len(t, got, 3, "%v", got)
	assert.Equal(t, "apps/kustomization.yaml", got[0].File)
	assert.Equal(t, 2, got[0].Line)
	assert.Contains(t, got[0].Message, `"github.com/evil/manifests//base?ref=main" is remote`)
	assert.Contains(t, got[1].Message, "escapes the repo")
	assert.Contains(t, got[2].Message, "is remote")
	assert.NotContains(t, got[0].Hint, "control repo")
}

func TestCheckRepoBuildError(t *testing.T) {
	t.Parallel()
	files := workspaceRepo(t)
	files["apps/kustomization.yaml"] = []byte("resources:\n- missing.yaml\n")
	got := CheckRepo(files, paymentsCheck)
	require.NotEmpty(t, got)
	assert.Contains(t, got[0].Message, "does not exist in the repo")

	files["apps/kustomization.yaml"] = []byte("resources: [web.yaml]\n")
	files["apps/web.yaml"] = []byte("kind: [unclosed\n")
	got = CheckRepo(files, paymentsCheck)
	require.NotEmpty(t, got)
	assert.Contains(t, got[0].Message, "kustomize build failed")
}

// TestCheckRepoPointsAtTheDefiningNode: a problem about a Service points at
// the Service's own document, taken from the parsed node of the file
// kustomize loaded it from: not at a ServiceAccount of the same name earlier
// in that file, nor at an identical Service in a file the kustomization does
// not list.
func TestCheckRepoPointsAtTheDefiningNode(t *testing.T) {
	t.Parallel()
	files := workspaceRepo(t)
	svc := "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: kube-system\nspec:\n  ports: [{port: 80}]\n"
	files["apps/kustomization.yaml"] = []byte("resources:\n- web.yaml\n")
	files["apps/a-unused.yaml"] = []byte(svc)
	files["apps/web.yaml"] = []byte("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: web\n  namespace: payments\n---\n# the Service\n" + svc)
	got := CheckRepo(files, RepoCheck{Entries: []string{"clusters/prod-eu-1"}, Namespace: "payments", ServiceAccount: "payments"})
	require.Len(t, got, 1, "%v", got)
	assert.Equal(t, "apps/web.yaml", got[0].File, "%v", got[0])
	assert.Equal(t, 9, got[0].Line, "the line of `kind: Service`, not of `kind: ServiceAccount`: %v", got[0])
	assert.Equal(t, "Service/web", got[0].Object)
}

// TestWithOrigins: the entry kustomization gains originAnnotations once;
// what does not parse is left for kustomize to report.
func TestWithOrigins(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"resources: [a.yaml]\n":                                     "resources: [a.yaml]\nbuildMetadata:\n- originAnnotations\n",
		"resources: [a.yaml]\nbuildMetadata: [managedByLabel]\n":    "resources: [a.yaml]\nbuildMetadata: [managedByLabel, originAnnotations]\n",
		"resources: [a.yaml]\nbuildMetadata: [originAnnotations]\n": "resources: [a.yaml]\nbuildMetadata: [originAnnotations]\n",
		"resources: [a.yaml\n":                                      "resources: [a.yaml\n",
		"- a\n":                                                     "- a\n",
	} {
		assert.Equal(t, want, string(withOrigins([]byte(in))), "input %q", in)
	}
}
