package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// The provisioned cluster of the hub test and its management cluster, in
// the control repo hubControl writes.
const (
	hubCluster     = "edge-e2e"
	hubClusterRepo = "cluster-edge-e2e"
	hubMgmt        = "hub-e2e"
	hubMgmtRepo    = "mgmt-hub-e2e"
	hubNamespace   = "fleetbot-clusters" // the management cluster's default provision namespace
	// hubOwner owns the repos of the hub tests, apart from TestFleetOnFlux's
	// (whose apply would otherwise remove them as gone from its control repo).
	hubOwner = "acme-hub"
)

// hubPlatform is the Platform of the hub test: one management cluster, one
// profile (its chart is never installed here: see TestHubModeAppliesClusterRepo).
const hubPlatform = `apiVersion: fleetbot.io/v1alpha1
kind: Platform
metadata:
  name: acme
spec:
  owner: acme-hub
  admins: [platform]
  defaultBranch: main
  pullRequests:
    branch: fleetbot/sync
    merge: manual
  flux:
    interval: 10m
    secretRef: ""
  components:
    - app: monitoring
      clusterSelector: {}
  managementClusters:
    - name: hub-e2e
  provisionProfiles:
    - name: tiny
      chart:
        helmRepository: https://charts.example.invalid/capi
        name: capi-tiny
        version: 0.1.0
      required: [kubernetesVersion, nodePools]
`

const hubClusterFile = `apiVersion: fleetbot.io/v1alpha1
kind: Cluster
metadata:
  name: edge-e2e
  labels: {env: edge}
spec:
  provision:
    managementCluster: hub-e2e
    profile: tiny
    kubernetesVersion: v1.35.4
    nodePools:
      - {name: workers, count: 1}
    deletionPolicy: Delete
`

