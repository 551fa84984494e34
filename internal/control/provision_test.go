package control

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// provisionPlatform is the valid fixture's platform.yaml with a management
// cluster (line 17) and two profiles: aws (line 19) and metal (line 25).
const provisionPlatform = `apiVersion: fleetbot.io/v1alpha1
kind: Platform
metadata: {name: acme}
spec:
  owner: acme
  admins: [platform]
  pullRequests:
    labels: [fleetbot]
  components:
    - app: monitoring
      clusterSelector: {}
    - app: metallb
      clusterSelector:
        matchLabels: {network: metal}
      values: {metallb_speaker_tolerations: "false"}
  managementClusters:
    - name: hub-eu
  provisionProfiles:
    - name: aws
      chart:
        helmRepository: https://charts.example.com/capi
        name: capi-aws
        version: 1.4.2
      required: [kubernetesVersion, region, nodePools, sshKeyName]
    - name: metal
      chart:
        ociRepository: oci://ghcr.io/acme/charts/capi-metal
        version: 0.9.0
`

// provisionedCluster is a cluster file with spec.provision starting on line 6.
func provisionedCluster(name, provision string) string {
	return "apiVersion: fleetbot.io/v1alpha1\nkind: Cluster\nmetadata:\n  name: " + name + "\nspec:\n  provision:\n" + provision
}

const awsProvision = `    managementCluster: hub-eu
    profile: aws
    kubernetesVersion: v1.36.1
    region: eu-west-1
    nodePools:
      - {name: workers, count: 3, size: m5.large}
    values: {sshKeyName: ops, spot: true}
`

func TestProvisionValid(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{
		"platform.yaml":           provisionPlatform,
		"clusters/prod-eu-2.yaml": provisionedCluster("prod-eu-2", awsProvision),
	}))
	require.NoError(t, err)
	p := repo.Cluster("prod-eu-2").Spec.Provision
	require.NotNil(t, p)
	assert.Equal(t, "hub-eu", p.ManagementCluster)
	assert.Equal(t, DeletionRetain, p.Policy(), "Retain is the default")
	require.Len(t, p.NodePools, 1)
	assert.Equal(t, 3, *p.NodePools[0].Count)
	assert.Equal(t, Values{"sshKeyName": "ops", "spot": "true"}, p.Values)
	assert.Equal(t, "mgmt-hub-eu", repo.ManagementRepo("hub-eu"))
	assert.Equal(t, DefaultProvisionNamespace, repo.ManagementCluster("hub-eu").ProvisionNamespace())
	assert.Len(t, repo.Provisioned("hub-eu"), 1)
	assert.Equal(t, "oci://ghcr.io/acme/charts/capi-metal", repo.ProvisionProfile("metal").Chart.OCIRepository)
}

