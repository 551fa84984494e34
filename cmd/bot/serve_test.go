package main

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/serve"
	"github.com/fleetbot-io/fleetbot/internal/serve/servetest"
)

const serveSecret = "webhook-secret-for-tests"

// appliedOK is serve's count of the apply jobs that succeeded. The tests of serve's behaviour
// are internal/serve's; cmd/bot's test what the command wires around it, with the helpers they
// share (internal/serve/servetest).
const appliedOK = servetest.AppliedOK

// TestDeployBase builds deploy/base with kustomize and checks that it
// configures serve the way serve reads its configuration.
func TestDeployBase(t *testing.T) {
	t.Parallel()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join("..", "..", "deploy", "base"))
	require.NoError(t, err)
	var deployment appsv1.Deployment
	var service corev1.Service
	var config corev1.ConfigMap
	var pdb policyv1.PodDisruptionBudget
	var role rbacv1.Role
	var binding rbacv1.RoleBinding
	kinds := map[string]bool{}
	for _, r := range res.Resources() {
		kinds[r.GetKind()] = true
		b, err := r.MarshalJSON()
		require.NoError(t, err)
		into := map[string]any{"Deployment": &deployment, "Service": &service, "ConfigMap": &config,
			"PodDisruptionBudget": &pdb, "Role": &role, "RoleBinding": &binding}[r.GetKind()]
		if into != nil {
			require.NoError(t, json.Unmarshal(b, into))
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "Secret", "ConfigMap", "Deployment", "Service", "PodDisruptionBudget", "Role", "RoleBinding"} {
		assert.True(t, kinds[k], "deploy/base has a %s", k)
	}
	assert.NotEmpty(t, service.Spec.Selector)
	assert.Equal(t, deployment.Spec.Selector.MatchLabels, service.Spec.Selector)

	// Three replicas on Leases, replaced one at a time, at most one down by a disruption.
	assert.Equal(t, int32(3), *deployment.Spec.Replicas)
	assert.Equal(t, appsv1.RollingUpdateDeploymentStrategyType, deployment.Spec.Strategy.Type)
	assert.Equal(t, deployment.Spec.Selector.MatchLabels, pdb.Spec.Selector.MatchLabels, "the budget selects fleetbot's pods")
	assert.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue())
	// RBAC: Leases in fleetbot's own namespace (a Role, not a ClusterRole), nothing else.
	assert.Equal(t, "fleetbot", role.Namespace)
	require.Len(t, role.Rules, 1)
	assert.Equal(t, []string{"coordination.k8s.io"}, role.Rules[0].APIGroups)
	assert.Equal(t, []string{"leases"}, role.Rules[0].Resources)
	assert.ElementsMatch(t, []string{"get", "list", "watch", "create", "update"}, role.Rules[0].Verbs)
	assert.Empty(t, role.Rules[0].ResourceNames)
	assert.Equal(t, role.Name, binding.RoleRef.Name)
	assert.Equal(t, "Role", binding.RoleRef.Kind)
	require.Len(t, binding.Subjects, 1)
	assert.Equal(t, deployment.Spec.Template.Spec.ServiceAccountName, binding.Subjects[0].Name)
	// The replica's identity, address and namespace come from the downward API.
	fields := map[string]string{}
	for _, e := range deployment.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			fields[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	assert.Equal(t, map[string]string{"FLEETBOT_REPLICAS_FROM_LEASES": "metadata.namespace", "POD_NAME": "metadata.name",
		"POD_IP": "status.podIP", "POD_UID": "metadata.uid"}, fields)

	pod := deployment.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.True(t, *pod.SecurityContext.RunAsNonRoot)
	assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem)
	assert.Equal(t, "serve", c.Args[0])
	assert.Equal(t, config.Name, c.EnvFrom[0].ConfigMapRef.Name, "the generated (hashed) ConfigMap name is referenced")

	// Every FLEETBOT_* variable the manifests set is one serve reads.
	known := map[string]bool{"FLEETBOT_APP_ID": true, "FLEETBOT_APP_KEY_FILE": true, "FLEETBOT_WEBHOOK_SECRET": true}
	a := &frontend{}
	serveCmd := a.serveCommand()
	serveCmd.Flags().VisitAll(func(f *pflag.Flag) {
		known["FLEETBOT_"+strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))] = true
	})
	known["FLEETBOT_LOG_LEVEL"] = true
	for _, v := range []string{"POD_NAME", "POD_IP", "POD_UID"} { // replicasFromEnv: the downward API
		known[v] = true
	}
	vars := map[string]bool{}
	for k := range config.Data {
		vars[k] = true
	}
	for _, e := range c.Env {
		vars[e.Name] = true
	}
	for v := range vars {
		assert.True(t, known[v], "%s is read by fleetbot serve", v)
	}
	for _, v := range []string{"FLEETBOT_APP_ID", "FLEETBOT_CONTROL_REPO", "FLEETBOT_APP_KEY_FILE", "FLEETBOT_WEBHOOK_SECRET_FILE"} {
		assert.True(t, vars[v], "deploy/base sets %s", v)
	}
}