// TestHubModeAppliesClusterRepo: the hub-mode Kustomization fleetbot
// renders into a management repo, on the management cluster (the env's
// API server) with the kubeconfig Secret <cluster>-kubeconfig pointing at
// a second API server, applies the provisioned cluster's repo there and
// not on the management cluster. The second API server stands in for the
// cluster Cluster API would create: it is a kube-apiserver of its own (own
// certificates, own port) storing under its own etcd prefix. The
// HelmRelease that would create the cluster is left out (it needs a chart
// repository and Cluster API's CRDs); so is apps/, which depends on it
// through platform only.
func TestHubModeAppliesClusterRepo(t *testing.T) {
	e := env
	ctx := context.Background()
	hub, hubURL, hubPKI := e.startSecondAPIServer(t, "hub")

	control := filepath.Join(t.TempDir(), "control")
	require.NoError(t, os.CopyFS(filepath.Join(control, "catalog"), os.DirFS(filepath.Join("..", "testdata", "provision", "control", "catalog"))))
	writeFile(t, filepath.Join(control, "platform.yaml"), hubPlatform)
	writeFile(t, filepath.Join(control, "clusters", hubCluster+".yaml"), hubClusterFile)
	git(t, control, "init", "-q", "-b", "main")
	git(t, control, "add", "-A")
	git(t, control, "commit", "-q", "-m", "control repo of the hub test")
	code, out, errOut := e.fleetbotRun(t, "apply", "--control", control, "--forge", "local:"+e.forge, "--git-url", e.gitURL)
	require.Equal(t, 0, code, "fleetbot apply:\n%s\n%s", out, errOut)
	clusterHead := e.mergeOf(t, hubOwner, hubClusterRepo)
	e.mergeOf(t, hubOwner, hubMgmtRepo)

	// The management repo's objects for the cluster, as its flux/ entry
	// would apply them, without the HelmRelease.
	mgmt := e.cloneOf(t, hubOwner, hubMgmtRepo)
	nsData, err := os.ReadFile(filepath.Join(mgmt, "provision", "namespace.yaml"))
	require.NoError(t, err)
	require.NoError(t, e.kube.applyYAML(ctx, nsData, ""))
	data, err := os.ReadFile(filepath.Join(mgmt, "provision", "clusters", hubCluster+".yaml"))
	require.NoError(t, err)
	objs, err := splitYAML(data)
	require.NoError(t, err)
	kinds := map[string]bool{}
	for _, obj := range objs {
		kind, _ := obj["kind"].(string)
		kinds[kind+"/"+fmt.Sprint(field(obj, "metadata", "name"))] = true
		if kind == "HelmRelease" {
			continue
		}
		require.NoError(t, e.kube.apply(ctx, obj, nil), "applying %s from %s/provision/clusters/%s.yaml", kind, hubMgmtRepo, hubCluster)
	}
	require.True(t, kinds["HelmRelease/"+hubCluster], "the management repo renders the cluster's HelmRelease: %v", kinds)
	require.True(t, kinds["Kustomization/"+hubCluster+"-platform"], "the management repo renders the hub Kustomization: %v", kinds)

	// What Cluster API would write once the cluster is up.
	kubeconfig := embeddedKubeconfig(t, hubURL, hubPKI)
	require.NoError(t, e.kube.apply(ctx, map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": hubCluster + "-kubeconfig", "namespace": hubNamespace},
		"data":     map[string]any{"value": base64.StdEncoding.EncodeToString(kubeconfig)},
	}, nil))

	// Under the lockdown (--default-service-account=default) kustomize-controller
	// impersonates the management namespace's default ServiceAccount on the
	// new cluster too, where nothing grants it anything yet: the apply is
	// refused until the new cluster binds it (Cluster API's bootstrap would,
	// for example through a ClusterResourceSet).
	sa := "system:serviceaccount:" + hubNamespace + ":default"
	e.waitRefused(t, hubNamespace, hubCluster+"-platform", clusterHead, "Forbidden", sa)
	require.NoError(t, hub.applyYAML(ctx, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: fleetbot-hub
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {kind: ServiceAccount, name: default, namespace: `+hubNamespace+`}
`), ""))
	p, err := e.kube.objectPath(ctx, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", hubNamespace, hubCluster+"-platform")
	require.NoError(t, err)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, time.Now().Format(time.RFC3339Nano))
	status, body, err := e.kube.raw(ctx, "PATCH", p, []byte(patch), "application/merge-patch+json", nil)
	require.NoError(t, err)
	require.Equal(t, 200, status, "requesting reconcile of Kustomization %s/%s-platform: %s", hubNamespace, hubCluster, body)
	e.waitApplied(t, hubNamespace, hubCluster+"-platform", clusterHead)

	// The cluster repo's platform is on the second API server...
	owner := ownedBy(hubCluster + "-platform")
	err = poll(ctx, fluxDeadline, "DaemonSet monitoring/node-exporter on the second API server", func() (bool, string, error) {
		obj, err := hub.get(ctx, "apps/v1", "DaemonSet", "monitoring", "node-exporter")
		if err != nil {
			return false, err.Error(), nil
		}
		return owner(obj), fmt.Sprint(field(obj, "metadata", "labels")), nil
	})
	require.NoError(t, err)
	ns, err := hub.get(ctx, "v1", "Namespace", "", "monitoring")
	require.NoError(t, err)
	assert.True(t, owner(ns), "Namespace monitoring on the second API server, applied by %s-platform: %v", hubCluster, ns)
	// ... and not on the management cluster (another test may apply the
	// same catalog there, never through this Kustomization).
	for _, o := range []struct{ apiVersion, kind, namespace, name string }{
		{"v1", "Namespace", "", "monitoring"},
		{"apps/v1", "DaemonSet", "monitoring", "node-exporter"},
	} {
		obj, err := e.kube.get(ctx, o.apiVersion, o.kind, o.namespace, o.name)
		require.NoError(t, err)
		assert.False(t, owner(obj), "%s %s/%s on the management cluster must not come from %s-platform", o.kind, o.namespace, o.name, hubCluster)
	}
	t.Logf("hub Kustomization %s/%s-platform applied %s@%.12s on %s", hubNamespace, hubCluster, hubClusterRepo, clusterHead, hubURL)
}

// startSecondAPIServer starts another kube-apiserver from the env's binary
// on the env's etcd under its own prefix, with its own certificates and
// port, and returns a client for it, its URL and its certificates. It is
// stopped when the test ends.
func (e *environment) startSecondAPIServer(t *testing.T, name string) (*kubeClient, string, *pki) {
	t.Helper()
	p2, err := newPKI(e.path("pki-" + name))
	require.NoError(t, err)
	port, err := freePort()
	require.NoError(t, err)
	proc, err := e.spawn("kube-apiserver-"+name, e.bin("kube-apiserver"), []string{
		"--etcd-servers=" + e.etcdURL, "--etcd-prefix=/fleetbot-e2e-" + name,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + p2.serverCert, "--tls-private-key-file=" + p2.serverKey,
		"--client-ca-file=" + p2.caCert,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p2.saPub, "--service-account-signing-key-file=" + p2.saKey,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { stopProcesses(proc) })
	url := "https://127.0.0.1:" + strconv.Itoa(port)
	kube, err := newKubeClient(url, p2)
	require.NoError(t, err)
	err = poll(context.Background(), fluxDeadline, "second kube-apiserver ("+name+") /readyz", func() (bool, string, error) {
		if err := proc.exited(); err != nil {
			return false, "", err
		}
		code, body, err := kube.raw(context.Background(), "GET", "/readyz", nil, "", nil)
		return err == nil && code == 200, fmt.Sprint(code, " ", string(body), err), nil
	})
	require.NoError(t, err)
	return kube, url, p2
}

// embeddedKubeconfig is an admin kubeconfig for server with the
// certificates inline, as Cluster API writes into <cluster>-kubeconfig.
func embeddedKubeconfig(t *testing.T, server string, p *pki) []byte {
	t.Helper()
	read := func(path string) []byte {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		return data
	}
	cfg := map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "hub",
		"clusters": []any{map[string]any{"name": "hub", "cluster": map[string]any{
			"server": server, "certificate-authority-data": base64.StdEncoding.EncodeToString(read(p.caCert)),
		}}},
		"users": []any{map[string]any{"name": "admin", "user": map[string]any{
			"client-certificate-data": base64.StdEncoding.EncodeToString(read(p.adminCert)),
			"client-key-data":         base64.StdEncoding.EncodeToString(read(p.adminKey)),
		}}},
		"contexts": []any{map[string]any{"name": "hub", "context": map[string]any{"cluster": "hub", "user": "admin"}}},
	}
	data, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	require.False(t, strings.Contains(string(data), p.caCert), "the kubeconfig embeds its certificates")
	return data
}

// mergeOf is merge for a repo of another owner than the package's.
func (e *environment) mergeOf(t *testing.T, repoOwner, repo string) string {
	t.Helper()
	bare := filepath.Join(e.forge, repoOwner, repo+".git")
	git(t, bare, "merge-base", "--is-ancestor", "refs/heads/main", "refs/heads/fleetbot/sync")
	head := git(t, bare, "rev-parse", "refs/heads/fleetbot/sync")
	git(t, bare, "update-ref", "refs/heads/main", head)
	return head
}

// cloneOf is clone for a repo of another owner than the package's.
func (e *environment) cloneOf(t *testing.T, repoOwner, repo string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), repo)
	git(t, e.dir, "clone", "-q", filepath.Join(e.forge, repoOwner, repo+".git"), dir)
	return dir
}
