package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
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
	// The fleet, generated in-process while the binary builds.
	code, _, errOut := cli(t, "dev", "generate", "--clusters", "400", "--out", filepath.Join(dir, "ctl"))
	require.Equal(t, 0, code, errOut)
	// A binary without the race detector (applying 400 clusters under it costs ten times the
	// CPU), built once for every test that runs it (installedBinary).
	bin := installedBinary(t)

	for sig, says := range map[syscall.Signal]string{syscall.SIGINT: "interrupt", syscall.SIGTERM: "terminated"} {
		t.Run(sig.String(), func(t *testing.T) {
			// apply prints its table at the end; its info log says when a repo is done, so the
			// signal lands once five repos are written.
			t.Parallel()
			apply := exec.Command(bin, "apply", "--control", filepath.Join(dir, "ctl"), "--forge", "local:"+filepath.Join(dir, "forge-"+says),
				"--log-level", "info")
			var stderr bytes.Buffer
			pipe, err := apply.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, apply.Start())
			lines := bufio.NewScanner(pipe)
			for n := 0; n < 5 && lines.Scan(); {
				stderr.WriteString(lines.Text() + "\n")
				if strings.Contains(lines.Text(), "msg=reconciled") {
					n++
				}
			}
			require.NoError(t, apply.Process.Signal(sig))
			for lines.Scan() {
				stderr.WriteString(lines.Text() + "\n")
			}
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

// writingCtx is a context that is done once a render's temporary directory beside out holds a
// target's directory: a signal landing in the middle of the write phase, found by what was
// written rather than by a clock.
type writingCtx struct {
	context.Context
	parent, prefix string
	done           *atomic.Bool // once done, done for good, as a signal's context is
}

func (c writingCtx) Err() error {
	if c.done.Load() {
		return context.Canceled
	}
	entries, _ := os.ReadDir(c.parent)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), c.prefix) && !strings.HasSuffix(e.Name(), ".trash") {
			if inner, _ := os.ReadDir(filepath.Join(c.parent, e.Name())); len(inner) > 0 {
				c.done.Store(true)
				return context.Canceled
			}
		}
	}
	return nil
}

// TestAttackInterruptDuringRenderWrites: a signal in render's write phase stops it before the
// next file, with exit 1 and a message; the earlier render in --out is left whole (no tree is
// ever half-written there), what was written is set aside as .trash without waiting for its
// removal, and the next render removes it.
func TestAttackInterruptDuringRenderWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"render", "--control", exampleControl, "--out", out}, &stdout, &stderr), stderr.String())
	before := treeOf(t, out)
	require.NotEmpty(t, before)

	stdout.Reset()
	stderr.Reset()
	ctx := writingCtx{Context: context.Background(), parent: dir, prefix: ".out.render-", done: &atomic.Bool{}}
	code := run(ctx, []string{"render", "--control", exampleControl, "--out", out}, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "render interrupted")
	assert.Contains(t, stderr.String(), out+" is unchanged")
	assert.Equal(t, before, treeOf(t, out), "the earlier render is whole")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var trash []string
	for _, e := range entries {
		if e.Name() != "out" {
			trash = append(trash, e.Name())
		}
	}
	require.Len(t, trash, 1, "the partial tree is set aside, not removed while the signal waits")
	assert.True(t, strings.HasSuffix(trash[0], ".trash"), trash[0])

	stderr.Reset()
	require.Equal(t, 0, run(context.Background(), []string{"render", "--control", exampleControl, "--out", out}, &stdout, &stderr), stderr.String())
	entries, err = os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "the next render removed the trash and its own earlier tree")
	assert.Equal(t, before, treeOf(t, out))
}

// treeOf reads every file below dir, by slash path.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	}))
	return out
}
