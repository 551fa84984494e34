// Package bench measures fleetbot at fleet scale: full and naive renders of
// generated control repos, an incremental plan after a one-cluster change,
// GitHub request cost and fan-out time on the fake GitHub under the default
// content-creation budget, the naive baseline with the real kustomize CLI,
// and the real fleetbot serve binary over HTTP (a pushed one-cluster change
// end to end, acknowledgement latency and queue depth under load). cmd/benchtable runs each measurement in a child process (so each
// has an honest peak RSS) and writes docs/benchmarks.md from the results.
//
// Nothing here runs in "go test ./..." beyond small unit tests of the
// helpers: the measurements take minutes and are driven by "make bench".
package bench
