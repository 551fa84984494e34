package main

import (
	"bytes"
	"errors"
	"fmt"
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
	"github.com/fleetbot-io/fleetbot/internal/serve/servetest"
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
	gh, _ := servetest.NewGitHub(t, exampleControl, nil)
	dir := t.TempDir()
	secretFile, keyFile, listenFile := filepath.Join(dir, "secret"), filepath.Join(dir, "app.pem"), filepath.Join(dir, "listen")
	require.NoError(t, os.WriteFile(secretFile, []byte(serveSecret), 0o600))
	require.NoError(t, os.WriteFile(keyFile, gh.AppPrivateKeyPEM(), 0o600))
	// At info level both processes log each delivery once it is counted and each job once it is
	// counted: the events the test waits on, with the fake GitHub's changes.
	cmd := exec.Command(bin, "serve", "--job-process", "--control-repo", "acme/control", "--webhook-secret-file", secretFile,
		"--listen", "127.0.0.1:0", "--listen-file", listenFile, "--git-url", gh.URL, "--resync-interval", "1h",
		"--github-cache", filepath.Join(dir, "cache"), "--mutation-interval", "0",
		"--content-per-minute", "100000", "--content-per-hour", "1000000", "--log-level", "info")
	cmd.Env = append(os.Environ(), "GITHUB_API_URL="+gh.APIURL(), "FLEETBOT_APP_ID="+strconv.FormatInt(gh.AppID(), 10),
		"FLEETBOT_APP_KEY_FILE="+keyFile, "GITHUB_TOKEN=", "FLEETBOT_APP_KEY=", "FLEETBOT_WEBHOOK_SECRET=")
	var logs syncBuffer
	var wake servetest.Signal
	out := wake.Writer(&logs)
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs.String())
		}
	})
	w := servetest.NewWaiter(t, gh.Changed, wake.C)
	var base string
	metric := func(series string) float64 { return servetest.Metric(t, base, series) }
	waitMetric := func(series string, atLeast float64) {
		t.Helper()
		w.Eventually(fmt.Sprintf("%s >= %v", series, atLeast), func() bool { return metric(series) >= atLeast })
	}

	w.Eventually("the listen file", func() bool {
		b, err := os.ReadFile(listenFile)
		if err != nil || !strings.HasSuffix(string(b), "\n") {
			return false
		}
		base = "http://" + strings.TrimSpace(string(b))
		return true
	})
	w.Eventually("ready (through the front)", func() bool {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	waitMetric(appliedOK, 1) // the startup resync
	kids := children(cmd.Process.Pid)
	require.Len(t, kids, 1, "one job process")
	job := kids[0]
	assert.Equal(t, min(niceness(t, cmd.Process.Pid)+serve.DefaultJobNice, 19), niceness(t, job), "the job process runs at a lower priority")

	push := servetest.JSON(t, map[string]any{"ref": "refs/heads/main", "after": gh.Branch("acme", "control", "main"),
		"repository": map[string]any{"full_name": "acme/control", "default_branch": "main"}, "sender": map[string]any{"login": "alice"}})
	// The refusal first: the front hands it to the job process with or before the push, whose
	// log line then says both are counted.
	assert.Equal(t, http.StatusUnauthorized, servetest.Deliver(t, base, "push", "p2", push, "wrong-secret"))
	assert.Equal(t, http.StatusAccepted, servetest.Deliver(t, base, "push", "p1", push, serveSecret))
	waitMetric(appliedOK, 2)
	waitMetric(`fleetbot_webhook_deliveries_total{event="push",outcome="queued"}`, 1)
	waitMetric(`fleetbot_webhook_deliveries_total{event="push",outcome="bad_signature"}`, 1)
	waitMetric("fleetbot_webhook_ack_seconds_count", 2)
	resp, err := http.Post(base+"/internal/front-batch", "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the job process's batch route is not reachable from the public address")

	// The job process dies; the front keeps answering and holds the delivery for the next one.
	require.NoError(t, syscall.Kill(job, syscall.SIGKILL))
	w.Eventually("the job process gone", func() bool {
		k := children(cmd.Process.Pid) // read once: the front may start the next one between two reads
		return len(k) == 0 || k[0] != job
	})
	assert.Equal(t, http.StatusAccepted, servetest.Deliver(t, base, "push", "p3", push, serveSecret), "acknowledged while no job process runs")
	w.Eventually("a new job process", func() bool {
		k := children(cmd.Process.Pid)
		return len(k) == 1 && k[0] != job
	})
	// The new process counts from zero: the push it counts is the one the front held, queued,
	// or coalesced with the new process's startup resync when that one is still waiting (which
	// of the two depends on how fast the new process starts: both mean the push is not lost).
	w.Eventually("the held push taken by the new job process", func() bool {
		return metric(`fleetbot_webhook_deliveries_total{event="push",outcome="queued"}`)+
			metric(`fleetbot_webhook_deliveries_total{event="push",outcome="coalesced"}`) >= 1
	})
	assert.Contains(t, logs.String(), "job process exited; starting it again")

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	// A serve that does not stop on SIGTERM is a hang, for go test -timeout.
	require.NoError(t, <-exited, "serve exits 0 on SIGTERM")
	assert.NotContains(t, logs.String(), serveSecret)
}
