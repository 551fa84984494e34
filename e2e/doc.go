// Package e2e runs fleetbot against a real Kubernetes API server and real
// Flux controllers: etcd, kube-apiserver, kube-controller-manager,
// source-controller, kustomize-controller, helm-controller and
// notification-controller run as processes on 127.0.0.1,
// the local forge's repos are served over smart HTTP by fleetbot dev
// git-serve, and the tests bootstrap Flux on a cluster repo fleetbot wrote,
// merge fleetbot's pull requests and wait for what Flux applies.
//
// The tests run only under make e2e, which builds (or reuses) the pinned
// binaries with scripts/e2e-tools.sh and passes their directory in
// FLEETBOT_E2E_TOOLS; without it they report that they did not run and
// pass, so go test ./... stays offline and fast.
package e2e
