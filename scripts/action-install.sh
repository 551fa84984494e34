#!/usr/bin/env bash
# The Action's first step (action.yml): put the released fleetbot of the action's own tag at
# $RUNNER_TEMP/fleetbot-action/fleetbot, verified against the release's SHA256SUMS, or say that
# the next steps build it from the action's source (output build=true). docs/action.md,
# "Which fleetbot runs".
#
# Release: when the action's ref is a release tag (vMAJOR, vMAJOR.MINOR or vMAJOR.MINOR.PATCH,
# e.g. uses: fleetbot-io/fleetbot@v1) and build-from-source is not "true". The release is the
# vMAJOR.MINOR.PATCH tag on the commit the ref names (git ls-remote: v1 and v1.4.2 on one
# commit run v1.4.2). Its archive for this runner is downloaded, its SHA-256 compared with
# SHA256SUMS, and the binary must say it is that version, built from that commit. Anything
# else fails the step and leaves no binary behind: a missing release, a missing or wrong
# checksum, a runner with no release binary. It never falls back to building by itself.
# Source: build-from-source "true", or a ref that is not a release tag (a branch, a commit
# SHA, a local action "./").
#
# Environment: FLEETBOT_ACTION_REF, FLEETBOT_ACTION_REPOSITORY, FLEETBOT_ACTION_PATH (github.action_*),
# FLEETBOT_BUILD_FROM_SOURCE (the input), GITHUB_SERVER_URL, RUNNER_OS, RUNNER_ARCH, RUNNER_TEMP,
# GITHUB_OUTPUT; FLEETBOT_RELEASES_URL and FLEETBOT_GIT_URL override where releases and tags are
# read (tests; a mirror).
set -euo pipefail

dest="$RUNNER_TEMP/fleetbot-action"
bin="$dest/fleetbot"
rm -f "$bin"
mkdir -p "$dest"

fail() {
  rm -f "$bin"
  echo "::error title=fleetbot::$1"
  exit 1
}
build_from_source() {
  echo "fleetbot: $1: building fleetbot from the action's source"
  echo "build=true" >>"$GITHUB_OUTPUT"
  exit 0
}

ref=${FLEETBOT_ACTION_REF:-}
repo=${FLEETBOT_ACTION_REPOSITORY:-}
# github.action_ref and github.action_repository can be empty inside a composite action
# (actions/runner#2473); the runner keeps a downloaded action at .../_actions/OWNER/REPO/REF.
if [ -z "$ref" ] || [ -z "$repo" ]; then
  path=${FLEETBOT_ACTION_PATH:-}
  if [[ "$path" =~ /_actions/([^/]+)/([^/]+)/([^/]+)/?$ ]]; then
    repo=${repo:-${BASH_REMATCH[1]}/${BASH_REMATCH[2]}}
    ref=${ref:-${BASH_REMATCH[3]}}
  fi
fi

if [ "${FLEETBOT_BUILD_FROM_SOURCE:-false}" = "true" ]; then
  build_from_source "build-from-source is true"
fi
num='(0|[1-9][0-9]*)'
pre='(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?'
if ! [[ "$ref" =~ ^v$num(\.$num(\.$num$pre)?)?$ ]]; then
  build_from_source "the action's ref '${ref}' is not a release tag (vMAJOR, vMAJOR.MINOR or vMAJOR.MINOR.PATCH)"
fi
if [ -z "$repo" ]; then
  fail "cannot tell which repository the action came from (github.action_repository is empty); set build-from-source: true"
fi

case "${RUNNER_OS:-}" in
  Linux) os=linux ;;
  macOS) os=darwin ;;
  *) fail "fleetbot releases have no binary for runner OS '${RUNNER_OS:-}' (Linux and macOS only); set build-from-source: true" ;;
esac
case "${RUNNER_ARCH:-}" in
  X64) arch=amd64 ;;
  ARM64) arch=arm64 ;;
  *) fail "fleetbot releases have no binary for runner architecture '${RUNNER_ARCH:-}' (X64 and ARM64 only); set build-from-source: true" ;;
