#!/usr/bin/env bash
# Runs every package's tests with the race detector, as `go test -race -count=1 $PKGS` does,
# from test binaries kept in .cache/test-bin/race/: `go test` links every test binary again on
# every run (~30 CPU-seconds for this module, whatever the build cache holds; golang/go#77349),
# `go test -c -o DIR/` links only the stale ones. Each binary runs in its package's directory
# with go test's defaults (-test.timeout=10m, -test.paniconexit0), two packages at a time (one
# per CPU, as go test's -p), and prints go test's summary line; a failing package's whole output
# follows its FAIL line. Exit status 1 when a package fails or does not build.
set -uo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
pkgs=${PKGS:-./...}
jobs=${TEST_JOBS:-$(nproc)}
bin=$PWD/.cache/test-bin/race
mkdir -p "$bin"
# As go test does: the go command the tests run is this one.
PATH="$("$go" env GOROOT)/bin:$PATH"
export PATH bin
# Scratch files on a RAM file system when one with room is at hand: the tests create and delete
# git objects by the ten thousand (forge/local's repos, the fake GitHub's bare repos), and on a
# full, long-lived ext4 each new inode costs a search (a third of reconcile's CPU went to
# kernel inode allocation). TEST_TMPDIR overrides; a tmpfs with less than 2 GiB free is not used.
if [ -z "${TEST_TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ] &&
  [ "$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $4 }')" -ge 2097152 ] 2>/dev/null; then
  TEST_TMPDIR=$(mktemp -d /dev/shm/fleetbot-test.XXXXXX)
  trap 'rm -rf "$TEST_TMPDIR"' EXIT
fi
[ -n "${TEST_TMPDIR:-}" ] && export TMPDIR=$TEST_TMPDIR
# The race detector sleeps 1 s at every binary's exit (atexit_sleep_ms) so that goroutines still
# running can report; the tests end their goroutines (and a race inside a test fails that test),
# so the sleep only costs ~15 s of wall time over ~30 binaries. A GORACE of your own comes after
# and wins.
export GORACE="atexit_sleep_ms=0${GORACE:+ $GORACE}"
# shellcheck disable=SC2086 # $pkgs is a list of patterns
"$go" test -race -c -o "$bin/" $pkgs | grep -v '\[no test files\]'
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1

run_one() { # import path, directory, test binary
  local log start rc ms
  log=$(mktemp)
  start=$(date +%s%N)
  (cd "$2" && "$3" -test.count=1 -test.timeout=10m -test.paniconexit0 >"$log" 2>&1)
  rc=$?
  ms=$((($(date +%s%N) - start) / 1000000))
  [ "$rc" -eq 0 ] && : >"$log" # a passing package prints its summary line only, as go test
  if [ "$rc" -eq 0 ]; then
    printf 'ok  \t%s\t%d.%03ds\n' "$1" $((ms / 1000)) $((ms % 1000)) >>"$log"
  else
    printf 'FAIL\t%s\t%d.%03ds\n' "$1" $((ms / 1000)) $((ms % 1000)) >>"$log"
  fi
  flock "$bin/.output" cat "$log" # one package's output at a time
  flock "$bin/.output" sh -c 'echo "$1 $2" >>"$bin/.durations.new"' _ "$1" "$ms"
  rm -f "$log"
  return "$rc"
}
export -f run_one

# One line per package with tests: import path, directory, binary (named as go test -c -o names it),
# the longest first by the last run's times (kept in $bin/.durations; a package without one
# counts as longest), so that two slow packages do not end up last, one CPU idle meanwhile.
: >"$bin/.durations.new"
# shellcheck disable=SC2086
"$go" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' $pkgs |
  while read -r path dir; do
    ms=$(awk -v p="$path" '$1 == p { print $2 }' "$bin/.durations" 2>/dev/null)
    echo "${ms:-999999999} $path $dir $bin/${path##*/}.test"
  done | sort -k1,1nr | cut -d' ' -f2- |
  xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _
rc=$?
mv "$bin/.durations.new" "$bin/.durations"
[ "$rc" -eq 0 ] || exit 1
