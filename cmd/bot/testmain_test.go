package main

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// runMainEnv makes the test binary run fleetbot's main instead of the tests (TestMain).
const runMainEnv = "FLEETBOT_TEST_RUN_MAIN"

// TestMain runs the package's tests or, with runMainEnv=1 in the environment, fleetbot itself.
// A test that needs fleetbot as a process of its own (a real signal) runs this test binary
// (fleetbotProcess): it is built already, so no go build and no link per test, and no second,
// non-race build of every package for a binary beside the test's.
func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main() // exits
	}
	os.Exit(m.Run())
}

// fleetbotProcess is fleetbot with args as a process of its own: this test binary running main.
func fleetbotProcess(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	return cmd
}
