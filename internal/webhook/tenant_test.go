package webhook

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/jobqueue"
	"github.com/fleetbot-io/fleetbot/internal/reconcile"
)

// TestTenantJobsCoalescePerPullRequest: a burst of pushes to one pull request is one tenant
// check, of the newest head; a re-run (no pull request) is a check of its commit, which takes
// the place of no newer head's.
func TestTenantJobsCoalescePerPullRequest(t *testing.T) {
	t.Parallel()
	q := NewQueue(jobqueue.Config{Capacity: 10})
	for _, sha := range []string{"a", "b", "c"} {
		_, err := q.Push(Job{Kind: KindTenant, Repo: "acme/cluster-a", SHA: sha, PR: 3})
		require.NoError(t, err)
	}
	_, err := q.Push(Job{Kind: KindTenant, Repo: "acme/Cluster-A", SHA: "a"})
	require.NoError(t, err)
	got := q.Drain()
	require.Len(t, got, 2)
	assert.Equal(t, "c", got[0].SHA, "the newest head of the pull request")
	assert.Equal(t, 2, got[0].Merged)
	assert.Equal(t, "a", got[1].SHA, "the re-run of an older head, on its own")
}

// memTenants is webhook.TenantChecks over files in memory, recording the check runs.
type memTenants struct {
	mu      sync.Mutex
	files   map[string]map[string][]byte // repo@sha -> files
	readErr error
	runs    []tenantRun
}

type tenantRun struct {
	repo, sha string
	res       checkrun.Result
	finished  bool
}

func (m *memTenants) Files(_ context.Context, repo, sha string, _ map[string][]byte) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.readErr != nil {
		return nil, m.readErr
	}
	f, ok := m.files[repo+"@"+sha]
	if !ok {
		return nil, fmt.Errorf("no commit %s of %s", sha, repo)
	}
	return f, nil
}

func (m *memTenants) Start(_ context.Context, repo, sha string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runs = append(m.runs, tenantRun{repo: repo, sha: sha})
	return int64(len(m.runs)), nil
}

func (m *memTenants) Finish(_ context.Context, repo string, id int64, r checkrun.Result) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	run := &m.runs[id-1]
	if run.repo != repo {
		return errors.New("check run of another repo")
	}
	run.res, run.finished = r, true
	return nil
}

func (m *memTenants) commit(repo, sha string, files map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files = map[string]map[string][]byte{}
	}
	in := map[string][]byte{}
	for p, c := range files {
		in[p] = []byte(c)
	}
	m.files[repo+"@"+sha] = in
}

func (m *memTenants) taken() []tenantRun {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.runs
	m.runs = nil
	return out
}

// tenantEnv is a service over the example control repo with tenant checks on.
type tenantEnv struct {
	svc     *Service
	tenants *memTenants
	ctl     *memControl

	mu      sync.Mutex
	granted bool
	asked   int
}

func newTenantEnv(t *testing.T) *tenantEnv {
	t.Helper()
	e := &tenantEnv{tenants: &memTenants{}, ctl: &memControl{commits: map[string]fs.FS{}}, granted: true}
	e.ctl.push(readControl(t))
	svc, err := NewService(ServiceConfig{
		Control:     e.ctl,
		Tenants:     e.tenants,
		TenantCheck: app.RequiredCheck{Context: checkrun.DefaultTenantCheckName, AppID: 12},
		CanCheck: func(context.Context, string) (bool, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.asked++
			return e.granted, nil
		},
		Runner: app.Config{}.ServiceRunner("acme/control", func(context.Context, string, app.ForgeMode) (reconcile.Forge, error) {
			return nil, errors.New("a tenant check opens no forge")
		}),
	})
	require.NoError(t, err)
	e.svc = svc
	return e
}

// kustomization lists resources.
func kustomization(resources ...string) string {
	return "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [" + strings.Join(resources, ", ") + "]\n"
}

const (
	// deployment meets the restricted Pod Security level, a workspace's default.
	deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n    spec:\n      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}\n      containers: [{name: web, image: nginx, securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}}]\n"
	clusterRB  = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: mine\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: ServiceAccount, name: payments, namespace: payments}]\n"
	kubeConfig = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: elsewhere\nspec:\n  interval: 10m\n  path: ./\n  prune: true\n  serviceAccountName: payments\n  sourceRef: {kind: GitRepository, name: workspace-payments}\n  kubeConfig:\n    secretRef: {name: other-cluster}\n"
)

