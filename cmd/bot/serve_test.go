package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/serve"
)

const serveSecret = "webhook-secret-for-tests"

// serveEnv is a fake GitHub holding acme/control (the example control repo) and the address
// of a fleetbot serve wired to it, for the tests of what cmd/bot itself does around serve (its
// job process, the front ends agreeing on GHES); the tests of serve's behaviour, with the full
// harness, are internal/serve's.
type serveEnv struct {
	t       *testing.T
	gh      *githubtest.Server
	url     string
	targets []string // target repo names
}

// newGitHub starts a fake GitHub with the org, the teams and acme/control
// holding the example control repo.
func (e *serveEnv) newGitHub(webhooks bool, more ...githubtest.Option) {
	t := e.t
	ghOpts := more
	if webhooks {
		ghOpts = append(ghOpts, githubtest.WithWebhook(e.url+"/webhook", serveSecret))
	}
	e.gh = githubtest.NewServer(t, ghOpts...)

	repo, err := control.LoadDir(exampleControl)
	require.NoError(t, err)
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
	require.NoError(t, err)
	e.gh.CreateOrg("acme")
	teams := map[string]bool{}
	for _, tg := range targets {
		e.targets = append(e.targets, tg.Repo)
		for slug := range tg.Access.Teams {
			teams[slug] = true
		}
	}
	for slug := range teams {
		e.gh.CreateTeam("acme", slug)
	}
	files := map[string]string{}
	require.NoError(t, fs.WalkDir(os.DirFS(exampleControl), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(exampleControl, p))
		files[p] = string(b)
		return err
	}))
	e.gh.CreateRepo("acme", "control", files)
}

// get fetches a path of the service.
func (e *serveEnv) get(path string) (int, string) {
	e.t.Helper()
	resp, err := http.Get(e.url + path)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, string(b)
}

// metric returns the value of one series ("name{labels}" as exposed), 0 if absent.
func (e *serveEnv) metric(series string) float64 {
	e.t.Helper()
	_, body := e.get("/metrics")
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(e.t, err, line)
			return f
		}
	}
	return 0
}

// eventually polls cond every 10ms for up to 2 minutes (a deadline for a hang, generous under
// load).
func (e *serveEnv) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *serveEnv) waitMetric(series string, atLeast float64) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s >= %v", series, atLeast), func() bool { return e.metric(series) >= atLeast })
}

// idle waits until no job waits or runs.
func (e *serveEnv) idle() {
	e.t.Helper()
	e.eventually("an idle queue", func() bool {
		return e.metric("fleetbot_queue_depth") == 0 && e.metric("fleetbot_jobs_in_flight") == 0
	})
}

const appliedOK = `fleetbot_job_duration_seconds_count{kind="apply",outcome="ok"}`

// deliver posts a delivery signed with secret ("" leaves it unsigned) and
// returns the status.
func (e *serveEnv) deliver(event, id string, body []byte, secret string) int {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url+"/webhook", bytes.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	if secret != "" {
		req.Header.Set("X-Hub-Signature-256", githubtest.Sign(secret, body))
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func encodeJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

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
	kinds := map[string]bool{}
	for _, r := range res.Resources() {
		kinds[r.GetKind()] = true
		b, err := r.MarshalJSON()
		require.NoError(t, err)
		switch r.GetKind() {
		case "Deployment":
			require.NoError(t, json.Unmarshal(b, &deployment))
		case "Service":
			require.NoError(t, json.Unmarshal(b, &service))
		case "ConfigMap":
			require.NoError(t, json.Unmarshal(b, &config))
		}
	}
	for _, k := range []string{"Namespace", "ServiceAccount", "Secret", "ConfigMap", "Deployment", "Service"} {
		assert.True(t, kinds[k], "deploy/base has a %s", k)
	}
	assert.NotEmpty(t, service.Spec.Selector)
	assert.Equal(t, deployment.Spec.Selector.MatchLabels, service.Spec.Selector)

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
		"administration": "write", "members": "read", "statuses": "read"}, manifest.Permissions)
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
