package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestApplyStopsOnSIGINT: the built binary, applying a 400-cluster fleet, stops when
// interrupted instead of finishing the fleet, and says what to do. It does not measure how
// fast it stops (go test's -timeout catches a hang).
func TestApplyStopsOnSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "fleetbot")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)
	gen := exec.Command(bin, "dev", "generate", "--clusters", "400", "--out", filepath.Join(dir, "ctl"))
	out, err = gen.CombinedOutput()
	require.NoError(t, err, "%s", out)

	apply := exec.Command(bin, "apply", "--control", filepath.Join(dir, "ctl"), "--forge", "local:"+filepath.Join(dir, "forge"))
	var stderr bytes.Buffer
	apply.Stderr = &stderr
	stdout, err := apply.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, apply.Start())
	lines := bufio.NewScanner(stdout)
	for n := 0; n < 5 && lines.Scan(); n++ {
	}
	require.NoError(t, apply.Process.Signal(syscall.SIGINT))
	go func() {
		for lines.Scan() {
		}
	}()
	err = apply.Wait() // a hang is caught by go test's -timeout
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, stderr.String(), "interrupted (interrupt signal received)")
	assert.Contains(t, stderr.String(), "run apply again to finish")
}
