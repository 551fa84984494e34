package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestApplyStopsOnSIGINT: the built binary, applying a 400-cluster fleet, stops when
// interrupted (SIGINT or SIGTERM) instead of finishing the fleet, and says what to do. It does
// not measure how fast it stops (go test's -timeout catches a hang);
// TestAttackInterruptIgnoredUntilRenderEnds (internal/fanout) and
// TestAttackInterruptBeforeAnyWrite bound the work done after the signal.
func TestApplyStopsOnSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	t.Parallel()
	dir := t.TempDir()
	// go install, not go build -o: it links only when the binary it installed before is stale
	// (go build -o links every time, seconds of CPU). The module's .cache holds it.
	binDir, err := filepath.Abs(filepath.Join("..", "..", ".cache", "test-bin"))
	require.NoError(t, err)
	build := exec.Command("go", "install", ".")
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local", "GOBIN="+binDir)
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	bin := filepath.Join(binDir, "bot")
	gen := exec.Command(bin, "dev", "generate", "--clusters", "400", "--out", filepath.Join(dir, "ctl"))
	out, err = gen.CombinedOutput()
	require.NoError(t, err, "%s", out)

	for sig, says := range map[syscall.Signal]string{syscall.SIGINT: "interrupt", syscall.SIGTERM: "terminated"} {
		t.Run(sig.String(), func(t *testing.T) {
			apply := exec.Command(bin, "apply", "--control", filepath.Join(dir, "ctl"), "--forge", "local:"+filepath.Join(dir, "forge-"+says))
			var stderr bytes.Buffer
			apply.Stderr = &stderr
			stdout, err := apply.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, apply.Start())
			lines := bufio.NewScanner(stdout)
			for n := 0; n < 5 && lines.Scan(); n++ {
			}
			require.NoError(t, apply.Process.Signal(sig))
			go func() {
				for lines.Scan() {
				}
			}()
			err = apply.Wait() // a hang is caught by go test's -timeout
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit)
			assert.Equal(t, 1, exit.ExitCode())
			assert.Contains(t, stderr.String(), "interrupted ("+says+" signal received)")
			assert.Contains(t, stderr.String(), "run apply again to finish")
		})
	}
}

// TestAttackInterruptBeforeAnyWrite: a signal that lands while the control repo is loaded or
// rendered stops validate, plan, render and apply there, with exit 1, a message saying so,
// and nothing written (no forge, no --out).
func TestAttackInterruptBeforeAnyWrite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("terminated signal received"))
	dir := t.TempDir()
	forge, out := filepath.Join(dir, "forge"), filepath.Join(dir, "out")
	for _, args := range [][]string{
		{"validate", "--control", exampleControl},
		{"plan", "--control", exampleControl, "--forge", "local:" + forge},
		{"render", "--control", exampleControl, "--out", out},
		{"apply", "--control", exampleControl, "--forge", "local:" + forge},
	} {
		var stdout, stderr bytes.Buffer
		code := run(ctx, args, &stdout, &stderr)
		assert.Equal(t, 1, code, "%s: %s", args[0], stderr.String())
		assert.Contains(t, stderr.String(), "interrupted", args[0])
		assert.Contains(t, stderr.String(), "terminated signal received", args[0])
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written")
}
