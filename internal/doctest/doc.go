// Package doctest holds the test that runs the shell blocks of README.md and docs/*.md marked
// runnable, as a new user would copy them, against the local forge and the fake GitHub: a
// command that stops working as written fails the suite.
//
// A block is runnable when the line before its opening fence is exactly
//
//	<!-- runnable -->
//
// and the fenced block right after it may be marked
//
//	<!-- output -->
//
// to show what the runnable block prints: each of its lines must match a whole line of that
// output, "..." standing for anything, so the figures the docs quote (request counts, verdicts,
// summaries) are measured, not remembered. A jq in a runnable block must be jq -e: without it,
// a curl that printed nothing (a redirect, an error page) would pass.
//
// The runnable blocks of one document run in order in one bash session (set -euo pipefail),
// in a git repository holding a copy of the repository's tracked files (as a fresh clone is),
// offline. A block that starts a process (the fake GitHub, fleetbot serve) must stop it in the
// same document: after the last block, a process still in the session's process group fails
// the test, named with its command line (a `go run` of a server leaves its child running when
// go run is killed: the documents start built binaries). Whatever is left is then killed. A
// document with runnable blocks says what they assume ("**Assumes:**", before the first one):
// the directory, the tools, the state they start from.
package doctest
