package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// alwaysTerminal says every writer is a terminal: what a run on a terminal gets, without a TTY.
func alwaysTerminal(io.Writer) bool { return true }

// TestProgressOnlyOnATerminal: progress is drawn only when the writer is a terminal (the check
// is injected, no real TTY); otherwise nothing is written and lines pass through unchanged.
func TestProgressOnlyOnATerminal(t *testing.T) {
	var off bytes.Buffer
	p := newProgress(&off, func(io.Writer) bool { return false })
	p.stage("planning", 1020)
	p.set(500, 1020)
	p.step("apply", 3, 1020)
	p.end()
	assert.Empty(t, off.String(), "no terminal, no progress")
	_, err := p.Write([]byte("warning: a line\n"))
	require.NoError(t, err)
	assert.Equal(t, "warning: a line\n", off.String())

	assert.False(t, newProgress(&off, nil).on, "a buffer is no terminal")

	var on bytes.Buffer
	p = newProgress(&on, alwaysTerminal)
	p.throttle, p.spin = 0, 0
	p.step("plan", 0, 1020)
	p.step("plan", 510, 1020)
	_, err = p.Write([]byte("time=... level=WARN msg=deferred\n"))
	require.NoError(t, err)
	p.step("apply", 0, 6)
	p.step("apply", 3, 6)
	p.end()
	out := on.String()
	assert.Contains(t, out, "planning")
	assert.Contains(t, out, "(510/1020, ", "n of N")
	assert.Regexp(t, `510/1020, [0-9.]+ repos/(s|min|hr)\) \[`, out, "the rate and the time elapsed:left")
	assert.Contains(t, out, "applying")
	assert.Contains(t, out, "(3/6, ")
	before, _, found := strings.Cut(out, "time=... level=WARN msg=deferred\n")
	require.True(t, found)
	assert.True(t, strings.HasSuffix(before, "\r"), "a log line starts on a line of its own: the bar is cleared first")
	assert.True(t, strings.HasSuffix(out, "\r"), "the bar is cleared at the end: what follows starts on a clean line")
}

// TestApplyProgressOnTerminal: apply on a terminal shows its phases on stderr, n of N repos,
// while stdout gets the report alone, once; without a terminal stderr stays empty.
func TestApplyProgressOnTerminal(t *testing.T) {
	t.Parallel()
	forge := "local:" + filepath.Join(t.TempDir(), "forge")
	var stdout, stderr syncBuffer
	a := &frontend{stdout: &stdout, stderr: &stderr, isTerminal: alwaysTerminal}
	code := a.run(context.Background(), []string{"apply", "--control", exampleControl, "--forge", forge})
	require.Equal(t, 0, code, stderr.String())
	progress := stderr.String()
	assert.Contains(t, progress, "loading and rendering "+exampleControl)
	assert.Contains(t, progress, "planning")
	assert.Contains(t, progress, "applying")
	assert.Contains(t, progress, "/6, ", "n of the 6 repos")
	assert.NotContains(t, stdout.String(), "\r", "no progress on stdout")
	assert.Equal(t, 1, strings.Count(stdout.String(), "acme/workspace-search "), "one table")

	stdout, stderr = syncBuffer{}, syncBuffer{}
	a = &frontend{stdout: &stdout, stderr: &stderr, isTerminal: func(io.Writer) bool { return false }}
	code = a.run(context.Background(), []string{"plan", "--control", exampleControl, "--forge", forge})
	require.Equal(t, 0, code, stderr.String())
	assert.Empty(t, stderr.String(), "no terminal: no progress")
	assert.Regexp(t, `\n6 repos: 6 noop \(source [0-9a-f]+(-dirty)?\)\n$`, stdout.String())
}
