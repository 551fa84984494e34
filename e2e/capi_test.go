package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capiChartDir is the test provisioning chart (testdata/provision/chart):
// it creates the Cluster API Cluster of the release's values, as a real
// profile chart does (with its infrastructure and control plane objects,
// left out here). internal/fanout validates what it renders against the
// pinned Cluster API CRD offline.
const capiChartDir = "../testdata/provision/chart/capi-tiny"

// chartFiles reads the chart in dir as serveHelmRepository wants it: the
// files by path under the chart's own directory name.
func chartFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		files[filepath.ToSlash(filepath.Join(filepath.Base(dir), rel))] = string(data)
		return err
	})
	require.NoError(t, err, "reading chart %s", dir)
	return files
}

// TestProvisionHelmReleaseCreatesClusterAPIObjects: the HelmRelease and
// HelmRepository fleetbot renders into a management repo for a provisioned
// cluster are applied on a cluster with Cluster API's CRDs (pinned in
// testdata/crds/cluster-api; no Cluster API controller runs); the real
// helm-controller installs the profile's chart from a Helm repository
// served on 127.0.0.1, as the management namespace's default
// ServiceAccount (the lockdown), and the chart's Cluster exists with the
// cluster's values. The API server refuses a Cluster the pinned CRD's
// schema refuses (the same schema internal/fanout checks the chart's
// objects against offline).
func TestProvisionHelmReleaseCreatesClusterAPIObjects(t *testing.T) {
	e := env
	ctx := context.Background()
	const (
		cluster = "edge-capi"
		mgmt    = "hub-capi"
		ns      = "capi-e2e"
	)
	crd, err := os.ReadFile(filepath.Join("..", "testdata", "crds", "cluster-api", "cluster.x-k8s.io_clusters.yaml"))
	require.NoError(t, err)
	require.NoError(t, e.kube.applyYAML(ctx, crd, ""))
	require.NoError(t, poll(ctx, fluxDeadline, "Cluster API Cluster CRD served", func() (bool, string, error) {
		e.kube.forgetDiscovery()
		_, err := e.kube.resourceFor(ctx, "cluster.x-k8s.io/v1beta2", "Cluster")
		return err == nil, fmt.Sprint(err), nil
	}))
	repoURL := serveHelmRepository(t, chartFiles(t, capiChartDir))

	control := filepath.Join(t.TempDir(), "control")
	require.NoError(t, os.CopyFS(filepath.Join(control, "catalog"), os.DirFS(filepath.Join("..", "testdata", "provision", "control", "catalog"))))
	platform := strings.NewReplacer(
		"- name: hub-e2e\n", "- name: "+mgmt+"\n      namespace: "+ns+"\n",
		"https://charts.example.invalid/capi", repoURL,
		"owner: "+hubOwner, "owner: acme-capi",
	).Replace(hubPlatform)
	require.Contains(t, platform, repoURL)
	writeFile(t, filepath.Join(control, "platform.yaml"), platform)
	writeFile(t, filepath.Join(control, "clusters", cluster+".yaml"), strings.NewReplacer(
		"name: edge-e2e", "name: "+cluster, "managementCluster: hub-e2e", "managementCluster: "+mgmt,
	).Replace(hubClusterFile))
	git(t, control, "init", "-q", "-b", "main")
	git(t, control, "add", "-A")
	git(t, control, "commit", "-q", "-m", "control repo of the Cluster API test")
	code, out, errOut := e.fleetbotRun(t, "apply", "--control", control, "--forge", "local:"+e.forge, "--git-url", e.gitURL)
	require.Equal(t, 0, code, "fleetbot apply:\n%s\n%s", out, errOut)
	e.mergeOf(t, "acme-capi", "mgmt-"+mgmt)
	repo := e.cloneOf(t, "acme-capi", "mgmt-"+mgmt)

	// The lockdown: helm-controller installs as the namespace's default
	// ServiceAccount, which the platform team lets manage Cluster API objects.
	e.tenantNamespace(t, ns)
	require.NoError(t, e.kube.applyYAML(ctx, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: cluster-api
rules:
- apiGroups: [cluster.x-k8s.io]
  resources: ["*"]
  verbs: ["*"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: default-cluster-api
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: cluster-api}
subjects:
- {kind: ServiceAccount, name: default, namespace: `+ns+`}
`), ns))
	for _, f := range []string{"provision/sources/tiny.yaml", "provision/clusters/" + cluster + ".yaml"} {
		data, err := os.ReadFile(filepath.Join(repo, f))
		require.NoError(t, err)
		objs, err := splitYAML(data)
		require.NoError(t, err)
		for _, obj := range objs {
			if obj["kind"] == "HelmRelease" || obj["kind"] == "HelmRepository" {
				require.NoError(t, e.kube.apply(ctx, obj, nil), "applying %s from mgmt-%s/%s", obj["kind"], mgmt, f)
			}
		}
	}

	err = poll(ctx, fluxDeadline, "HelmRelease "+ns+"/"+cluster+" Ready", func() (bool, string, error) {
		obj, err := e.kube.get(ctx, "helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, cluster)
		if err != nil || obj == nil {
			return false, fmt.Sprint("not found ", err), nil
		}
		st, reason, msg := condition(obj, "Ready")
		return st == "True", fmt.Sprintf("Ready=%s %s: %s", st, reason, msg), nil
	})
	require.NoError(t, err)
	obj, err := e.kube.get(ctx, "cluster.x-k8s.io/v1beta2", "Cluster", ns, cluster)
	require.NoError(t, err)
	require.NotNil(t, obj, "the chart's Cluster %s/%s", ns, cluster)
	assert.Equal(t, "v1.35.4", field(obj, "metadata", "labels", "kubernetes-version"), "the cluster's values reach the chart")
	assert.Equal(t, "v1.35.4", field(obj, "spec", "topology", "version"))
	assert.Equal(t, "Helm", field(obj, "metadata", "labels", "app.kubernetes.io/managed-by"))

	// The API server validates Cluster API objects with the pinned CRD's
	// schema, as internal/fanout's offline test does: a node pool count as a
	// string, or a name that is no DNS subdomain, is refused.
	for what, md := range map[string]map[string]any{
		"replicas as a string": {"class": "default-worker", "name": "workers", "replicas": "1"},
		"upper-case name":      {"class": "default-worker", "name": "Workers", "replicas": 1},
	} {
		bad := map[string]any{
			"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
			"metadata": map[string]any{"name": "capi-refused", "namespace": ns},
			"spec": map[string]any{"topology": map[string]any{
				"classRef": map[string]any{"name": "tiny"}, "version": "v1.35.4",
				"workers": map[string]any{"machineDeployments": []any{md}},
			}},
		}
		// A create, as kubectl create does: server-side apply would refuse
		// the string earlier, building its typed patch (HTTP 500).
		p, err := e.kube.objectPath(ctx, "cluster.x-k8s.io/v1beta2", "Cluster", ns, "capi-refused")
		require.NoError(t, err)
		body, err := json.Marshal(bad)
		require.NoError(t, err)
		code, resp, err := e.kube.raw(ctx, "POST", path.Dir(p), body, "application/json", nil)
		require.NoError(t, err)
		assert.Equal(t, 422, code, "creating a Cluster with %s: %s", what, resp)
		assert.Contains(t, string(resp), "spec.topology.workers.machineDeployments[0]", "the refusal names the field: %s", resp)
	}
	t.Logf("helm-controller installed capi-tiny from %s: Cluster %s/%s", repoURL, ns, cluster)
}

// serveHelmRepository serves files packaged as one chart (their common
// top directory) in a Helm repository on 127.0.0.1: index.yaml and the
// chart's .tgz. It returns the repository's URL.
func serveHelmRepository(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(content))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	chart := buf.Bytes()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + l.Addr().String()
	index := fmt.Sprintf(`apiVersion: v1
entries:
  capi-tiny:
  - apiVersion: v2
    name: capi-tiny
    version: 0.1.0
    created: "2026-01-01T00:00:00Z"
    urls: [%s/capi-tiny-0.1.0.tgz]
generated: "2026-01-01T00:00:00Z"
`, url)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /index.yaml", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(index)) })
	mux.HandleFunc("GET /capi-tiny-0.1.0.tgz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(chart) })
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return url
}
