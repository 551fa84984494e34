package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/serve"
	"github.com/fleetbot-io/fleetbot/internal/serve/servetest"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

const secret = "library-secret"

// exampleControl is the example control repo the CLI's tests use too.
var exampleControl = filepath.Join("..", "..", "testdata", "control")

// fakeGitHub is a fake GitHub holding the org acme, its teams and acme/control with the
// example control repo; opts configure it further (WithWebhook: it delivers its events).
func fakeGitHub(t *testing.T, opts ...githubtest.Option) *githubtest.Server {
	t.Helper()
	gh, _ := servetest.NewGitHub(t, exampleControl, nil, opts...)
	return gh
}

// get fetches a path of the server.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// jobs is a slog.Handler that counts the service's finished apply jobs ("job done" records of
// kind apply) and signals every finished job: the test waits on what the service did, not on
// time.
type jobs struct {
	attrs   []slog.Attr
	applies *atomic.Int64
	done    chan struct{} // one pending signal; waiters re-check their condition
}

func newJobs() *jobs { return &jobs{applies: &atomic.Int64{}, done: make(chan struct{}, 1)} }

func (j *jobs) Enabled(context.Context, slog.Level) bool { return true }

func (j *jobs) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "job done" {
		return nil
	}
	kind := ""
	for _, a := range j.attrs {
		if a.Key == "kind" {
			kind = a.Value.String()
		}
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "kind" {
			kind = a.Value.String()
		}
		return true
	})
	if kind == string(webhook.KindApply) {
		j.applies.Add(1)
	}
	select {
	case j.done <- struct{}{}:
	default:
	}
	return nil
}

func (j *jobs) WithAttrs(as []slog.Attr) slog.Handler {
	c := *j
	c.attrs = append(slices.Clone(j.attrs), as...)
	return &c
}

func (j *jobs) WithGroup(string) slog.Handler { return j }

// waitFor re-checks cond each time a job finishes until it holds; the deadline only turns a
// hang into a failure.
func (j *jobs) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	hang := time.NewTimer(2 * time.Minute)
	defer hang.Stop()
	for !cond() {
		select {
		case <-j.done:
		case <-hang.C:
			t.Fatalf("no job made this true: %s", what)
		}
	}
}

// deliver posts a delivery signed with key and returns the answer's status.
func deliver(t *testing.T, base, event, id string, body []byte, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/webhook", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", githubtest.Sign(key, body))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestServerServesASignedDelivery builds serve as a library from one Config against the fake
// GitHub, and serves one signed push to the control repo: acknowledged, applied, and the
// affected cluster repo's pull request carries the pushed change. A delivery signed with
// another secret is refused.
func TestServerServesASignedDelivery(t *testing.T) {
	t.Parallel()
	gh := fakeGitHub(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	ready := make(chan struct{})
	finished := newJobs()
	srv, err := serve.New(serve.Config{
		Listener: ln, Control: "acme/control", Secret: []byte(secret),
		App: app.Config{Forge: app.ForgeGitHub, GitURL: gh.URL, CacheDir: t.TempDir(), Version: "test", Concurrency: 4,
			GitHub: ghforge.Config{APIURL: gh.APIURL(), AppID: gh.AppID(), PrivateKey: gh.AppPrivateKeyPEM(),
				Budget: ghforge.BudgetConfig{PerMinute: 100000, PerHour: 1000000, MinInterval: -1}}},
		Resync: time.Hour, Workers: 2, QueueSize: 100, MaxBody: ingress.DefaultMaxBody, Grace: 5 * time.Second,
		CheckName: checkrun.DefaultCheckName,
		OnReady:   func() { close(ready) }, Logger: slog.New(finished),
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		assert.NoError(t, <-done, "Run returned")
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run stopped before ready: %v", err)
	}
	code, _ := get(t, base+"/readyz")
	assert.Equal(t, http.StatusOK, code)

	// The startup resync applies the fleet once.
	finished.waitFor(t, "the startup apply", func() bool { return finished.applies.Load() >= 1 })
	before := gh.Branch("acme", "control", "main")
	gh.Commit("acme", "control", "main", "edge-1: new range", map[string]string{"clusters/edge-1.yaml": `apiVersion: fleetbot.io/v1alpha1
kind: Cluster
metadata:
  name: edge-1
  labels: {env: prod, network: metal}
spec:
  values:
    metallb_range: 10.9.0.0/28
    metallb_speaker_tolerations: "true"
`})
	ev, err := gh.PushEvent("acme", "control", "main", before)
	require.NoError(t, err)
	body, err := json.Marshal(ev)
	require.NoError(t, err)
	// Pushed by a person: fleetbot ignores its own pushes.
	var m map[string]any
	require.NoError(t, json.Unmarshal(body, &m))
	m["sender"] = map[string]any{"login": "alice", "id": 4242, "type": "User"}
	body, err = json.Marshal(m)
	require.NoError(t, err)

	assert.Equal(t, http.StatusUnauthorized, deliver(t, base, "push", "d0", body, "another-secret"), "a delivery signed with another secret")
	assert.Equal(t, http.StatusAccepted, deliver(t, base, "push", "d1", body, secret))
	finished.waitFor(t, "the edge-1 pull request to carry the pushed range", func() bool {
		s, _ := gh.File("acme", "cluster-edge-1", "fleetbot/sync", "platform/metallb/metallb.yaml")
		return strings.Contains(s, "10.9.0.0/28")
	})
	finished.waitFor(t, "the push's apply to finish", func() bool { return finished.applies.Load() >= 2 })
}

// TestNewRefusesAnIncompleteConfig: New says which field is missing before anything starts.
func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	for _, c := range []struct {
		cfg  serve.Config
		want string
	}{
		{serve.Config{Control: "acme/control", Secret: []byte(secret)}, "Config.Listener is nil"},
		{serve.Config{Listener: ln, Control: "acme/control"}, "Config.Secret is empty"},
		{serve.Config{Listener: ln, Control: "control", Secret: []byte(secret)}, `Config.Control "control": want OWNER/NAME`},
	} {
		_, err := serve.New(c.cfg)
		assert.ErrorContains(t, err, c.want)
	}
}
