package doctest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// marker is the line that marks the next fenced block runnable; outputMarker marks the next
// fenced block as the expected output of the runnable block before it.
const (
	marker       = "<!-- runnable -->"
	outputMarker = "<!-- output -->"
)

// block is one runnable shell block and the output documented for it.
type block struct {
	line int // of the opening fence
	text string
	// expect are the lines of the documented output: each must match a whole line of what
	// the block printed ("..." stands for anything); outputLine is the output block's fence.
	expect     []string
	outputLine int
}

// runnableBlocks returns the runnable blocks of a markdown document, in order, each with the
// output block that follows it, if any.
func runnableBlocks(md []byte) ([]block, error) {
	var out []block
	sc := bufio.NewScanner(bytes.NewReader(md))
	n, in := 0, false
	marked := "" // the marker seen on the line before, if any
	var cur block
	var isOutput bool
	var fence string
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case in && strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`~") == "":
			in = false
			if !isOutput {
				out = append(out, cur)
			}
		case in && isOutput:
			if strings.TrimSpace(line) != "" {
				out[len(out)-1].expect = append(out[len(out)-1].expect, strings.TrimSpace(line))
			}
		case in:
			cur.text += line + "\n"
		case marked != "" && (strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~")):
			lang := strings.Trim(trimmed, "`~ ")
			fence = trimmed[:3]
			isOutput = marked == outputMarker
			if isOutput {
				if len(out) == 0 || out[len(out)-1].outputLine != 0 {
					return nil, fmt.Errorf("line %d: %s must follow a runnable block (one output block each)", n-1, outputMarker)
				}
				out[len(out)-1].outputLine = n
			} else if lang != "sh" && lang != "bash" {
				return nil, fmt.Errorf("line %d: a runnable block must be sh or bash, not %q", n, lang)
			}
			in, marked, cur = true, "", block{line: n}
		case trimmed == marker || trimmed == outputMarker:
			marked = trimmed
		case marked != "" && trimmed != "":
			return nil, fmt.Errorf("line %d: %s must be right before a fenced block", n-1, marked)
		}
	}
	if in {
		return nil, fmt.Errorf("line %d: unterminated runnable block", cur.line)
	}
	return out, sc.Err()
}

// strictness lists what makes a runnable block pass while printing nothing useful: a jq
// without -e exits 0 on empty input (a curl answered 307 or 404 prints nothing and passes).
func strictness(bs []block) []string {
	var bad []string
	for _, b := range bs {
		for i, l := range strings.Split(b.text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "#") {
				continue
			}
			for _, seg := range strings.Split(l, "|")[1:] {
				f := strings.Fields(seg)
				if len(f) > 0 && f[0] == "jq" && !slices.Contains(f, "-e") && !slices.Contains(f, "-er") {
					bad = append(bad, fmt.Sprintf("line %d: %q: use jq -e, so that empty input fails", b.line+1+i, strings.TrimSpace(l)))
				}
			}
		}
	}
	return bad
}

// blockOutputs splits a run's combined output at the markers script writes before each block.
func blockOutputs(out []byte) map[int][]string {
	res := map[int][]string{}
	cur := -1
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, ">>> block at line "); ok {
			if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil {
				cur = n
				continue
			}
		}
		if cur >= 0 {
			res[cur] = append(res[cur], strings.TrimRight(l, " \t"))
		}
	}
	return res
}

// unmet returns the expected lines of b that no line of got matches.
func unmet(b block, got []string) []string {
	var missing []string
	for _, want := range b.expect {
		parts := strings.Split(want, "...")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		re := regexp.MustCompile(`^\s*` + strings.Join(parts, ".*") + `\s*$`)
		if !slices.ContainsFunc(got, re.MatchString) {
			missing = append(missing, want)
		}
	}
	return missing
}