func TestProvisionBadInput(t *testing.T) {
	replace := func(old, new string) string { return strings.Replace(awsProvision, old, new, 1) }
	platform := func(old, new string) string { return strings.Replace(provisionPlatform, old, new, 1) }
	tests := []struct {
		name     string
		platform string
		cluster  string
		want     want
	}{
		{name: "unknown management cluster", cluster: replace("hub-eu", "hub-us"),
			want: want{pos: "clusters/prod-eu-2.yaml:7", msg: `unknown management cluster "hub-us"`, hint: "use one of hub-eu"}},
		{name: "unknown profile", cluster: replace("profile: aws", "profile: gcp"),
			want: want{pos: "clusters/prod-eu-2.yaml:8", msg: `unknown provision profile "gcp"`, hint: "use one of aws, metal"}},
		{name: "missing required typed value", cluster: replace("    region: eu-west-1\n", ""),
			want: want{pos: "clusters/prod-eu-2.yaml:6", msg: "profile aws requires region, which is not set", hint: "set spec.provision.region"}},
		{name: "missing required chart value", cluster: replace("sshKeyName: ops, ", ""),
			want: want{pos: "clusters/prod-eu-2.yaml:6", msg: "profile aws requires sshKeyName", hint: "set spec.provision.values.sshKeyName"}},
		{name: "invalid Kubernetes version", cluster: replace("v1.36.1", "1.36"),
			want: want{pos: "clusters/prod-eu-2.yaml:9", msg: `invalid Kubernetes version "1.36"`, hint: "v1.x.y"}},
		{name: "negative node count", cluster: replace("count: 3", "count: -2"),
			want: want{pos: "clusters/prod-eu-2.yaml:12", msg: "node pool workers: count -2 is negative", hint: "0 or more"}},
		{name: "node pool without count", cluster: replace("count: 3, ", ""),
			want: want{pos: "clusters/prod-eu-2.yaml:12", msg: "node pool workers has no count"}},
		{name: "duplicate node pool", cluster: replace("      - {name: workers, count: 3, size: m5.large}\n", "      - {name: workers, count: 3}\n      - {name: workers, count: 1}\n"),
			want: want{pos: "clusters/prod-eu-2.yaml:13", msg: `node pool "workers" is declared twice`}},
		{name: "bad deletion policy", cluster: awsProvision + "    deletionPolicy: Orphan\n",
			want: want{pos: "clusters/prod-eu-2.yaml:14", msg: `invalid deletionPolicy "Orphan"`, hint: "Retain"}},
		{name: "non-scalar value", cluster: replace("spot: true", "spot: [a]"),
			want: want{pos: "clusters/prod-eu-2.yaml:13", msg: "expected a string"}},
		{name: "reserved value name", cluster: replace("spot: true", "region: x"),
			want: want{pos: "clusters/prod-eu-2.yaml:13", msg: `value "region" is reserved`}},
		{name: "typo in provision field", cluster: replace("region:", "regoin:"),
			want: want{pos: "clusters/prod-eu-2.yaml:10", msg: `unknown field "regoin"`, hint: `did you mean "region"?`}},
		{name: "unpinned chart version (range)", platform: platform("version: 1.4.2", `version: ">=1.4.0"`),
			want: want{pos: "platform.yaml:23", msg: `chart version ">=1.4.0" is not pinned`, hint: "exact version"}},
		{name: "unpinned chart version (partial)", platform: platform("version: 0.9.0", "version: 0.9.x"),
			want: want{pos: "platform.yaml:28", msg: `chart version "0.9.x" is not pinned`}},
		{name: "chart without source", platform: platform("        ociRepository: oci://ghcr.io/acme/charts/capi-metal\n", ""),
			want: want{pos: "platform.yaml:26", msg: "names no chart source"}},
		{name: "helm repository without chart name", platform: platform("        name: capi-aws\n", ""),
			want: want{pos: "platform.yaml:20", msg: "name is required with helmRepository"}},
		{name: "OCI URL without oci://", platform: platform("oci://ghcr.io", "https://ghcr.io"),
			want: want{pos: "platform.yaml:27", msg: "invalid ociRepository URL"}},
		{name: "duplicate profile", platform: platform("    - name: metal", "    - name: aws"),
			want: want{pos: "platform.yaml:25", msg: `provision profile "aws" is declared twice (first at platform.yaml:19)`}},
		{name: "management repo collides with a cluster repo", platform: platform("    - name: hub-eu\n", "    - name: hub-eu\n      repo: cluster-prod-eu-1\n"),
			cluster: awsProvision,
			want:    want{pos: "platform.yaml:18", msg: "management cluster hub-eu and cluster prod-eu-1 both map to repo acme/cluster-prod-eu-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"platform.yaml": provisionPlatform, "clusters/prod-eu-2.yaml": provisionedCluster("prod-eu-2", awsProvision)}
			if tc.platform != "" {
				files["platform.yaml"] = tc.platform
			}
			if tc.cluster != "" {
				files["clusters/prod-eu-2.yaml"] = provisionedCluster("prod-eu-2", tc.cluster)
			}
			is := loadIssues(t, fixture(t, files), tc.name)
			assertIssue(t, is, tc.name, tc.want)
		})
	}
}

func TestProvisionedClusterInWorkspaceWarns(t *testing.T) {
	repo, err := Load(fixture(t, map[string]string{
		"platform.yaml":           provisionPlatform,
		"clusters/prod-eu-2.yaml": strings.Replace(provisionedCluster("prod-eu-2", awsProvision), "spec:\n", "spec:\n  workspace: payments\n", 1),
	}))
	require.NoError(t, err)
	var found bool
	for _, w := range repo.Warnings {
		if w.Pos.String() == "clusters/prod-eu-2.yaml:6" && strings.Contains(w.Message, "provisioned in hub mode, which does not apply its workspace payments") {
			found = true
		}
	}
	assert.True(t, found, "warnings: %v", repo.Warnings)
}
