#!/usr/bin/env bash
# Builds (or reuses) the binaries and CRDs of the end-to-end environment and
# prints the directory holding them: bin/ (kube-apiserver,
# kube-controller-manager, source-controller, kustomize-controller) and crds/
# (Flux's CRDs from the same module versions). The versions are pinned by the
# wrapper modules e2e/tools/kube and e2e/tools/flux, and nowhere else; the
# cache directory is keyed by them, this script and the Go version, so a bump
# rebuilds. Older cache directories are left alone (remove them by hand).
# etcd comes from Debian (etcd-server), see .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

cache=${FLEETBOT_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetbot-e2e}
kube=$(cd e2e/tools/kube && go list -m -f '{{.Version}}' k8s.io/kubernetes)
flux=$(cd e2e/tools/flux && go list -m -f '{{.Version}}' github.com/fluxcd/kustomize-controller)
sum=$(cat scripts/e2e-tools.sh e2e/tools/kube/go.mod e2e/tools/kube/go.sum e2e/tools/flux/go.mod e2e/tools/flux/go.sum <(go env GOVERSION) | sha256sum | cut -c1-12)
dir="$cache/kube-$kube-flux-$flux-$sum"

bins=(kube-apiserver kube-controller-manager source-controller kustomize-controller)
ready() {
  for b in "${bins[@]}"; do [ -x "$dir/bin/$b" ] || return 1; done
  [ -d "$dir/crds" ]
}
if ready; then
  echo "$dir"
  exit 0
fi
# One build at a time: a second make e2e waits for the first one's build
# instead of building too and replacing the directory under its tests.
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if ready; then
  echo "$dir"
  exit 0
fi

start=$(date +%s)
tmp="$dir.tmp.$$"
rm -rf "$tmp"
mkdir -p "$tmp/bin" "$tmp/crds"
trap 'rm -rf "$tmp"' EXIT
echo "e2e: building Kubernetes $kube and Flux controllers $flux into $dir (first time: several minutes)" >&2
(cd e2e/tools/kube && go build -trimpath -ldflags="-s -w" -o "$tmp/bin/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager) >&2
(cd e2e/tools/flux && go build -trimpath -ldflags="-s -w" -o "$tmp/bin/" github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller) >&2
for m in github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller; do
  src=$(cd e2e/tools/flux && go list -m -f '{{.Dir}}' "$m")
  cp "$src"/config/crd/bases/*.yaml "$tmp/crds/"
done
chmod -R u+w "$tmp"
rm -rf "$dir"
mv "$tmp" "$dir"
trap - EXIT
echo "e2e: built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
