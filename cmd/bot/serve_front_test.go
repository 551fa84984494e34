package main

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fleetbot-io/fleetbot/internal/serve"
)

// installedBinary builds this command once per test binary into the module's .cache (go
// install links only when the binary is stale) and returns its path.
func installedBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := filepath.Abs(filepath.Join("..", "..", ".cache", "test-bin"))
		if err != nil {
			binErr = err
			return
		}
		build := exec.Command("go", "install", ".")
		build.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOBIN="+dir)
		if out, err := build.CombinedOutput(); err != nil {
			binErr = errors.New(string(out))
			return
		}
		binPath = filepath.Join(dir, "bot")
	})
	require.NoError(t, binErr)
	return binPath
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// syncBuffer is a bytes.Buffer safe for a process's output and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// children is the pids of pid's child processes (/proc lists them per thread that forked them).
func children(pid int) []int {
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil
	}
	var out []int
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// niceness is a process's niceness (field 19 of /proc/PID/stat).
func niceness(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	require.NoError(t, err)
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	n, err := strconv.Atoi(f[16])
	require.NoError(t, err)
	return n
}

// TestServeJobProcess runs the built binary as serve --job-process against the fake GitHub:
// the front answers on --listen and proxies /readyz and /metrics; the jobs run in a child at
// a niceness ten higher; a push is applied; a delivery acknowledged while the job process is
// down (killed) is handed to the one the front starts again, not lost; SIGTERM stops both.
func TestServeJobProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("reads processes from /proc")
	}
	t.Parallel()
	bin := installedBinary(t)
	e := &serveEnv{t: t}
	e.newGitHub(false)
	dir := t.TempDir()
	secretFile, keyFile, listenFile := filepath.Join(dir, "secret"), filepath.Join(dir, "app.pem"), filepath.Join(dir, "listen")
	require.NoError(t, os.WriteFile(secretFile, []byte(serveSecret), 0o600))
	require.NoError(t, os.WriteFile(keyFile, e.gh.AppPrivateKeyPEM(), 0o600))
	cmd := exec.Command(bin, "serve", "--job-process", "--control-repo", "acme/control", "--webhook-secret-file", secretFile,
		"--listen", "127.0.0.1:0", "--listen-file", listenFile, "--git-url", e.gh.URL, "--resync-interval", "1h",
		"--github-cache", filepath.Join(dir, "cache"), "--mutation-interval", "0",
		"--content-per-minute", "100000", "--content-per-hour", "1000000")
	cmd.Env = append(os.Environ(), "GITHUB_API_URL="+e.gh.APIURL(), "FLEETBOT_APP_ID="+strconv.FormatInt(e.gh.AppID(), 10),
		"FLEETBOT_APP_KEY_FILE="+keyFile, "GITHUB_TOKEN=", "FLEETBOT_APP_KEY=", "FLEETBOT_WEBHOOK_SECRET=")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs.String())
		}
	})

	e.eventually("the listen file", func() bool {
		b, err := os.ReadFile(listenFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		e.url = "http://" + strings.TrimSpace(string(b))
		return true
	})
	e.eventually("ready (through the front)", func() bool {
		resp, err := http.Get(e.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	e.waitMetric(appliedOK, 1) // the startup resync
	e.idle()
	kids := children(cmd.Process.Pid)
	require.Len(t, kids, 1, "one job process")
	job := kids[0]
	assert.Equal(t, min(niceness(t, cmd.Process.Pid)+serve.DefaultJobNice, 19), niceness(t, job), "the job process runs at a lower priority")

	push := encodeJSON(t, map[string]any{"ref": "refs/heads/main", "after": e.gh.Branch("acme", "control", "main"),
		"repository": map[string]any{"full_name": "acme/control", "default_branch": "main"}, "sender": map[string]any{"login": "alice"}})
	assert.Equal(t, http.StatusAccepted, e.deliver("push", "p1", push, serveSecret))
	assert.Equal(t, http.StatusUnauthorized, e.deliver("push", "p2", push, "wrong-secret"))
	e.waitMetric(appliedOK, 2)
	e.waitMetric(`fleetbot_webhook_deliveries_total{event="push",outcome="queued"}`, 1)
	e.waitMetric(`fleetbot_webhook_deliveries_total{event="push",outcome="bad_signature"}`, 1)
	e.waitMetric("fleetbot_webhook_ack_seconds_count", 2)
	resp, err := http.Post(e.url+"/internal/front-batch", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the job process's batch route is not reachable from the public address")

	// The job process dies; the front keeps answering and holds the delivery for the next one.
	require.NoError(t, syscall.Kill(job, syscall.SIGKILL))
	e.eventually("the job process gone", func() bool {
		k := children(cmd.Process.Pid) // read once: the front may start the next one between two reads
		return len(k) == 0 || k[0] != job
	})
	assert.Equal(t, http.StatusAccepted, e.deliver("push", "p3", push, serveSecret), "acknowledged while no job process runs")
	e.eventually("a new job process", func() bool {
		k := children(cmd.Process.Pid)
		return len(k) == 1 && k[0] != job
	})
	// The new process counts from zero: the push it counts is the one the front held, queued,
	// or coalesced with the new process's startup resync when that one is still waiting (which
	// of the two depends on how fast the new process starts: both mean the push is not lost).
	e.eventually("the held push taken by the new job process", func() bool {
		return e.metric(`fleetbot_webhook_deliveries_total{event="push",outcome="queued"}`)+
			e.metric(`fleetbot_webhook_deliveries_total{event="push",outcome="coalesced"}`) >= 1
	})
	assert.Contains(t, logs.String(), "job process exited; starting it again")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	// A serve that does not stop on SIGTERM is a hang, for go test -timeout.
	require.NoError(t, <-exited, "serve exits 0 on SIGTERM")
	assert.NotContains(t, logs.String(), serveSecret)
}