// script is the bash program that runs a document's blocks. "make test" is left out: it is
// the command that runs this test.
func script(blocks []block) string {
	var b strings.Builder
	// __group lists in __pids every process of the shell's process group but the shell itself
	// and zombies (the test starts bash as a group leader, and what the blocks start, a go run's
	// child included, stays in the group). It reads /proc in the shell itself: no fork.
	// On exit, whatever is left in the group is stopped: background jobs, and what they started
	// (a go run's child, orphaned when its parent is stopped), which jobs -p does not list.
	b.WriteString(groupFunc)
	b.WriteString("set -euo pipefail\ntrap '__group; kill ${__pids[@]+\"${__pids[@]}\"} 2>/dev/null || true; wait 2>/dev/null || true' EXIT\n")
	for _, bl := range blocks {
		fmt.Fprintf(&b, "# --- block at line %d\necho '>>> block at line %d' >&2\n", bl.line, bl.line)
		for _, l := range strings.Split(bl.text, "\n") {
			if strings.TrimSpace(l) == "make test" {
				l = "# (make test: what runs this test)"
			}
			b.WriteString(l + "\n")
		}
	}
	b.WriteString(leftoverCheck)
	return b.String()
}

// leftoverMarker starts the line the script writes for each process the blocks left running.
const leftoverMarker = ">>> left running: "

// groupFunc defines __group (see script). /proc/PID/stat is "pid (comm) state ppid pgrp ...";
// the command name may hold spaces and parentheses, so the fields are read after its last ") ".
const groupFunc = `__group() {
  __pids=()
  [ -d /proc/self ] || return 0
  local stat line fields pid
  for stat in /proc/[0-9]*/stat; do
    { read -r line < "$stat"; } 2>/dev/null || continue
    fields=(${line##*) })
    pid=${stat#/proc/}; pid=${pid%/stat}
    if [ "${fields[2]}" = "$$" ] && [ "$pid" != "$$" ] && [ "${fields[0]}" != Z ]; then
      __pids+=("$pid")
    fi
  done
}
`

// leftoverCheck runs after a document's last block: every process still in the shell's group
// is one the blocks started and did not stop.
const leftoverCheck = `# --- after the last block: whatever the blocks started must have stopped
__group
for __pid in ${__pids[@]+"${__pids[@]}"}; do
  echo "` + leftoverMarker + `$__pid $(tr '\0' ' ' < /proc/$__pid/cmdline 2>/dev/null)" >&2
done
`

// leftovers returns the processes the script reported as left running.
func leftovers(out []byte) []string {
	var left []string
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, leftoverMarker); ok {
			left = append(left, strings.TrimSpace(rest))
		}
	}
	return left
}

// repoCopy copies the repository's tracked files (as a fresh clone has them) to a new directory.
func repoCopy(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	require.NoError(t, err, "git ls-files")
	dst := filepath.Join(t.TempDir(), "fleetbot")
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the work tree
		}
		require.NoError(t, err)
		if !info.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dst, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dst, name), data, info.Mode().Perm()))
	}
	// A git repository with one commit, as a fresh clone is: the control repo testdata/control
	// is then a directory of a larger repository, and plans name its commit.
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "-A"},
		{"-c", "user.name=doc", "-c", "user.email=doc@example.com", "commit", "-q", "-m", "clone"}} {
		out, err := exec.Command("git", append([]string{"-C", dst}, args...)...).CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	return dst
}

func TestRunnableBlocksParse(t *testing.T) {
	md := "x\n<!-- runnable -->\n```sh\necho a\n```\n\n```sh\necho not me\n```\n<!-- runnable -->\n```bash\necho b\n```\n"
	bs, err := runnableBlocks([]byte(md))
	require.NoError(t, err)
	require.Len(t, bs, 2)
	require.Equal(t, "echo a\n", bs[0].text)
	require.Equal(t, 3, bs[0].line)
	_, err = runnableBlocks([]byte("<!-- runnable -->\n```yaml\na: b\n```\n"))
	require.ErrorContains(t, err, "must be sh or bash")
	_, err = runnableBlocks([]byte("<!-- runnable -->\nsome text\n```sh\necho\n```\n"))
	require.ErrorContains(t, err, "right before a fenced block")
	bs, err = runnableBlocks([]byte("<!-- runnable -->\n```sh\necho a; echo 6 repos: 6 noop\n```\ntext\n\n<!-- output -->\n```\n6 repos: ... noop\n```\n"))
	require.NoError(t, err)
	require.Len(t, bs, 1)
	require.Equal(t, []string{"6 repos: ... noop"}, bs[0].expect)
	assert.Empty(t, unmet(bs[0], []string{"a", "6 repos: 6 noop"}))
	assert.Equal(t, []string{"6 repos: ... noop"}, unmet(bs[0], []string{"6 repos: 6 no change"}), "each expected line must match")
	_, err = runnableBlocks([]byte("<!-- output -->\n```\nx\n```\n"))
	require.ErrorContains(t, err, "must follow a runnable block")
	got := blockOutputs([]byte(">>> block at line 3\na\n>>> block at line 9\nb\nc\n"))
	assert.Equal(t, map[int][]string{3: {"a"}, 9: {"b", "c", ""}}, got)
	bad := strictness([]block{{line: 1, text: "curl -s $API/x | jq .\ncurl -s $API/y | jq -e .\n# curl | jq .\n"}})
	assert.Len(t, bad, 1, "a jq without -e passes on empty input")
}

