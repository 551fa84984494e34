#!/usr/bin/env bash
# Builds (or reuses) the binaries and CRDs of the end-to-end environment and
# prints the directory holding them: bin/ (kube-apiserver,
# kube-controller-manager, source-controller, kustomize-controller,
# helm-controller, notification-controller) and crds/ (Flux's CRDs from the
# same module versions). That directory is the value of FLEETBOT_E2E_TOOLS.
#
# The binaries come in tool sets, one per wrapper module e2e/tools/<set>
# (kube, flux, helm, notification), which pin the versions and nothing else
# does. Each set is built into its own cache directory
# <cache>/<set>-<version>-<hash>/{bin,crds}, keyed by the set's go.mod and
# go.sum, the Go version and the set's recipe below, so adding or bumping
# one set rebuilds only that set (Kubernetes takes ~14 CPU-minutes).
# The printed directory <cache>/env-<hash>/ holds symlinks to every set's
# files. Older cache directories are left alone (remove them by hand).
# etcd comes from Debian (etcd-server), see .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

cache=${FLEETBOT_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetbot-e2e}
gover=$(go env GOVERSION)

# The recipe of each set: the module whose version names its directory, the
# packages it builds (one binary each) and the modules whose
# config/crd/bases it installs. A set's key hashes its own line and the
# build flags, so editing one set's recipe rebuilds only that set.
sets=(kube flux helm notification)
declare -A label pkgs crdmods
label[kube]=k8s.io/kubernetes
pkgs[kube]="k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager"
crdmods[kube]=""
label[flux]=github.com/fluxcd/kustomize-controller
pkgs[flux]="github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller"
crdmods[flux]="github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller"
label[helm]=github.com/fluxcd/helm-controller
pkgs[helm]="github.com/fluxcd/helm-controller"
crdmods[helm]="github.com/fluxcd/helm-controller"
label[notification]=github.com/fluxcd/notification-controller
pkgs[notification]="github.com/fluxcd/notification-controller"
crdmods[notification]="github.com/fluxcd/notification-controller"
buildflags=(-trimpath "-ldflags=-s -w")

# setdir prints the cache directory of set $1.
setdir() {
  local s=$1 mod=e2e/tools/$1 version sum
  version=$(cd "$mod" && go list -m -f '{{.Version}}' "${label[$s]}")
  sum=$(printf '%s\n' "recipe 1" "${buildflags[*]}" "${pkgs[$s]}" "${crdmods[$s]}" "$gover" |
    cat - "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-12)
  echo "$cache/$s-$version-$sum"
}

# built says whether set $1's directory $2 is complete.
built() {
  local p
  for p in ${pkgs[$1]}; do [ -x "$2/bin/${p##*/}" ] || return 1; done
  [ -d "$2/crds" ]
}

# build builds set $1 into its directory $2 (through a temporary directory,
# so a half-built set is never found).
build() {
  local s=$1 dir=$2 m src start
  tmp=$2.tmp.$$ # global: the EXIT trap may run outside this function
  start=$(date +%s)
  rm -rf "$tmp"
  mkdir -p "$tmp/bin" "$tmp/crds"
  trap 'rm -rf "$tmp"' EXIT
  echo "e2e: building $s (${pkgs[$s]}) into $dir" >&2
  # shellcheck disable=SC2086 # pkgs is a list of package paths
  (cd "e2e/tools/$s" && nice go build "${buildflags[@]}" -o "$tmp/bin/" ${pkgs[$s]}) >&2
  for m in ${crdmods[$s]}; do
    src=$(cd "e2e/tools/$s" && go list -m -f '{{.Dir}}' "$m")
    cp "$src"/config/crd/bases/*.yaml "$tmp/crds/"
  done
  chmod -R u+w "$tmp"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  trap - EXIT
  echo "e2e: built $s in $(($(date +%s) - start))s" >&2
}

declare -A dirs
for s in "${sets[@]}"; do dirs[$s]=$(setdir "$s"); done
env=$cache/env-$(for s in "${sets[@]}"; do echo "${dirs[$s]##*/}"; done | sha256sum | cut -c1-12)

ready() {
  local s
  for s in "${sets[@]}"; do built "$s" "${dirs[$s]}" || return 1; done
  [ -d "$env/bin" ] && [ -d "$env/crds" ]
}
if ready; then
  echo "$env"
  exit 0
fi
# One build at a time: a second make e2e waits for the first one's build
# instead of building too and replacing a directory under its tests.
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
for s in "${sets[@]}"; do
  built "$s" "${dirs[$s]}" || build "$s" "${dirs[$s]}"
done
if ! [ -d "$env/bin" ] || ! [ -d "$env/crds" ]; then
  tmp=$env.tmp.$$
  rm -rf "$tmp"
  mkdir -p "$tmp/bin" "$tmp/crds"
  for s in "${sets[@]}"; do
    for f in "${dirs[$s]}"/bin/* "${dirs[$s]}"/crds/*; do
      [ -e "$f" ] || continue
      ln -s "$f" "$tmp/${f#"${dirs[$s]}"/}"
    done
  done
  rm -rf "$env"
  mv "$tmp" "$env"
fi
echo "$env"
