package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManagementRepoBootstrapsFlux: a management cluster bootstrapped from
// the management repo fleetbot renders (flux bootstrap --path=flux of
// mgmt-<name>, served by the env's git server) reconciles everything from
// that repo with real controllers and no object written by hand but what
// Cluster API would write: flux/fleetbot.yaml's Kustomization provision
// applies provision/, helm-controller installs the provisioned cluster's
// HelmRelease (the test chart from a Helm repository on 127.0.0.1, which
// creates the Cluster API Cluster), and once the kubeconfig Secret exists the
// hub Kustomizations apply the cluster repo's platform/ and apps/ to the new
// cluster (a third API server).
//
// The management cluster is one of the test's own (startFluxCluster): it
// runs Flux without the multi-tenancy lockdown, as flux bootstrap installs
// it from a management repo, which scaffolds no lockdown (its README says
// why).
func TestManagementRepoBootstrapsFlux(t *testing.T) {
	e := env
	ctx := context.Background()
	const (
		repoOwner = "acme-boot"
		mgmtName  = "hub-boot"
		mgmtRepo  = "mgmt-" + mgmtName
		cluster   = "edge-boot"
		ns        = hubNamespace // the management cluster's default provision namespace
	)
	workload, workloadURL, workloadPKI := e.startSecondAPIServer(t, cluster)
	mgmt := e.startFluxCluster(t, mgmtName, clusterFlux{helm: true})
	// The management cluster runs Cluster API: its CRDs are there (no
	// controller is needed to create its objects).
	crd, err := os.ReadFile(filepath.Join("..", "testdata", "crds", "cluster-api", "cluster.x-k8s.io_clusters.yaml"))
	require.NoError(t, err)
	require.NoError(t, mgmt.kube.applyYAML(ctx, crd, ""))
	require.NoError(t, poll(ctx, fluxDeadline, "Cluster API Cluster CRD served on "+mgmtName, func() (bool, string, error) {
		mgmt.kube.forgetDiscovery()
		_, err := mgmt.kube.resourceFor(ctx, "cluster.x-k8s.io/v1beta2", "Cluster")
		return err == nil, fmt.Sprint(err), nil
	}))
	chartURL := serveHelmRepository(t, chartFiles(t, capiChartDir))

	control := filepath.Join(t.TempDir(), "control")
	require.NoError(t, os.CopyFS(filepath.Join(control, "catalog"), os.DirFS(filepath.Join("..", "testdata", "provision", "control", "catalog"))))
	platform := strings.NewReplacer(
		"- name: "+hubMgmt+"\n", "- name: "+mgmtName+"\n",
		"https://charts.example.invalid/capi", chartURL,
		"owner: "+hubOwner, "owner: "+repoOwner,
	).Replace(hubPlatform)
	require.Contains(t, platform, chartURL)
	writeFile(t, filepath.Join(control, "platform.yaml"), platform)
	writeFile(t, filepath.Join(control, "clusters", cluster+".yaml"), strings.NewReplacer(
		"name: "+hubCluster, "name: "+cluster, "managementCluster: "+hubMgmt, "managementCluster: "+mgmtName,
	).Replace(hubClusterFile))
	git(t, control, "init", "-q", "-b", "main")
	git(t, control, "add", "-A")
	git(t, control, "commit", "-q", "-m", "control repo of the management bootstrap test")
	code, out, errOut := e.fleetbotRun(t, "apply", "--control", control, "--forge", "local:"+e.forge, "--git-url", e.gitURL)
	require.Equal(t, 0, code, "fleetbot apply:\n%s\n%s", out, errOut)
	clusterHead := e.mergeOf(t, repoOwner, "cluster-"+cluster)
	e.mergeOf(t, repoOwner, mgmtRepo)

	// flux bootstrap git --path=flux of the management repo: the repo has no
	// flux/flux-system/kustomization.yaml (fleetbot scaffolds none there), so
	// bootstrap writes its own.
	dir := e.cloneOf(t, repoOwner, mgmtRepo)
	_, err = os.Stat(filepath.Join(dir, "flux", "flux-system", "kustomization.yaml"))
	require.ErrorIs(t, err, os.ErrNotExist, "a management repo has no lockdown scaffold")
	for name, content := range e.fluxBootstrapFiles(t, e.gitURL+"/"+repoOwner+"/"+mgmtRepo+".git", "", true) {
		writeFile(t, filepath.Join(dir, filepath.FromSlash(name)), content)
	}
	bootHead := push(t, dir, "Add Flux sync manifests")
	applyFluxSystem(t, mgmt.kube, os.DirFS(dir))

	// Flux applies flux/ (fleetbot.yaml's Kustomization provision), which
	// applies provision/.
	waitAppliedOn(t, mgmt.kube, "flux-system", "flux-system", bootHead)
	waitAppliedOn(t, mgmt.kube, "flux-system", "provision", bootHead)
	fromRepo := ownedBy("provision")
	for _, o := range []struct{ apiVersion, kind, namespace, name string }{
		{"v1", "Namespace", "", ns},
		{"source.toolkit.fluxcd.io/v1", "HelmRepository", ns, "tiny"},
		{"helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, cluster},
		{"source.toolkit.fluxcd.io/v1", "GitRepository", ns, "cluster-" + cluster},
		{"kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, cluster + "-platform"},
		{"kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, cluster + "-apps"},
	} {
		obj, err := mgmt.kube.get(ctx, o.apiVersion, o.kind, o.namespace, o.name)
		require.NoError(t, err)
		assert.True(t, fromRepo(obj), "%s %s/%s on %s is applied by Kustomization provision from %s: %v", o.kind, o.namespace, o.name, mgmtName, mgmtRepo, field(obj, "metadata", "labels"))
	}

	// helm-controller installs the profile's chart: the Cluster API Cluster
	// exists with the cluster's values.
	err = poll(ctx, fluxDeadline, "HelmRelease "+ns+"/"+cluster+" Ready on "+mgmtName, func() (bool, string, error) {
		obj, err := mgmt.kube.get(ctx, "helm.toolkit.fluxcd.io/v2", "HelmRelease", ns, cluster)
		if err != nil || obj == nil {
			return false, fmt.Sprint("not found ", err), nil
		}
		st, reason, msg := condition(obj, "Ready")
		return st == "True", fmt.Sprintf("Ready=%s %s: %s", st, reason, msg), nil
	})
	require.NoError(t, err)
	capi, err := mgmt.kube.get(ctx, "cluster.x-k8s.io/v1beta2", "Cluster", ns, cluster)
	require.NoError(t, err)
	require.NotNil(t, capi, "the chart's Cluster %s/%s on %s", ns, cluster, mgmtName)
	assert.Equal(t, "v1.35.4", field(capi, "spec", "topology", "version"), "the cluster's values reach the chart")
	pools, _ := field(capi, "spec", "topology", "workers", "machineDeployments").([]any)
	require.Len(t, pools, 1, "one MachineDeployment per node pool")
	assert.Equal(t, "workers", field(pools[0].(map[string]any), "name"))
	assert.EqualValues(t, 1, field(pools[0].(map[string]any), "replicas"))

	// The hub Kustomizations wait for the kubeconfig Secret Cluster API
	// writes once the cluster is up; the test writes it (pointing at the
	// workload API server) and asks for a reconcile instead of waiting for
	// the retry interval.
	err = poll(ctx, fluxDeadline, "Kustomization "+ns+"/"+cluster+"-platform waiting for its kubeconfig", func() (bool, string, error) {
		obj, err := mgmt.kube.get(ctx, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, cluster+"-platform")
		if err != nil || obj == nil {
			return false, fmt.Sprint("not found ", err), nil
		}
		st, reason, msg := condition(obj, "Ready")
		return st == "False" && strings.Contains(msg, cluster+"-kubeconfig"), fmt.Sprintf("Ready=%s %s: %s", st, reason, msg), nil
	})
	require.NoError(t, err)
	require.NoError(t, mgmt.kube.apply(ctx, map[string]any{
		"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"name": cluster + "-kubeconfig", "namespace": ns},
		"data":     map[string]any{"value": base64.StdEncoding.EncodeToString(embeddedKubeconfig(t, workloadURL, workloadPKI))},
	}, nil))
	requestReconcileOn(t, mgmt.kube, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, cluster+"-platform")
	waitAppliedOn(t, mgmt.kube, ns, cluster+"-platform", clusterHead)
	requestReconcileOn(t, mgmt.kube, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", ns, cluster+"-apps")
	waitAppliedOn(t, mgmt.kube, ns, cluster+"-apps", clusterHead)

	// The cluster repo's platform is on the new cluster, not on the
	// management cluster.
	owner := ownedBy(cluster + "-platform")
	waitObjectOn(t, workload, "apps/v1", "DaemonSet", "monitoring", "node-exporter", "applied by "+cluster+"-platform", owner)
	obj, err := mgmt.kube.get(ctx, "apps/v1", "DaemonSet", "monitoring", "node-exporter")
	require.NoError(t, err)
	assert.Nil(t, obj, "the cluster repo's platform must not reach the management cluster")
	t.Logf("management cluster %s bootstrapped from %s/%s@%.12s: HelmRelease %s Ready, Cluster API Cluster created, %s-platform and -apps applied %s@%.12s on %s",
		mgmtName, repoOwner, mgmtRepo, bootHead, cluster, cluster, "cluster-"+cluster, clusterHead, workloadURL)
}
