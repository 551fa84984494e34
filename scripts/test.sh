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
  rm -f "$log"
  return "$rc"
}
export -f run_one

# One line per package with tests: import path, directory, binary (named as go test -c -o names it).
# shellcheck disable=SC2086
"$go" list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' $pkgs |
  while read -r path dir; do echo "$path $dir $bin/${path##*/}.test"; done |
  xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _ || exit 1
