package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/githubtest"
)

// healthPlatform declares a rollout wave, so fleetbot renders the health
// Provider and Alert (fleetbot-health) into the cluster repo.
const healthPlatform = `apiVersion: fleetbot.io/v1alpha1
kind: Platform
metadata:
  name: acme
spec:
  owner: acme
  admins: [platform]
  components:
    - app: monitoring
      clusterSelector: {}
  rollout:
    waves:
      - name: canary
        clusterSelector: {matchLabels: {ring: canary}}
`

// TestRenderedHealthAlertPostsCommitStatus: the notification Provider and
// Alert fleetbot renders into a cluster repo when the platform declares
// rollout waves are applied from that repo by a real Flux (a cluster of the
// test's own: flux bootstrap --path=flux of the repo, which lives on the
// fake GitHub), and notification-controller posts the commit status of the
// cluster repo's commit each Kustomization applied to the fake GitHub.
//
// The rendered shape needs no change for a host other than github.com:
// fleetbot configured for a GitHub Enterprise Server (--github-url
// https://HOST/api/v3) renders the Provider's address as
// https://HOST/OWNER/REPO, from which notification-controller's github
// provider talks to https://HOST/api/v3/; the fake's certificate is trusted
// through ca.crt in the Provider's Secret fleetbot-health (which
// notification-controller reads for commit-status providers), beside the
// token.
func TestRenderedHealthAlertPostsCommitStatus(t *testing.T) {
	e := env
	ctx := context.Background()
	const (
		cluster = "health-e2e"
		repo    = "cluster-" + cluster
	)
	gh := githubtest.NewServer(t, githubtest.WithTLS())
	ca := strings.TrimSpace(string(gh.CertPEM()))
	c := e.startFluxCluster(t, "health", clusterFlux{notification: true, lockdown: true})

	control := filepath.Join(t.TempDir(), "control")
	require.NoError(t, os.CopyFS(filepath.Join(control, "catalog"), os.DirFS(filepath.Join("..", "testdata", "provision", "control", "catalog"))))
	writeFile(t, filepath.Join(control, "platform.yaml"), healthPlatform)
	clusterFile := filepath.Join(control, "clusters", cluster+".yaml")
	writeFile(t, clusterFile, "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: "+cluster+"\n  labels: {ring: canary}\nspec:\n  admins: [health-sre]\n")
	files := e.renderRepo(t, control, repo, "--github-url", gh.APIURL())
	fleetbotYAML := files["flux/fleetbot.yaml"]
	require.Contains(t, fleetbotYAML, "name: fleetbot-health", "waves declared: flux/fleetbot.yaml holds the health Provider and Alert")
	require.Contains(t, fleetbotYAML, "address: "+gh.URL+"/"+owner+"/"+repo, "the Provider's address is the repo on the Enterprise host fleetbot is configured for")
	gh.CreateRepo(owner, repo, files)

	// What the platform admins provide in flux-system: the bootstrap's
	// read credentials and the Provider's Secret (token, and the CA of a
	// GitHub Enterprise Server with a private one).
	indented := strings.ReplaceAll(ca, "\n", "\n    ")
	require.NoError(t, c.kube.applyYAML(ctx, []byte(fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: flux-system
---
apiVersion: v1
kind: Secret
metadata:
  name: flux-system
  namespace: flux-system
stringData:
  username: x-access-token
  password: %[1]s
  ca.crt: |
    %[2]s
---
apiVersion: v1
kind: Secret
metadata:
  name: fleetbot-health
  namespace: flux-system
stringData:
  token: %[1]s
  ca.crt: |
    %[2]s
`, githubtest.DefaultToken, indented)), ""))

	boot := gh.Commit(owner, repo, "main", "Add Flux sync manifests",
		e.fluxBootstrapFiles(t, gh.URL+"/"+owner+"/"+repo+".git", "flux-system", false))
	applyFluxSystem(t, c.kube, mapFS(gh.Files(owner, repo, boot)))
	waitAppliedOn(t, c.kube, "flux-system", "flux-system", boot)
	provider, err := c.kube.get(ctx, "notification.toolkit.fluxcd.io/v1beta3", "Provider", "flux-system", "fleetbot-health")
	require.NoError(t, err)
	require.NotNil(t, provider, "Provider flux-system/fleetbot-health applied from %s", repo)
	require.True(t, ownedBy("flux-system")(provider), "the Provider comes from the repo: %v", field(provider, "metadata", "labels"))
	alert, err := c.kube.get(ctx, "notification.toolkit.fluxcd.io/v1beta3", "Alert", "flux-system", "fleetbot-health")
	require.NoError(t, err)
	require.True(t, ownedBy("flux-system")(alert), "the Alert comes from the repo: %v", alert)
	uid, _ := field(provider, "metadata", "uid").(string)
	require.NotEmpty(t, uid)
	uidPrefix := strings.Split(uid, "-")[0]

	// The bootstrap commit's own events raced the Alert's creation (the same
	// apply created it); from now on notification-controller holds it.
	waitAlertServes(t, gh, c.events, repo, "flux-system", "fleetbot-health-probe", uidPrefix)

	// A change fleetbot renders, merged: Flux applies it and reports.
	writeFile(t, clusterFile, "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: "+cluster+"\n  labels: {ring: canary}\nspec:\n  admins: [health-sre]\n  values:\n    monitoring_retention: 7d\n")
	changed := e.renderRepo(t, control, repo, "--github-url", gh.APIURL())
	require.NotEqual(t, files["platform/monitoring/monitoring.yaml"], changed["platform/monitoring/monitoring.yaml"])
	head := gh.Commit(owner, repo, "main", "fleetbot: monitoring keeps 7 days", changed)
	requestReconcileOn(t, c.kube, "source.toolkit.fluxcd.io/v1", "GitRepository", "flux-system", "flux-system")
	waitAppliedOn(t, c.kube, "flux-system", "flux-system", head)
	waitAppliedOn(t, c.kube, "flux-system", "platform-monitoring", head)
	for _, k := range []string{"flux-system", "platform-monitoring"} {
		st := waitCommitStatus(t, gh, repo, head, "kustomization/"+k+"/"+uidPrefix, "success")
		assert.Equal(t, "reconciliation succeeded", st.GetDescription(), k)
	}
	var routes []string
	for _, r := range gh.Requests() {
		routes = append(routes, r.Method+" "+r.Path)
	}
	assert.Contains(t, routes, fmt.Sprintf("POST /api/v3/repos/%s/%s/statuses/%s", owner, repo, head))
	t.Logf("rendered Provider fleetbot-health posted kustomization/{flux-system,platform-monitoring}/%s=success on %s/%s@%.12s to the fake GitHub", uidPrefix, owner, repo, head)
}

// renderRepo runs fleetbot render of control with flags and returns the
// files of repo it rendered.
func (e *environment) renderRepo(t *testing.T, control, repo string, flags ...string) map[string]string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := e.fleetbotRun(t, append([]string{"render", "--control", control, "--out", out}, flags...)...)
	require.Equal(t, 0, code, "fleetbot render:\n%s\n%s", stdout, stderr)
	return readTree(t, filepath.Join(out, repo))
}

// mapFS is a repo tree (path -> content) as a file system.
func mapFS(files map[string]string) fs.FS {
	m := fstest.MapFS{}
	for p, c := range files {
		m[p] = &fstest.MapFile{Data: []byte(c)}
	}
	return m
}

// waitAlertServes returns once notification-controller (events: its event
// endpoint) dispatches events of Kustomization namespace/name to the GitHub
// Provider whose uid starts with uidPrefix. notification-controller matches
// an event against the Alerts its informer cache holds when the event
// arrives and drops it if none matches; the Flux controllers never send it
// again, so a test whose first event could race a fresh Alert (or Provider)
// waits here first. It posts a probe event, as kustomize-controller would,
// at a commit of repo on a branch nothing deploys, again (with a new
// message, which the controller's duplicate-event limit keys on) until the
// probe's commit status reaches the fake.
func waitAlertServes(t *testing.T, gh *githubtest.Server, events, repo, namespace, name, uidPrefix string) {
	t.Helper()
	sha := gh.Commit(owner, repo, "fleetbot-e2e-probe", "Alert probe", map[string]string{"probe.txt": "a commit no Flux applies\n"})
	statusContext := "kustomization/" + name + "/" + uidPrefix
	ctx := t.Context()
	n := 0
	err := poll(ctx, fluxDeadline, fmt.Sprintf("notification-controller dispatching %s events to its Provider (%s on %s/%s@%.12s)", name, statusContext, owner, repo, sha), func() (bool, string, error) {
		n++
		body, err := json.Marshal(map[string]any{
			"involvedObject": map[string]any{"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "namespace": namespace, "name": name},
			"severity":       "info",
			"timestamp":      time.Now().UTC().Format(time.RFC3339),
			"message":        fmt.Sprintf("alert probe %d", n),
			"reason":         "ReconciliationSucceeded",
			"metadata": map[string]string{
				"kustomize.toolkit.fluxcd.io/revision":      "fleetbot-e2e-probe@sha1:" + sha,
				"kustomize.toolkit.fluxcd.io/commit_status": "update",
			},
			"reportingController": "kustomize-controller",
		})
		if err != nil {
			return false, "", err
		}
		resp, err := http.Post(events, "application/json", bytes.NewReader(body))
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		list, _, err := gh.Client().Repositories.ListStatuses(ctx, owner, repo, sha, nil)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, st := range list {
			if st.GetContext() == statusContext {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("probe %d answered %s, %d statuses", n, resp.Status, len(list)), nil
	})
	require.NoError(t, err)
	// The count is not the number of probes dropped: the controller posts a
	// status asynchronously, after answering the probe.
	t.Logf("notification-controller dispatches events of Kustomization %s/%s: status seen after %d probe event(s)", namespace, name, n)
}

// TestHubHealthAlertPostsCommitStatus: for a cluster provisioned in hub mode
// under a rollout in waves, the management repo's Provider and Alert
// <cluster>-health are applied by the management cluster's Flux (a cluster
// of the test's own, bootstrapped from the management repo, which lives on
// the fake GitHub with the cluster repo), and its notification-controller
// posts the hub Kustomizations' commit statuses on the cluster repo's
// commit they applied to the new cluster (a further API server). The
// cluster runs no Flux and its repo's flux/ is never applied: without these
// the wave gate would wait for a status that never comes. No helm-controller
// runs: the HelmRelease is not what is tested here.
func TestHubHealthAlertPostsCommitStatus(t *testing.T) {
	e := env
	ctx := context.Background()
	const (
		mgmtName    = "hub-health"
		mgmtRepo    = "mgmt-" + mgmtName
		cluster     = "edge-health"
		clusterRepo = "cluster-" + cluster
		ns          = hubNamespace
	)
	gh := githubtest.NewServer(t, githubtest.WithTLS())
	ca := strings.ReplaceAll(strings.TrimSpace(string(gh.CertPEM())), "\n", "\n    ")
	workload, workloadURL, workloadPKI := e.startSecondAPIServer(t, cluster)
	mgmt := e.startFluxCluster(t, mgmtName, clusterFlux{notification: true})

	control := filepath.Join(t.TempDir(), "control")
	require.NoError(t, os.CopyFS(filepath.Join(control, "catalog"), os.DirFS(filepath.Join("..", "testdata", "provision", "control", "catalog"))))
	platform := strings.NewReplacer(
		"- name: "+hubMgmt+"\n", "- name: "+mgmtName+"\n",
		"owner: "+hubOwner, "owner: "+owner,
		"secretRef: \"\"", "secretRef: flux-system",
	).Replace(hubPlatform) + "  rollout:\n    waves:\n      - name: edge\n        clusterSelector: {matchLabels: {env: edge}}\n"
	writeFile(t, filepath.Join(control, "platform.yaml"), platform)
	writeFile(t, filepath.Join(control, "clusters", cluster+".yaml"), strings.NewReplacer(
		"name: "+hubCluster, "name: "+cluster, "managementCluster: "+hubMgmt, "managementCluster: "+mgmtName,
	).Replace(hubClusterFile))
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := e.fleetbotRun(t, "render", "--control", control, "--out", out, "--github-url", gh.APIURL())
	require.Equal(t, 0, code, "fleetbot render:\n%s\n%s", stdout, stderr)
	gh.CreateRepo(owner, mgmtRepo, readTree(t, filepath.Join(out, mgmtRepo)))
	gh.CreateRepo(owner, clusterRepo, readTree(t, filepath.Join(out, clusterRepo)))
	clusterHead := gh.Branch(owner, clusterRepo, "main")

	// What the platform admins provide on the management cluster: read
	// credentials for the bootstrap and the cluster repos, and the health
	// Provider's Secret in the provision namespace.
	var secrets strings.Builder
	for _, n := range []string{"flux-system", ns} {
		fmt.Fprintf(&secrets, `apiVersion: v1
kind: Namespace
metadata:
  name: %[1]s
---
apiVersion: v1
kind: Secret
metadata:
  name: flux-system
  namespace: %[1]s
stringData:
  username: x-access-token
  password: %[2]s
  ca.crt: |
    %[3]s
---
`, n, githubtest.DefaultToken, ca)
	}
	fmt.Fprintf(&secrets, `apiVersion: v1
kind: Secret
metadata:
  name: fleetbot-health
  namespace: %[1]s
stringData:
  token: %[2]s
  ca.crt: |
    %[3]s
`, ns, githubtest.DefaultToken, ca)
	require.NoError(t, mgmt.kube.applyYAML(ctx, []byte(secrets.String()), ""))

	boot := gh.Commit(owner, mgmtRepo, "main", "Add Flux sync manifests",
		e.fluxBootstrapFiles(t, gh.URL+"/"+owner+"/"+mgmtRepo+".git", "flux-system", true))
	applyFluxSystem(t, mgmt.kube, mapFS(gh.Files(owner, mgmtRepo, boot)))
	waitAppliedOn(t, mgmt.kube, "flux-system", "flux-system", boot)
	waitAppliedOn(t, mgmt.kube, "flux-system", "provision", boot)
	provider, err := mgmt.kube.get(ctx, "notification.toolkit.fluxcd.io/v1beta3", "Provider", ns, cluster+"-health")
	require.NoError(t, err)
	require.True(t, ownedBy("provision")(provider), "Provider %s/%s-health applied from %s: %v", ns, cluster, mgmtRepo, provider)
	assert.Equal(t, gh.URL+"/"+owner+"/"+clusterRepo, field(provider, "spec", "address"))
	uid, _ := field(provider, "metadata", "uid").(string)
	require.NotEmpty(t, uid)
	uidPrefix := strings.Split(uid, "-")[0]
	waitAlertServes(t, gh, mgmt.events, clusterRepo, ns, cluster+"-apps", uidPrefix)

	// Cluster API's kubeconfig Secret: the hub Kustomizations apply the
	// cluster repo to the new cluster and Flux reports each.
	require.NoError(t, mgmt.kube.apply(ctx, map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": cluster + "-kubeconfig", "namespace": ns},
		"data":     map[string]any{"value": base64.StdEncoding.EncodeToString(embeddedKubeconfig(t, workloadURL, workloadPKI))},
	}, nil))
	for _, k := range []string{cluster + "-platform", cluster + "-apps"} {
		requestReconcileOn(t, mgmt.kube, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, k)
		waitAppliedOn(t, mgmt.kube, ns, k, clusterHead)
		st := waitCommitStatus(t, gh, clusterRepo, clusterHead, "kustomization/"+k+"/"+uidPrefix, "success")
		assert.Equal(t, "reconciliation succeeded", st.GetDescription(), k)
	}
	waitObjectOn(t, workload, "apps/v1", "DaemonSet", "monitoring", "node-exporter", "applied by "+cluster+"-platform", ownedBy(cluster+"-platform"))
	t.Logf("management cluster %s posted kustomization/{%[2]s-platform,%[2]s-apps}/%[3]s=success on %[4]s/%[5]s@%.12[6]s", mgmtName, cluster, uidPrefix, owner, clusterRepo, clusterHead)
}

// readTree reads every file under root as path (slash-separated, relative
// to root) -> content.
func readTree(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = string(data)
		return err
	})
	require.NoError(t, err, "reading %s", root)
	require.NotEmpty(t, files, "%s holds files", root)
	return files
}