// TestLeftoverCheck: the check after a document's blocks names a process a block started and
// no block stopped (here a sleep in the background, and a go-run-like parent's child), and is
// quiet when the blocks stop what they start.
func TestLeftoverCheck(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: the check reads it")
	}
	run := func(text string) []string {
		t.Helper()
		cmd := exec.Command("bash", "-c", script([]block{{line: 1, text: text}}))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.WaitDelay = time.Minute // a process that escaped the group holding the pipe
		out, err := cmd.CombinedOutput()
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		require.NoError(t, err, "%s", out)
		return leftovers(out)
	}
	// The parent, as go run, has started its child (written its pid) when it is stopped.
	left := run("sleep 600 &\nf=$(mktemp)\nbash -c \"sleep 700 & echo \\$! > $f; wait\" &\nuntil [ -s $f ]; do sleep 0.05; done\nkill $!; wait $! || true\n")
	assert.Len(t, left, 2, "the first sleep, and the child of the killed parent: %v", left)
	assert.True(t, slices.ContainsFunc(left, func(s string) bool { return strings.HasSuffix(s, "sleep 600") }), left)
	assert.True(t, slices.ContainsFunc(left, func(s string) bool { return strings.HasSuffix(s, "sleep 700") }), left)
	assert.Empty(t, run("sleep 600 &\npid=$!\nkill $pid; wait $pid || true\n"))
}

// assumesMarker opens the sentence in which a document with runnable blocks says, before its
// first one, what they assume: the directory they run from, the tools, the state they start
// from (an empty forge, a fresh temporary directory), what runs in the background.
const assumesMarker = "**Assumes:**"

// TestDocumentsSayWhatTheyAssume: every document with runnable blocks says what they assume
// before the first of them, so a reader who runs them on a machine in another state knows.
func TestDocumentsSayWhatTheyAssume(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, doc := range append(docs, filepath.Join(root, "README.md")) {
		md, err := os.ReadFile(doc)
		require.NoError(t, err)
		first := bytes.Index(md, []byte(marker))
		if first < 0 {
			continue
		}
		assert.Contains(t, string(md[:first]), assumesMarker, "%s: say what its runnable blocks assume (%s ...) before the first", doc, assumesMarker)
	}
}

// TestRunnableBlocksAreStrict: every documented jq fails on empty input, so a curl that prints
// nothing (a redirect, an error page) fails the docs test instead of passing silently.
func TestRunnableBlocksAreStrict(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, doc := range append(docs, filepath.Join(root, "README.md")) {
		md, err := os.ReadFile(doc)
		require.NoError(t, err)
		bs, err := runnableBlocks(md)
		require.NoError(t, err, doc)
		assert.Empty(t, strictness(bs), doc)
	}
}

