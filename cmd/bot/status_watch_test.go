package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// watchRun runs status --watch with a clock and a ticker the test drives: ticks more looks
// after the first, then the ticker stops (its channel closes) and the watch ends.
func watchRun(t *testing.T, terminal bool, ticks int, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr syncBuffer
	tick := make(chan time.Time)
	clock := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	a := &frontend{stdout: &stdout, stderr: &stderr,
		isTerminal: func(io.Writer) bool { return terminal },
		now:        func() time.Time { return clock },
		newTicker: func(d time.Duration) (<-chan time.Time, func()) {
			assert.Equal(t, time.Minute, d, "--interval")
			return tick, func() {}
		},
	}
	done := make(chan int)
	go func() {
		done <- a.run(context.Background(), append([]string{"status", "--watch", "--interval", "1m"}, args...))
	}()
	for range ticks {
		tick <- clock // received once the look before is written
	}
	close(tick)
	require.Equal(t, 0, <-done, stderr.String())
	return stdout.String(), stderr.String()
}

// TestStatusWatch: --watch looks again at each tick; on a terminal each look is drawn in place
// (the screen cleared first), otherwise appended under a line with its time, plain text.
func TestStatusWatch(t *testing.T) {
	t.Parallel()
	forge := "local:" + filepath.Join(t.TempDir(), "forge")
	code, _, errOut := cli(t, "apply", "--control", exampleControl, "--forge", forge)
	require.Equal(t, 0, code, errOut)

	out, _ := watchRun(t, false, 2, "--control", exampleControl, "--forge", forge)
	assert.Equal(t, 3, strings.Count(out, "fleetbot status --watch: 2026-12-01T09:00:00Z, every 1m0s (Ctrl-C stops)\n"), "three looks appended")
	assert.Equal(t, 3, strings.Count(out, "6 repos: 6 pr-open (waiting on 6 review); Flux health: 6 unknown\n"))
	assert.NotContains(t, out, "\x1b[", "no terminal: no escape sequences")

	out, _ = watchRun(t, true, 1, "--control", exampleControl, "--forge", forge)
	assert.Equal(t, 2, strings.Count(out, clearScreen+"fleetbot status --watch: "), "each look redrawn in place")

	// With --html the pages are rewritten at each look and reload themselves as often.
	dir := filepath.Join(t.TempDir(), "pages")
	out, _ = watchRun(t, false, 1, "--control", exampleControl, "--forge", forge, "--html", dir)
	assert.Equal(t, 2, strings.Count(out, "status pages of 6 repos written to "+filepath.Join(dir, "index.html")))
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	assert.Contains(t, string(page), `<meta http-equiv="refresh" content="60">`)
}

// TestStatusHTML: --html writes the status pages as files (the local forge needs no GitHub and
// no service), relinked for a directory; refuses a directory it did not write, writing
// nothing; and drops the page of a repo it no longer shows.
func TestStatusHTML(t *testing.T) {
	t.Parallel()
	forge := "local:" + filepath.Join(t.TempDir(), "forge")
	code, _, errOut := cli(t, "apply", "--control", exampleControl, "--forge", forge)
	require.Equal(t, 0, code, errOut)

	dir := filepath.Join(t.TempDir(), "pages")
	code, out, errOut := cli(t, "status", "--control", exampleControl, "--forge", forge, "--html", dir)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "status pages of 6 repos written to "+filepath.Join(dir, "index.html")+" (and 6 repo pages)\n6 repos: 6 pr-open")
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	require.NoError(t, err)
	page := string(index)
	assert.Contains(t, page, `<a href="repo/cluster-prod-eu-1.html">acme/cluster-prod-eu-1</a>`, "relative links between the files")
	assert.NotContains(t, page, `href="/status`, "no link to a server")
	assert.NotContains(t, page, "<form", "no filter form")
	assert.NotContains(t, page, "<script", "no script")
	assert.NotContains(t, page, `http-equiv="refresh"`, "a written page does not reload itself")
	detail, err := os.ReadFile(filepath.Join(dir, "repo", "cluster-prod-eu-1.html"))
	require.NoError(t, err)
	assert.Contains(t, string(detail), `<a href="../index.html">← fleet status</a>`)

	code, _, errOut = cli(t, "status", "--control", exampleControl, "--forge", forge, "--html", dir, "--repo", "cluster-prod-eu-1")
	require.Equal(t, 0, code, errOut)
	pages, err := filepath.Glob(filepath.Join(dir, "repo", "*.html"))
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "repo", "cluster-prod-eu-1.html")}, pages, "the pages of the repos no longer shown are gone")

	foreign := t.TempDir()
	writeFile(t, filepath.Join(foreign, "notes.txt"), "mine\n")
	code, _, errOut = cli(t, "status", "--control", exampleControl, "--forge", forge, "--html", foreign)
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "holds files fleetbot status did not write")
	entries, err := os.ReadDir(foreign)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing written")
}