// TestAppManifestSubscribesToHandledEvents checks app.yml against the
// handlers: every event serve acts on is subscribed to (installation events
// come unasked), and nothing else.
func TestAppManifestSubscribesToHandledEvents(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "app.yml"))
	require.NoError(t, err)
	var manifest struct {
		Name           string            `json:"name"`
		HookAttributes map[string]any    `json:"hook_attributes"`
		Permissions    map[string]string `json:"default_permissions"`
		Events         []string          `json:"default_events"`
	}
	require.NoError(t, yaml.Unmarshal(b, &manifest))
	var handled []string
	for _, h := range ingress.Handlers(ingress.HandlerConfig{}) {
		for _, ev := range h.Handles() {
			if !strings.HasPrefix(ev, "installation") {
				handled = append(handled, ev)
			}
		}
	}
	slices.Sort(handled)
	events := slices.Clone(manifest.Events)
	slices.Sort(events)
	assert.Equal(t, handled, events)
	assert.Equal(t, map[string]string{"metadata": "read", "contents": "write", "pull_requests": "write", "checks": "write",
		"administration": "write", "members": "read", "statuses": "write"}, manifest.Permissions)
	assert.Equal(t, true, manifest.HookAttributes["active"])
}

func TestServeConfigErrors(t *testing.T) {
	for _, v := range []string{"FLEETBOT_CONTROL_REPO", "FLEETBOT_WEBHOOK_SECRET_FILE", "FLEETBOT_WEBHOOK_SECRET", "FLEETBOT_APP_ID",
		"FLEETBOT_APP_KEY_FILE", "FLEETBOT_APP_KEY", "GITHUB_TOKEN", "FLEETBOT_RESYNC_INTERVAL"} {
		t.Setenv(v, "")
		require.NoError(t, os.Unsetenv(v))
	}
	secret := filepath.Join(t.TempDir(), "secret")
	require.NoError(t, os.WriteFile(secret, []byte("s3cret\n"), 0o600))

	code, _, stderr := cli(t, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `--control-repo "": want OWNER/NAME`)

	t.Setenv("FLEETBOT_CONTROL_REPO", "acme/control")
	code, _, stderr = cli(t, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no webhook secret")

	t.Setenv("FLEETBOT_WEBHOOK_SECRET_FILE", secret)
	t.Setenv("GITHUB_TOKEN", "ghp_x")
	code, _, stderr = cli(t, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "serve needs a GitHub App")
	assert.NotContains(t, stderr, "ghp_x")

	code, _, stderr = cli(t, "serve", "--shard", "3/3")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "--shard: shard 3/3: want 0 <= index < count")
	code, _, stderr = cli(t, "serve", "--shard", "two")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `--shard: shard "two": want INDEX/COUNT, e.g. 0/3`)

	t.Setenv("FLEETBOT_RESYNC_INTERVAL", "soon")
	code, _, stderr = cli(t, "serve")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `FLEETBOT_RESYNC_INTERVAL="soon"`)
}

// TestAttackSlowlorisHoldsServeConnections: a slow client (slowloris) cannot hold serve's connections
// open: headers, bodies, answers and idle connections all have a deadline, headers a size.
func TestAttackSlowlorisHoldsServeConnections(t *testing.T) {
	t.Parallel()
	hs := serve.NewHTTPServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler), serve.HTTPLimits{})
	assert.Equal(t, 10*time.Second, hs.ReadHeaderTimeout)
	assert.Equal(t, 30*time.Second, hs.ReadTimeout)
	assert.Equal(t, 30*time.Second, hs.WriteTimeout)
	assert.Equal(t, 2*time.Minute, hs.IdleTimeout)
	assert.Equal(t, 64<<10, hs.MaxHeaderBytes)
}

// TestReplicasFromLeasesNeedsThePod: --replicas-from-leases without the downward API's pod name
// or IP says which variable to set; without the flag nothing of Kubernetes is read.
func TestReplicasFromLeasesNeedsThePod(t *testing.T) {
	t.Setenv("POD_NAME", "")
	t.Setenv("POD_IP", "")
	r, err := replicasFromEnv("")
	require.NoError(t, err)
	assert.Nil(t, r, "off by default: one replica, no Kubernetes access")
	_, err = replicasFromEnv("fleetbot")
	assert.ErrorContains(t, err, "POD_NAME is not set")
	t.Setenv("POD_NAME", "fleetbot-7d9f-abcde")
	_, err = replicasFromEnv("fleetbot")
	assert.ErrorContains(t, err, `POD_IP "": want the pod's IP`)
	t.Setenv("POD_IP", "10.1.2.3")
	t.Setenv("POD_UID", "0b4c-uid")
	r, err = replicasFromEnv("fleetbot")
	require.NoError(t, err)
	assert.Equal(t, "fleetbot", r.Namespace)
	assert.Equal(t, "fleetbot-7d9f-abcde", r.Identity)
	assert.Equal(t, "10.1.2.3", r.IP.String())
	assert.Equal(t, "0b4c-uid", r.PodUID)
}
