package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// childResult is what the parent learns from one child process: its JSON
// result and its resource usage.
type childResult struct {
	// MaxRSS is the child's peak resident set in bytes (ru_maxrss).
	MaxRSS int64
	// User and System are the CPU times the child used.
	User, System time.Duration
	// Wall is the child's wall time, start to exit.
	Wall time.Duration
}

// runChild re-executes this program with args (which select a scenario),
// decodes the JSON it prints on stdout into out and returns its resource
// usage. stderr passes through, so progress shows.
func runChild(out any, args ...string) (*childResult, error) {
	return runChildInput(nil, out, args...)
}

// runChildInput is runChild with in as the child's stdin.
func runChildInput(in []byte, out any, args ...string) (*childResult, error) {
	return runChildNice(in, out, 0, args...)
}

// runChildNice is runChildInput with the child at scheduling niceness nice (0: this process's;
// negative raises its priority, which needs root), through nice(1) so that every thread of the
// child has it from the start.
func runChildNice(in []byte, out any, nice int, args ...string) (*childResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding own executable: %w", err)
	}
	cmd := exec.Command(self, args...)
	if nice != 0 {
		cmd = exec.Command("nice", append([]string{"-n", strconv.Itoa(nice), self}, args...)...)
	}
	cmd.Stderr = os.Stderr
	if in != nil {
		cmd.Stdin = bytes.NewReader(in)
	}
	start := time.Now()
	stdout, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("child %v: %w", args, err)
	}
	res := &childResult{Wall: time.Since(start)}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		res.MaxRSS = ru.Maxrss * 1024 // kilobytes on Linux
		res.User = time.Duration(ru.Utime.Nano())
		res.System = time.Duration(ru.Stime.Nano())
	}
	if err := json.Unmarshal(stdout, out); err != nil {
		return nil, fmt.Errorf("child %v: decoding its result: %w", args, err)
	}
	return res, nil
}

// emit prints a child's result for the parent.
func emit(v any) error {
	return json.NewEncoder(os.Stdout).Encode(v)
}