esac

server=${GITHUB_SERVER_URL:-https://github.com}
git_url=${FLEETBOT_GIT_URL:-$server/$repo}
releases=${FLEETBOT_RELEASES_URL:-$server/$repo/releases/download}

# The commit of every tag (an annotated tag's peeled "^{}" line wins).
if ! tags=$(git ls-remote --tags "$git_url" 2>&1); then
  fail "cannot list the tags of $git_url to find the release of $ref: $(echo "$tags" | tail -1); set build-from-source: true to build instead"
fi
commits=$(awk '{ n = $2; sub(/^refs\/tags\//, "", n); if (sub(/\^\{\}$/, "", n)) { p[n] = $1 } else if (!(n in d)) { d[n] = $1 } }
  END { for (n in d) print n, (n in p ? p[n] : d[n]) }' <<<"$tags")
commit=$(awk -v t="$ref" '$1 == t { print $2 }' <<<"$commits")
if [ -z "$commit" ]; then
  fail "tag $ref does not exist in $git_url"
fi
if [[ "$ref" =~ ^v$num\.$num\.$num$pre$ ]]; then
  version=$ref
else
  # The full version on the same commit, a release before a pre-release, the highest first.
  version=$(awk -v c="$commit" -v p="$ref." '$2 == c && index($1, p) == 1 { print $1 }' <<<"$commits" |
    { grep -E "^v$num\.$num\.$num$pre\$" || true; } | awk '{ print (index($0, "-") ? 0 : 1), $0 }' |
    sort -k1,1n -k2,2V | tail -1 | cut -d' ' -f2)
  if [ -z "$version" ]; then
    fail "$ref (commit $commit) is not a release: no ${ref}.x.y tag on that commit; use a released tag or set build-from-source: true"
  fi
fi

archive="fleetbot_${version#v}_${os}_${arch}.tar.gz"
base="$releases/$version"
download() { # url, file
  curl -fsSL --retry 3 --proto '=https,http' -o "$2" "$1"
}
if ! download "$base/SHA256SUMS" "$dest/SHA256SUMS"; then
  fail "cannot download SHA256SUMS of release $version ($base/SHA256SUMS); is $version released? set build-from-source: true to build instead"
fi
want=$(awk -v f="$archive" '$2 == f || $2 == "*" f { print $1 }' "$dest/SHA256SUMS")
if [ "$(grep -c . <<<"$want")" != 1 ] || ! [[ "$want" =~ ^[0-9a-f]{64}$ ]]; then
  fail "SHA256SUMS of release $version has no single SHA-256 for $archive"
fi
if ! download "$base/$archive" "$dest/$archive"; then
  fail "cannot download $archive of release $version ($base/$archive)"
fi
if command -v sha256sum >/dev/null; then
  got=$(sha256sum "$dest/$archive" | cut -d' ' -f1)
else
  got=$(shasum -a 256 "$dest/$archive" | cut -d' ' -f1)
fi
if [ "$got" != "$want" ]; then
  rm -f "$dest/$archive"
  fail "checksum mismatch for $archive of release $version: SHA-256 $got, SHA256SUMS says $want; not running it"
fi
tar -xzf "$dest/$archive" -C "$dest" fleetbot
rm -f "$dest/$archive"

# The binary says it is that release, built from the tag's commit.
if ! info=$("$bin" version -o json 2>&1); then
  fail "the fleetbot of $archive does not run on this runner: $info"
fi
if ! grep -Eq "\"version\": *\"$version\"" <<<"$info" || ! grep -Eq "\"revision\": *\"$commit\"" <<<"$info"; then
  fail "the fleetbot of $archive is not release $version of commit $commit: it says $(tr -d '\n ' <<<"$info")"
fi
echo "fleetbot: release $version ($commit) for $os/$arch, SHA-256 $got as SHA256SUMS lists it"
echo "build=false" >>"$GITHUB_OUTPUT"
