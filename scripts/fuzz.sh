#!/usr/bin/env bash
# Runs each fuzz target (package:Target) for FUZZTIME. Go's fuzz coordinator can end a clean
# run with a bare "context deadline exceeded" at the -fuzztime boundary, writing no failing
# input (golang/go#75804, fixed in Go 1.27): that one outcome is reported and not counted as
# a finding. Any other failure, or a new failing input under testdata/fuzz/, fails the run.
set -uo pipefail
go=${GO:-go}
fuzztime=${FUZZTIME:-30s}
status=0
for t in "$@"; do
  pkg=${t%%:*} name=${t##*:}
  corpus="$pkg/testdata/fuzz/$name"
  before=$(ls "$corpus" 2>/dev/null | sort)
  echo "fuzz $pkg $name for $fuzztime"
  out=$("$go" test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -fuzzminimizetime 10s "$pkg" 2>&1)
  rc=$?
  printf '%s\n' "$out" | grep -v '^fuzz: elapsed' | tail -n 40
  [ "$rc" -eq 0 ] && continue
  after=$(ls "$corpus" 2>/dev/null | sort)
  # The failure body: the lines between "--- FAIL" and the final FAIL.
  body=$(printf '%s\n' "$out" | sed -n '/^--- FAIL/,/^FAIL$/p' | grep -v -e '^--- FAIL' -e '^FAIL$' -e '^exit status' | sed 's/^[[:space:]]*//' | grep -v '^$')
  if [ "$before" = "$after" ] && [ "$body" = "context deadline exceeded" ]; then
    echo "fuzz $name: Go's fuzz coordinator ended at the deadline (golang/go#75804); no failing input, not a finding"
    continue
  fi
  echo "fuzz $name: FAILED (a failing input is under $corpus when one was found)"
  status=1
done
exit $status