// TestTenantJobChecksAWorkspaceRepo: a pull request of a workspace repo is checked with check
// workspace's rules and the workspace's namespace: a cluster-scoped object, a Flux object with
// kubeConfig and a reference leaving the repo fail the check run, each problem an annotation on
// its file and line; a clean head succeeds.
func TestTenantJobChecksAWorkspaceRepo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTenantEnv(t)
	const repo = "acme/workspace-payments"
	sha := func(c byte) string { return strings.Repeat(string(c), 40) }
	e.tenants.commit(repo, sha('1'), map[string]string{
		"clusters/prod-eu-1/kustomization.yaml": kustomization("../../apps"),
		"apps/kustomization.yaml":               kustomization("web.yaml", "crb.yaml", "flux.yaml"),
		"apps/web.yaml":                         deployment,
		"apps/crb.yaml":                         clusterRB,
		"apps/flux.yaml":                        kubeConfig,
	})
	e.tenants.commit(repo, sha('2'), map[string]string{
		"clusters/prod-eu-1/kustomization.yaml": kustomization("../../apps"),
		"clusters/edge-1/kustomization.yaml":    "# the workspace's own\n" + kustomization("../../../outside"),
		"apps/kustomization.yaml":               kustomization("web.yaml"),
		"apps/web.yaml":                         deployment,
	})
	e.tenants.commit(repo, sha('3'), map[string]string{
		"clusters/prod-eu-1/kustomization.yaml": kustomization("../../apps"),
		"apps/kustomization.yaml":               kustomization("web.yaml"),
		"apps/web.yaml":                         deployment,
	})

	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindTenant, Repo: repo, SHA: sha('1'), PR: 3}, nil))
	runs := e.tenants.taken()
	require.Len(t, runs, 1)
	r := runs[0]
	assert.Equal(t, sha('1'), r.sha, "the check run is on the pull request's head")
	require.True(t, r.finished)
	assert.Equal(t, checkrun.ConclusionFailure, r.res.Conclusion)
	assert.Equal(t, "2 problem(s) in 1 kustomization(s)", r.res.Title)
	assert.Contains(t, r.res.Summary, "fleetbot check workspace --dir . --workspace payments --namespace payments")
	byFile := map[string]checkrun.Annotation{}
	for _, a := range r.res.Annotations {
		byFile[a.Path] = a
		assert.Equal(t, "failure", a.Level)
	}
	require.Contains(t, byFile, "apps/crb.yaml")
	assert.Equal(t, 2, byFile["apps/crb.yaml"].Line)
	assert.Contains(t, byFile["apps/crb.yaml"].Message, "ClusterRoleBinding/mine: is cluster-scoped")
	require.Contains(t, byFile, "apps/flux.yaml")
	assert.Equal(t, 11, byFile["apps/flux.yaml"].Line, "the kubeConfig line")
	assert.Contains(t, byFile["apps/flux.yaml"].Message, "spec.kubeConfig")
	assert.Contains(t, byFile["apps/flux.yaml"].Message, "hint: ")

	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindTenant, Repo: repo, SHA: sha('2')}, nil))
	r = e.tenants.taken()[0]
	assert.Equal(t, checkrun.ConclusionFailure, r.res.Conclusion)
	require.NotEmpty(t, r.res.Annotations)
	assert.Equal(t, "clusters/edge-1/kustomization.yaml", r.res.Annotations[0].Path)
	assert.Equal(t, 4, r.res.Annotations[0].Line, "the line naming the path that leaves the repo")
	assert.Contains(t, r.res.Annotations[0].Message, "../../../outside")

	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindTenant, Repo: repo, SHA: sha('3')}, nil))
	r = e.tenants.taken()[0]
	assert.Equal(t, checkrun.ConclusionSuccess, r.res.Conclusion)
	assert.Equal(t, "1 kustomization(s) render cleanly", r.res.Title)
	assert.Empty(t, r.res.Annotations)
}

// TestTenantJobChecksAClusterRepoWithClusterRules: a cluster admin may create cluster-scoped
// objects, so a cluster repo's check passes what a workspace repo's refuses; a remote base fails
// it as check cluster does.
func TestTenantJobChecksAClusterRepoWithClusterRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTenantEnv(t)
	const repo = "acme/cluster-prod-eu-1"
	ok, remote := strings.Repeat("a", 40), strings.Repeat("b", 40)
	e.tenants.commit(repo, ok, map[string]string{"apps/kustomization.yaml": kustomization("crb.yaml"), "apps/crb.yaml": clusterRB})
	e.tenants.commit(repo, remote, map[string]string{"apps/kustomization.yaml": kustomization("https://github.com/evil/base")})

	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindTenant, Repo: repo, SHA: ok}, nil))
	r := e.tenants.taken()[0]
	assert.Equal(t, checkrun.ConclusionSuccess, r.res.Conclusion, "%+v", r.res)
	assert.Contains(t, r.res.Summary, "fleetbot check cluster --dir .")

	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindTenant, Repo: repo, SHA: remote}, nil))
	r = e.tenants.taken()[0]
	assert.Equal(t, checkrun.ConclusionFailure, r.res.Conclusion)
	require.NotEmpty(t, r.res.Annotations)
	assert.Equal(t, "apps/kustomization.yaml", r.res.Annotations[0].Path)
}

