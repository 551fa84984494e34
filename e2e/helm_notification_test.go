package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// tenantNamespace creates namespace ns whose default ServiceAccount is
// bound to the admin ClusterRole in it: under the lockdown
// (--default-service-account=default) kustomize- and helm-controller
// apply a Kustomization or HelmRelease that names no ServiceAccount as
// that account.
func (e *environment) tenantNamespace(t *testing.T, ns string) {
	t.Helper()
	require.NoError(t, e.kube.applyYAML(context.Background(), []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: default-admin
  namespace: %[1]s
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
subjects:
- {kind: ServiceAccount, name: default, namespace: %[1]s}
`, ns)), ""))
}

// newForgeRepo creates the bare repository owner/repo in the forge the
// env's git server serves, pushes files to its main and returns the
// commit and the repository's URL.
func (e *environment) newForgeRepo(t *testing.T, repo string, files map[string]string) (string, string) {
	t.Helper()
	bare := e.bare(repo)
	git(t, e.dir, "init", "-q", "--bare", "-b", "main", bare)
	dir := filepath.Join(t.TempDir(), repo)
	git(t, e.dir, "clone", "-q", bare, dir)
	for name, content := range files {
		writeFile(t, filepath.Join(dir, name), content)
	}
	return push(t, dir, "initial content"), e.gitURL + "/" + owner + "/" + repo + ".git"
}

// TestHelmReleaseFromGitRepository: a HelmRelease whose chart lies in a
// GitRepository served by the env's git server is installed by
// helm-controller (as the namespace's default ServiceAccount, the
// lockdown) and becomes Ready; the chart's objects exist with the
// HelmRelease's values.
func TestHelmReleaseFromGitRepository(t *testing.T) {
	e := env
	ctx := context.Background()
	const ns = "helm-e2e"
	e.tenantNamespace(t, ns)
	sha, url := e.newForgeRepo(t, "helm-charts", map[string]string{
		"charts/tiny/Chart.yaml":  "apiVersion: v2\nname: tiny\nversion: 0.1.0\n",
		"charts/tiny/values.yaml": "greeting: from-chart\n",
		"charts/tiny/templates/configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-greeting
data:
  greeting: {{ .Values.greeting | quote }}
`,
	})
	require.NoError(t, e.kube.applyYAML(ctx, []byte(fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: charts
spec:
  interval: 10m
  url: %s
  ref: {branch: main}
---
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: tiny
spec:
  interval: 10m
  chart:
    spec:
      chart: ./charts/tiny
      reconcileStrategy: Revision
      sourceRef: {kind: GitRepository, name: charts}
  values:
    greeting: from-helmrelease
`, url)), ns))

	// Wait for Ready and the release history together: a CI run once read status.history empty
	// right after it had seen Ready (helm-controller patches a release's status more than once).
	var history []any
	err := poll(ctx, fluxDeadline, "HelmRelease "+ns+"/tiny Ready with its release history", func() (bool, string, error) {
		obj, err := e.kube.get(ctx, "helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, "tiny")
		if err != nil || obj == nil {
			return false, fmt.Sprint("not found ", err), nil
		}
		st, reason, msg := condition(obj, "Ready")
		history, _ = field(obj, "status", "history").([]any)
		return st == "True" && len(history) > 0, fmt.Sprintf("Ready=%s %s: %s; %d release(s) in status.history", st, reason, msg, len(history)), nil
	})
	require.NoError(t, err)
	snap, _ := history[0].(map[string]any)
	// reconcileStrategy Revision: the chart's version carries the commit.
	assert.Equal(t, "0.1.0+"+sha[:12], snap["chartVersion"])
	assert.Equal(t, "deployed", snap["status"])
	t.Logf("HelmRelease %s/tiny installed chart tiny from commit %.12s", ns, sha)

	cm, err := e.kube.get(ctx, "v1", "ConfigMap", ns, "tiny-greeting")
	require.NoError(t, err)
	require.NotNil(t, cm, "the chart's ConfigMap")
	assert.Equal(t, "from-helmrelease", field(cm, "data", "greeting"), "the HelmRelease's values")
	assert.Equal(t, "Helm", field(cm, "metadata", "labels", "app.kubernetes.io/managed-by"))
}

// TestAlertPostsGitHubCommitStatus: notification-controller's github
// provider, pointed at the fake GitHub in its GitHub Enterprise form
// (https://HOST/OWNER/REPO; the client then talks to HOST/api/v3/) and
// trusting its certificate through certSecretRef, posts the commit status
// of a Kustomization that applied a commit of that repository (fetched
// from the same fake over HTTPS). The fake checks every request against
// GitHub's REST description.
func TestAlertPostsGitHubCommitStatus(t *testing.T) {
	e := env
	ctx := context.Background()
	const ns = "notify-e2e"
	gh := githubtest.NewServer(t, githubtest.WithTLS())
	gh.CreateRepo(owner, "notify", map[string]string{
		"deploy/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notify-probe\ndata:\n  ok: \"true\"\n",
	})
	sha := gh.Branch(owner, "notify", "main")
	ca := strings.TrimSpace(string(gh.CertPEM()))
	e.tenantNamespace(t, ns)

	// The Provider and Alert first: an event is matched against the Alerts
	// notification-controller's cache holds when it arrives (and dropped
	// for good if none matches), so the Kustomization comes only once a
	// probe event has gone through (waitAlertServes).
	require.NoError(t, e.kube.applyYAML(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: github-token
stringData:
  token: %[2]s
---
apiVersion: v1
kind: Secret
metadata:
  name: github-ca
stringData:
  ca.crt: |
    %[3]s
---
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Provider
metadata:
  name: github
spec:
  type: github
  address: %[1]s/%[4]s/notify
  secretRef: {name: github-token}
  certSecretRef: {name: github-ca}
---
apiVersion: notification.toolkit.fluxcd.io/v1beta3
kind: Alert
metadata:
  name: notify
spec:
  providerRef: {name: github}
  eventSeverity: info
  eventSources:
  - {kind: Kustomization, name: notify}
`, gh.URL, githubtest.DefaultToken, strings.ReplaceAll(ca, "\n", "\n    "), owner)), ns))
	provider, err := e.kube.get(ctx, "notification.toolkit.fluxcd.io/v1beta3", "Provider", ns, "github")
	require.NoError(t, err)
	uid, _ := field(provider, "metadata", "uid").(string)
	require.NotEmpty(t, uid)
	uidPrefix := strings.Split(uid, "-")[0]
	wantContext := "kustomization/notify/" + uidPrefix
	waitAlertServes(t, gh, e.eventsURL, "notify", ns, "notify", uidPrefix)

	require.NoError(t, e.kube.applyYAML(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: github-git
stringData:
  username: x-access-token
  password: %[2]s
  ca.crt: |
    %[3]s
---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: notify
spec:
  interval: 10m
  url: %[1]s/%[4]s/notify.git
  ref: {branch: main}
  secretRef: {name: github-git}
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: notify
spec:
  interval: 10m
  path: ./deploy
  prune: true
  targetNamespace: %[5]s
  sourceRef: {kind: GitRepository, name: notify}
`, gh.URL, githubtest.DefaultToken, strings.ReplaceAll(ca, "\n", "\n    "), owner, ns)), ns))

	e.waitApplied(t, ns, "notify", sha)
	e.waitObject(t, "v1", "ConfigMap", ns, "notify-probe", "applied", exists)
	st := waitCommitStatus(t, gh, "notify", sha, wantContext, "success")
	assert.Equal(t, "reconciliation succeeded", st.GetDescription())
	// What notification-controller asked, as GitHub's commit status API
	// with GitHub Enterprise paths: the commit's statuses, then a new one.
	var routes []string
	for _, r := range gh.Requests() {
		routes = append(routes, r.Method+" "+r.Path)
	}
	assert.Contains(t, routes, fmt.Sprintf("GET /api/v3/repos/%s/notify/commits/%s/statuses", owner, sha))
	assert.Contains(t, routes, fmt.Sprintf("POST /api/v3/repos/%s/notify/statuses/%s", owner, sha))

	// A commit Flux cannot apply (a cluster-scoped object, which the
	// tenant's ServiceAccount may not write) gets a failure status.
	bad := gh.Commit(owner, "notify", "main", "a ClusterRole", map[string]string{
		"deploy/clusterrole.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: notify-escape\nrules: []\n",
	})
	e.requestReconcile(t, ns, "notify")
	e.waitRefused(t, ns, "notify", bad, "forbidden")
	waitCommitStatus(t, gh, "notify", bad, wantContext, "failure")
}

// waitCommitStatus waits until the fake GitHub holds a commit status with
// context and state on sha of owner/repo, and returns it.
func waitCommitStatus(t *testing.T, gh *githubtest.Server, repo, sha, context, state string) *github.RepoStatus {
	t.Helper()
	ctx := t.Context()
	var found *github.RepoStatus
	err := poll(ctx, fluxDeadline, fmt.Sprintf("commit status %s=%s on %s/%s@%.12s", context, state, owner, repo, sha), func() (bool, string, error) {
		list, _, err := gh.Client().Repositories.ListStatuses(ctx, owner, repo, sha, nil)
		if err != nil {
			return false, err.Error(), nil
		}
		var seen []string
		for _, st := range list {
			seen = append(seen, st.GetContext()+"="+st.GetState())
			if st.GetContext() == context && st.GetState() == state {
				found = st
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("statuses %v", seen), nil
	})
	require.NoError(t, err)
	return found
}
