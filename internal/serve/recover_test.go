package serve_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/app"
	"github.com/fleetbot-io/fleetbot/internal/checkrun"
	ghforge "github.com/fleetbot-io/fleetbot/internal/forge/github"
	"github.com/fleetbot-io/fleetbot/internal/githubtest"
	"github.com/fleetbot-io/fleetbot/internal/ingress"
	"github.com/fleetbot-io/fleetbot/internal/serve"
	"github.com/fleetbot-io/fleetbot/internal/webhook"
)

// process is one serve process against the fake GitHub, whose webhooks it receives (the hook
// URL file names it while it runs).
type process struct {
	done    chan error
	cancel  context.CancelFunc
	ready   chan struct{}
	jobs    *jobs
	mu      sync.Mutex
	asked   []string // GUIDs its passes over the delivery log asked GitHub to redeliver
	passes  chan struct{}
	checkAt chan struct{} // a check job reached the worker (BeforeJob)
}

// startProcess starts serve; with lose set, its jobs of that kind are lost (they wait for the
// process's end, reporting on checkAt); tweak, when set, changes its configuration.
func startProcess(t *testing.T, fake *githubtest.Server, hookFile, cacheDir string, lose webhook.Kind, tweak ...func(*serve.Config)) *process {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(hookFile, []byte("http://"+ln.Addr().String()+"/webhook"), 0o600))
	p := &process{done: make(chan error, 1), ready: make(chan struct{}), jobs: newJobs(),
		passes: make(chan struct{}, 16), checkAt: make(chan struct{}, 16)}
	cfg := serve.Config{
		Listener: ln, Control: "acme/control", Secret: []byte(secret),
		App: app.Config{Forge: app.ForgeGitHub, GitURL: fake.URL, CacheDir: cacheDir, Version: "test", Concurrency: 4,
			GitHub: ghforge.Config{APIURL: fake.APIURL(), AppID: fake.AppID(), PrivateKey: fake.AppPrivateKeyPEM(),
				Budget: ghforge.BudgetConfig{PerMinute: 100000, PerHour: 1000000, MinInterval: -1}}},
		Resync: time.Hour, Redeliver: time.Hour, Workers: 2, QueueSize: 100, MaxBody: ingress.DefaultMaxBody,
		Grace: 100 * time.Millisecond, CheckName: checkrun.DefaultCheckName,
		OnReady: func() { close(p.ready) }, Logger: slog.New(p.jobs),
		OnRedeliveryPass: func(asked []string, err error) {
			p.mu.Lock()
			p.asked = append(p.asked, asked...)
			p.mu.Unlock()
			p.passes <- struct{}{}
		},
	}
	for _, f := range tweak {
		f(&cfg)
	}
	if lose != "" {
		// The process is killed before its jobs of that kind run: they wait for the end.
		cfg.BeforeJob = func(ctx context.Context, j webhook.Job) error {
			if j.Kind != lose {
				return nil
			}
			p.checkAt <- struct{}{}
			<-ctx.Done()
			return ctx.Err()
		}
	}
	srv, err := serve.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.done <- srv.Run(ctx) }()
	select {
	case <-p.ready:
	case err := <-p.done:
		t.Fatalf("Run stopped before ready: %v", err)
	}
	p.jobs.waitFor(t, "the startup apply", func() bool { return p.jobs.applies.Load() >= 1 })
	return p
}

func (p *process) stop(t *testing.T) {
	t.Helper()
	p.cancel()
	assert.NoError(t, <-p.done)
}

func (p *process) askedFor(guid string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.asked {
		if g == guid {
			return true
		}
	}
	return false
}

