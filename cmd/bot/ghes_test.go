package main

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	"github.com/fleetbot-io/fleetbot/internal/control"
	"github.com/fleetbot-io/fleetbot/internal/fanout"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/serve/servetest"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// botTrees is the tree of fleetbot's pull request branch of every target repo, as
// "repo/path" -> SHA-256 of the content (a mismatch then names the file, not megabytes).
func botTrees(t *testing.T, srv *githubtest.Server, repos []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range repos {
		files := srv.Files("acme", r, "fleetbot/sync")
		require.NotEmpty(t, files, "acme/%s has fleetbot's branch", r)
		for path, content := range files {
			out[r+"/"+path] = fmt.Sprintf("%x", sha256.Sum256([]byte(content)))
		}
	}
	return out
}

// exampleRepos are the target repos of the example control repo.
func exampleRepos(t *testing.T) []string {
	t.Helper()
	repo, err := control.LoadDir(exampleControl)
	require.NoError(t, err)
	targets, err := fanout.NewRenderer(fanout.Options{}).Render(repo)
	require.NoError(t, err)
	var names []string
	for _, tg := range targets {
		names = append(names, tg.Repo)
	}
	return names
}

// TestFrontEndsWriteTheSamePullRequestsOnGHES: the CLI, the Action and serve, configured for
// the same GitHub Enterprise Server (only its API URL: https://HOST/api/v3), propose
// byte-identical pull requests. The CLI opens them; the Action and then serve find every PR
// already carrying what they render, and write nothing to a target repo. Before one
// composition root built every front end, the CLI and the Action rendered
// https://github.com/... into flux/ while serve rendered the Enterprise host, and each
// rewrote the others' PRs on every run.
func TestFrontEndsWriteTheSamePullRequestsOnGHES(t *testing.T) {
	srv := fakeFleet(t)
	apiURL := strings.TrimSuffix(srv.APIURL(), "/") // as users write it, without the slash
	require.True(t, strings.HasSuffix(apiURL, "/api/v3"), "the fake serves GitHub Enterprise's API path")
	t.Setenv("GITHUB_API_URL", apiURL)
	t.Setenv("FLEETBOT_APP_ID", strconv.FormatInt(srv.AppID(), 10))
	t.Setenv("FLEETBOT_APP_KEY", string(srv.AppPrivateKeyPEM()))
	t.Setenv("FLEETBOT_WEBHOOK_SECRET", serveSecret)
	repos := exampleRepos(t)

	// The CLI.
	code, stdout, stderr := cli(t, "apply", "--control", copyControl(t), "--forge", "github", "--github-cache", "off", "--mutation-interval=0")
	require.Equal(t, 0, code, stdout+stderr)
	want := botTrees(t, srv, repos)
	flux, _ := srv.File("acme", "cluster-prod-eu-1", "fleetbot/sync", "flux/fleetbot.yaml")
	assert.Contains(t, flux, "url: "+srv.URL+"/acme/workspace-payments", "the CLI renders the Enterprise host, not github.com")
	assert.NotContains(t, flux, "https://github.com")

	// The Action, on a push to the control repo.
	srv.ResetLog()
	runner := newSimRunner(t, srv)
	runner.checkout()
	ev, err := srv.PushEvent("acme", "control", "main", "")
	require.NoError(t, err)
	runner.event("push", srv.Branch("acme", "control", "main"), "refs/heads/main", ev)
	step := runner.run(appInputs(srv, "apply"))
	require.Equal(t, 0, step.code, step.stdout+step.stderr)
	assert.Empty(t, targetWrites(srv), "the Action renders what the CLI proposed: no write")
	assert.Equal(t, want, botTrees(t, srv, repos), "the Action's PR contents")

	// serve, configured from the same flags and environment, on its startup resync.
	srv.ResetLog()
	a := &frontend{stderr: io.Discard}
	a.rootCommand() // registers the global flags' defaults
	a.concurrency = 2
	f := serveFlags{control: "acme/control", resync: time.Hour, grace: 5 * time.Second, workers: 1,
		queueSize: 10, maxBody: ingress.DefaultMaxBody, checkName: checkrun.DefaultCheckName}
	a.github.cacheDir, a.github.interval = "off", 0
	var wake servetest.Signal // what serve logs and each job it finishes
	cfg, err := a.serveConfig(&f, slog.New(wake.Handler(nil)))
	require.NoError(t, err)
	ready := make(chan struct{})
	cfg.OnReady = func() { close(ready) }
	cfg.AfterJob = func(webhook.Job) { wake.Notify() }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // a failed assertion below still stops serve
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, cfg, ln) }()
	select {
	case <-ready: // the startup resync is queued; wait for it to finish
	case err := <-done:
		t.Fatalf("serve stopped before ready: %v", err)
	}
	base := "http://" + ln.Addr().String()
	servetest.NewWaiter(t, srv.Changed, wake.C).Eventually("the startup resync applied, no job waiting or running", func() bool {
		return servetest.Metric(t, base, appliedOK) >= 1 && servetest.Idle(t, base)
	})
	cancel()
	require.NoError(t, <-done)
	assert.Empty(t, targetWrites(srv), "serve renders what the CLI proposed: no write")
	assert.Equal(t, want, botTrees(t, srv, repos), "serve's PR contents")
}
