// Package doctest holds the test that runs the shell blocks of README.md and docs/*.md marked
// runnable, as a new user would copy them, against the local forge and the fake GitHub: a
// command that stops working as written fails the suite.
//
// A block is runnable when the line before its opening fence is exactly
//
//	<!-- runnable -->
//
// The runnable blocks of one document run in order in one bash session (set -euo pipefail),
// from a copy of the repository's tracked files, offline; background jobs are killed at the end.
package doctest
