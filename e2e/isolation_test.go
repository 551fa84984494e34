package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	rbacvalidation "k8s.io/component-helpers/auth/rbac/validation"
	"sigs.k8s.io/yaml"

	"github.com/fleetbot-io/fleetbot/internal/fanout"
)

// tenantCase is one thing a workspace admin pushes to apps/<file> of the workspace repo that
// check workspace refuses (its output holds check) and the cluster refuses too (the workspace
// Kustomization's Ready message holds every flux string); after checks what is left.
type tenantCase struct {
	name  string
	file  string // apps/<file>
	body  string
	check string // what check workspace says
	flux  []string
	after func(t *testing.T)
}

// absentIn asserts apiVersion kind namespace/name is not on the cluster.
func (e *environment) absentIn(ctx context.Context, apiVersion, kind, namespace, name string) func(t *testing.T) {
	return func(t *testing.T) {
		obj, err := e.kube.get(ctx, apiVersion, kind, namespace, name)
		require.NoError(t, err)
		assert.Nil(t, obj, "%s %s/%s must not exist", kind, namespace, name)
	}
}

// isolationCases are issue 31's attacks, each refused offline by check workspace and on the
// real API server: by Pod Security admission (the workspace Namespace's labels), by RBAC's
// escalation check, and by the tenancy admission policies fleetbot renders.
func (e *environment) isolationCases(ctx context.Context) []tenantCase {
	return []tenantCase{
		{
			// Without privileged: true, which this API server refuses on its own
			// (--allow-privileged defaults to false); check workspace refuses both
			// (TestAttackRootOnTheNode), Pod Security admission the host's namespaces and /.
			name: "pod with the host's namespaces and root filesystem",
			file: "root.yaml",
			body: `apiVersion: v1
kind: Pod
metadata:
  name: root
spec:
  hostPID: true
  hostNetwork: true
  containers:
  - name: shell
    image: alpine
    volumeMounts: [{name: host, mountPath: /host}]
  volumes:
  - {name: host, hostPath: {path: /}}
`,
			check: `violates PodSecurity "restricted:v1.36": host namespaces (hostNetwork=true, hostPID=true)`,
			flux:  []string{"violates PodSecurity", "restricted", "host namespaces", "hostPath"},
			after: e.absentIn(ctx, "v1", "Pod", wsName, "root"),
		},
		{
			name: "RoleBinding to cluster-admin",
			file: "admin.yaml",
			body: `apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: everything
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects:
- {kind: ServiceAccount, name: default}
`,
			check: "binds ClusterRole cluster-admin",
			flux:  []string{"forbidden", "system:serviceaccount:search:search"},
			after: e.absentIn(ctx, "rbac.authorization.k8s.io/v1", "RoleBinding", wsName, "everything"),
		},
		{
			name: "Kustomization decrypting with the controller's identity",
			file: "decrypt.yaml",
			body: `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: decrypt
spec:
  interval: 1m
  path: ./apps
  prune: true
  serviceAccountName: search
  sourceRef: {kind: GitRepository, name: workspace-search}
  decryption: {provider: sops}
`,
			check: "spec.decryption without secretRef.name",
			flux:  []string{"fleetbot-flux-tenancy", "spec.decryption must name secretRef.name, a Secret in namespace search"},
			after: e.absentIn(ctx, "kustomize.toolkit.fluxcd.io/v1", "Kustomization", wsName, "decrypt"),
		},
		{
			name: "kind outside the tenant allowlist",
			file: "agent.yaml",
			body: `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: agent
        image: agent
        securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`,
			check: "kind DaemonSet.apps is not allowed in a workspace repo",
			flux:  []string{"fleetbot-tenant-kinds", "kind DaemonSet.apps is not allowed in a workspace"},
			after: e.absentIn(ctx, "apps/v1", "DaemonSet", wsName, "agent"),
		},
	}
}

// restrictedPodRuns: a pod meeting the restricted level passes check workspace and Flux
// creates it in the workspace namespace (admitted by Pod Security; the node-less cluster never
// schedules it).
func (e *environment) restrictedPodRuns(t *testing.T, dir string) {
	t.Run("restricted pod is admitted", func(t *testing.T) {
		writeFile(t, filepath.Join(dir, "apps", "web.yaml"), `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 10001, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: web
    image: web
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`)
		writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- web.yaml\n")
		code, out, errOut := e.fleetbotRun(t, "check", "workspace", "--dir", dir, "--workspace", wsName)
		require.Equal(t, 0, code, "check workspace:\n%s\n%s", out, errOut)
		sha := push(t, dir, "workspace admin adds a restricted pod")
		e.requestReconcile(t, wsName, "workspace-"+wsName)
		e.waitApplied(t, wsName, "workspace-"+wsName, sha)
		e.waitObject(t, "v1", "Pod", wsName, "web", "admitted", exists)
		ns, err := e.kube.get(context.Background(), "v1", "Namespace", "", wsName)
		require.NoError(t, err)
		assert.Equal(t, "restricted", field(ns, "metadata", "labels", "pod-security.kubernetes.io/enforce"))

		require.NoError(t, os.Remove(filepath.Join(dir, "apps", "web.yaml")))
		writeFile(t, filepath.Join(dir, "apps", "kustomization.yaml"), "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n")
		sha = push(t, dir, "revert the restricted pod")
		e.requestReconcile(t, wsName, "workspace-"+wsName)
		e.waitApplied(t, wsName, "workspace-"+wsName, sha)
	})
}

// TestAdminRulesMatchTheAPIServer: the rules check workspace holds a workspace's Roles to (the
// embedded aggregate-to-admin, -edit and -view roles) are what the API server aggregates into
// ClusterRole admin, the role a workspace's ServiceAccount holds: each covers the other.
func TestAdminRulesMatchTheAPIServer(t *testing.T) {
	e := env
	var live []rbacv1.PolicyRule
	e.waitObject(t, "rbac.authorization.k8s.io/v1", "ClusterRole", "", "admin", "aggregated", func(obj map[string]any) bool {
		if obj == nil {
			return false
		}
		data, err := yaml.Marshal(obj["rules"])
		require.NoError(t, err)
		live = nil
		require.NoError(t, yaml.Unmarshal(data, &live))
		return len(live) > 10 // the aggregation controller has filled it in
	})
	embedded, err := fanout.AdminRules()
	require.NoError(t, err)
	ok, missing := rbacvalidation.Covers(live, embedded)
	assert.True(t, ok, "the API server's admin lacks embedded rules: %v", missing)
	ok, missing = rbacvalidation.Covers(embedded, live)
	assert.True(t, ok, "the embedded rules lack what the API server's admin grants: %v (run scripts/rbac-roles.sh)", missing)
}