// TestDocumentedCommandsRun runs every document's runnable blocks. It needs git, curl and jq
// (.ci/run installs them); under CI a missing one fails, elsewhere the test skips.
func TestDocumentedCommandsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the documented commands: builds binaries and servers (make test runs it)")
	}
	for _, tool := range []string{"git", "curl", "jq", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is needed to run the documented commands", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	docs = append([]string{filepath.Join(root, "README.md")}, docs...)
	// The documents run in parallel, each in its own copy of the repo (they bind only
	// 127.0.0.1:0 and write under their copy or mktemp). -trimpath keeps the directory out of
	// Go's build cache keys, so every copy reuses one compilation of fleetbot's packages (and
	// one cached binary per `go run`) instead of compiling them again per copy; warming the
	// cache here, once, keeps the parallel documents from compiling the same packages at once.
	// CGO_ENABLED=0, as the release image builds (Dockerfile): kustomize imports package plugin,
	// which with cgo makes every link of cmd/bot an external one (gcc and ld: ~3.3 CPU-s per
	// `go build -o` instead of ~1.7, and the documents link five binaries).
	gocache, err := exec.Command("go", "env", "GOCACHE").Output()
	require.NoError(t, err)
	env := append(os.Environ(), "GOTOOLCHAIN=local", "GOFLAGS="+docGoFlags, "CGO_ENABLED=0",
		"GOCACHE="+strings.TrimSpace(string(gocache)))
	// `go run`, as the documents do: its executables are cached too (a `go build -o` links
	// again every time, seconds of CPU per binary).
	for _, warm := range [][]string{{"run", "./cmd/bot", "help"}, {"run", "./internal/githubtest/cmd/fakegithub", "-h"}} {
		cmd := exec.Command("go", warm...)
		cmd.Dir, cmd.Env = root, env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "building the binaries the documents run (go %s): %s", strings.Join(warm, " "), out)
	}
	ran := 0
	for _, doc := range docs {
		md, err := os.ReadFile(doc)
		require.NoError(t, err)
		blocks, err := runnableBlocks(md)
		require.NoError(t, err, doc)
		if len(blocks) == 0 {
			continue
		}
		name, _ := filepath.Rel(root, doc)
		ran++
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := repoCopy(t, root)
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", script(blocks))
			cmd.Dir = dir
			// The documented commands write fleetbot's GitHub snapshot cache under the user cache
			// dir: a scratch one here, with Go's build cache kept where it is (a cold one would
			// rebuild everything).
			// TMPDIR: the directories the documents make with mktemp go with the test.
			cmd.Env = append(append([]string(nil), env...), "XDG_CACHE_HOME="+t.TempDir(), "TMPDIR="+t.TempDir())
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
			// A process that left the group (setsid) and holds the output pipe does not keep
			// the test waiting past the shell's exit.
			cmd.WaitDelay = time.Minute
			out, err := cmd.CombinedOutput()
			// Whatever the blocks left running in the background goes with the group.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			if err != nil {
				t.Fatalf("%s: the documented commands fail as written: %v\n%s", name, err, tail(out, 6000))
			}
			if left := leftovers(out); len(left) > 0 {
				t.Errorf("%s: its blocks leave processes running (pid, command line):\n  %s\nstop in the document what it starts (kill \"$pid\"; wait \"$pid\"), a go run's child too: start a built binary instead",
					name, strings.Join(left, "\n  "))
			}
			outs := blockOutputs(out)
			for _, b := range blocks {
				if missing := unmet(b, outs[b.line]); len(missing) > 0 {
					t.Errorf("%s:%d: the output documented for the block at line %d is not what it prints; missing:\n  %s\nit printed:\n%s",
						name, b.outputLine, b.line, strings.Join(missing, "\n  "), tail([]byte(strings.Join(outs[b.line], "\n")), 3000))
				}
			}
			t.Logf("%s: %d blocks ran", name, len(blocks))
			if testing.Verbose() {
				t.Log(tail(out, 4000))
			}
		})
	}
	require.Positive(t, ran, "no runnable block in README.md or docs/")
}

// docGoFlags are the go command's flags for the documented commands: no VCS stamping (the
// copies are not git checkouts), -trimpath (see TestDocumentedCommandsRun) and, as the release
// image and the Action build, no symbol table or DWARF (-s): a link of cmd/bot takes ~1.0 CPU-s
// instead of ~1.7, and the documents link five binaries. A -ldflags of a documented command
// (make demo's) replaces this one.
const docGoFlags = "-buildvcs=false -trimpath -ldflags=-s"

func tail(b []byte, n int) string {
	if len(b) > n {
		return "…" + string(b[len(b)-n:])
	}
	return string(b)
}