// TestServeRestartRecoversLostChecksAndFailedDeliveries: serve acknowledges a control pull
// request's delivery and is stopped before its check job runs; while it is down, a push to the
// control repo fails to be delivered (GitHub records it in the App's delivery log and does not
// deliver it again by itself). The next process's startup resync creates the lost check on the
// pull request's head, and its first pass over the delivery log asks GitHub to redeliver the
// push, which it then receives with the same GUID and acknowledges.
func TestServeRestartRecoversLostChecksAndFailedDeliveries(t *testing.T) {
	t.Parallel()
	hookFile := filepath.Join(t.TempDir(), "hook-url")
	fake := fakeGitHub(t, githubtest.WithWebhookURLFile(hookFile, secret))
	api := fake.Client()
	ctx := context.Background()
	cacheDir := t.TempDir()

	first := startProcess(t, fake, hookFile, cacheDir, webhook.KindCheck)
	main := fake.Branch("acme", "control", "main")
	_, _, err := api.Git.CreateRef(ctx, "acme", "control", &gh.Reference{Ref: gh.String("refs/heads/edge-1"), Object: &gh.GitObject{SHA: gh.String(main)}})
	require.NoError(t, err)
	head := fake.Commit("acme", "control", "edge-1", "edge-1: tolerations", map[string]string{"clusters/edge-1.yaml": `apiVersion: fleetbot.io/v1alpha1
kind: Cluster
metadata:
  name: edge-1
  labels: {env: prod, network: metal}
spec:
  values:
    metallb_range: 10.9.0.0/28
    metallb_speaker_tolerations: "true"
`})
	pr, _, err := api.PullRequests.Create(ctx, "acme", "control", &gh.NewPullRequest{Title: gh.String("edge-1"), Head: gh.String("edge-1"), Base: gh.String("main")})
	require.NoError(t, err)
	<-first.checkAt // the pull_request delivery was acknowledged and its check job taken
	first.stop(t)   // ... and the process ends before the job ran
	checks := func() []*gh.CheckRun {
		runs, _, err := api.Checks.ListCheckRunsForRef(ctx, "acme", "control", head, &gh.ListCheckRunsOptions{CheckName: gh.String(checkrun.DefaultCheckName)})
		require.NoError(t, err)
		return runs.CheckRuns
	}
	require.Empty(t, checks(), "the check was lost with the process")

	// Down: a push to the control repo is not delivered.
	fake.WaitWebhooks()
	seen := len(fake.Deliveries())
	fake.Commit("acme", "control", "main", "a push while serve is down", map[string]string{"README.md": "down\n"})
	fake.WaitWebhooks()
	var failed githubtest.HookDelivery
	for _, d := range fake.Deliveries()[seen:] {
		if d.Event == "push" {
			failed = d
		}
	}
	require.NotEmpty(t, failed.GUID, "the push was attempted")
	require.NotEqual(t, "OK", failed.Status, "and failed: nobody listened")

	second := startProcess(t, fake, hookFile, cacheDir, "")
	defer second.stop(t)
	second.jobs.waitFor(t, "the lost check to be created and completed on the head", func() bool {
		runs := checks()
		return len(runs) == 1 && runs[0].GetStatus() == "completed"
	})
	assert.Equal(t, pr.GetHead().GetSHA(), head)
	for !second.askedFor(failed.GUID) {
		<-second.passes
	}
	fake.WaitWebhooks()
	var redelivered []githubtest.HookDelivery
	for _, d := range fake.Deliveries() {
		if d.GUID == failed.GUID && d.Redelivery {
			redelivered = append(redelivered, d)
		}
	}
	require.Len(t, redelivered, 1, "GitHub redelivered the failed push once, with its GUID")
	assert.Equal(t, "OK", redelivered[0].Status, "and the new process acknowledged it")
}

// TestServeRestartRecoversALostTenantCheck: with the tenant check on, serve acknowledges the
// pull_request delivery of a cluster repo's pull request and is stopped before its tenant job
// runs: the head has no tenant check run, which the repo's protection requires. The next
// process's startup resync finds the head (through the batched GraphQL reads of the open pull
// requests and of their heads' check runs, TestOpenPullHeadsAndLatestCheckRunsInBatchesOf100)
// and runs the tenant check on it.
func TestServeRestartRecoversALostTenantCheck(t *testing.T) {
	t.Parallel()
	hookFile := filepath.Join(t.TempDir(), "hook-url")
	fake := fakeGitHub(t, githubtest.WithWebhookURLFile(hookFile, secret))
	api := fake.Client()
	ctx := context.Background()
	cacheDir := t.TempDir()
	tenantOn := func(c *serve.Config) { c.TenantCheck = checkrun.DefaultTenantCheckName }

	first := startProcess(t, fake, hookFile, cacheDir, webhook.KindTenant, tenantOn)
	const repo = "cluster-prod-eu-1"
	main := fake.Branch("acme", repo, "main")
	require.NotEmpty(t, main, "the startup apply created the cluster repo")
	_, _, err := api.Git.CreateRef(ctx, "acme", repo, &gh.Reference{Ref: gh.String("refs/heads/apps"), Object: &gh.GitObject{SHA: gh.String(main)}})
	require.NoError(t, err)
	head := fake.Commit("acme", repo, "apps", "apps: web", map[string]string{"apps/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n"})
	_, _, err = api.PullRequests.Create(ctx, "acme", repo, &gh.NewPullRequest{Title: gh.String("apps"), Head: gh.String("apps"), Base: gh.String("main")})
	require.NoError(t, err)
	<-first.checkAt // the pull_request delivery was acknowledged and its tenant job taken
	first.stop(t)   // ... and the process ends before the job ran
	runs := func() []*gh.CheckRun {
		res, _, err := api.Checks.ListCheckRunsForRef(ctx, "acme", repo, head, &gh.ListCheckRunsOptions{CheckName: gh.String(checkrun.DefaultTenantCheckName)})
		require.NoError(t, err)
		return res.CheckRuns
	}
	require.Empty(t, runs(), "the tenant check was lost with the process")

	second := startProcess(t, fake, hookFile, cacheDir, "", tenantOn)
	defer second.stop(t)
	second.jobs.waitFor(t, "the lost tenant check to be created and completed on the head", func() bool {
		rs := runs()
		return len(rs) == 1 && rs[0].GetStatus() == "completed"
	})
	assert.Equal(t, "success", runs()[0].GetConclusion())
}