// TestTenantJobLeavesOtherReposAlone: a repo the fleet does not render as a workspace or cluster
// repo gets no check run, nothing is read from it.
func TestTenantJobLeavesOtherReposAlone(t *testing.T) {
	t.Parallel()
	e := newTenantEnv(t)
	e.tenants.readErr = errors.New("must not be read")
	for _, repo := range []string{"acme/website", "acme/control", "acme/workspace-nope", "other/cluster-prod-eu-1"} {
		require.NoError(t, e.svc.Execute(context.Background(), Job{Kind: KindTenant, Repo: repo, SHA: strings.Repeat("a", 40)}, nil), repo)
	}
	assert.Empty(t, e.tenants.taken())
}

// TestTenantJobThatCannotReadFails: a head that cannot be read fails its check (a neutral
// required check would let the pull request merge unchecked); a job cancelled meanwhile still
// completes its check run, as cancelled.
func TestTenantJobThatCannotReadFails(t *testing.T) {
	t.Parallel()
	e := newTenantEnv(t)
	e.tenants.readErr = errors.New("too many files")
	require.NoError(t, e.svc.Execute(context.Background(), Job{Kind: KindTenant, Repo: "acme/cluster-edge-1", SHA: strings.Repeat("a", 40)}, nil))
	r := e.tenants.taken()[0]
	assert.Equal(t, checkrun.ConclusionFailure, r.res.Conclusion)
	assert.Equal(t, "fleetbot could not read this commit", r.res.Title)
	assert.Contains(t, r.res.Summary, "too many files")

	e.tenants.readErr = nil
	e.tenants.commit("acme/cluster-edge-1", strings.Repeat("b", 40), map[string]string{"apps/kustomization.yaml": kustomization()})
	ctx, cancel := context.WithCancel(context.Background())
	e.svc.cfg.BeforeJob = func(context.Context, Job) error { cancel(); return nil }
	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindTenant, Repo: "acme/cluster-edge-1", SHA: strings.Repeat("b", 40)}, nil))
	r = e.tenants.taken()[0]
	assert.True(t, r.finished)
	assert.Equal(t, checkrun.ConclusionCancelled, r.res.Conclusion)
}

// TestTenantCheckRequiredWhereTheAppMayWriteChecks: the fleet serve renders requires the tenant
// check from its App on every workspace and cluster repo, only where the installation may write
// check runs; without, no check run is attempted, and once the permission is accepted the next
// full apply's question makes the next render require it.
func TestTenantCheckRequiredWhereTheAppMayWriteChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newTenantEnv(t)
	required := func() map[string]bool {
		out := map[string]bool{}
		entry := e.svc.fleetEntry(ctx, e.ctl.head)
		require.NoError(t, entry.err)
		for _, tg := range entry.fleet.Targets {
			out[tg.Repo] = len(tg.Access.Protection.RequiredChecks) > 0
			if out[tg.Repo] {
				assert.Equal(t, app.RequiredCheck{Context: checkrun.DefaultTenantCheckName, AppID: 12}, tg.Access.Protection.RequiredChecks[0])
			}
		}
		return out
	}
	assert.Equal(t, map[string]bool{"cluster-edge-1": true, "cluster-prod-eu-1": true, "cluster-prod-us-1": true, "cluster-staging-eu-1": true,
		"workspace-payments": true, "workspace-search": true}, required())

	e2 := newTenantEnv(t)
	e2.granted = false
	e = e2
	for _, req := range required() {
		assert.False(t, req, "nothing could pass a check the App may not write")
	}
	require.NoError(t, e.svc.Execute(ctx, Job{Kind: KindTenant, Repo: "acme/cluster-edge-1", SHA: strings.Repeat("a", 40)}, nil))
	assert.Empty(t, e.tenants.taken(), "no check run without checks: write")

	e.mu.Lock()
	e.granted = true
	e.mu.Unlock()
	require.NoError(t, e.svc.regrant(ctx))
	assert.True(t, required()["workspace-payments"], "required once the permission is accepted")
	e.mu.Lock()
	defer e.mu.Unlock()
	assert.Equal(t, 2, e.asked, "asked once per render and once per full apply")
}
