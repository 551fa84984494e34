#!/usr/bin/env bash
# Re-resolves the tags of the Dockerfile's base images to their current digests (the multi-arch
# index) and rewrites the FROM lines: run it when you decide to move, review the diff, commit.
#   scripts/pin-images.sh            # needs network access to the registries
# Uses crane (github.com/google/go-containerregistry), installed pinned into bin/ on first use.
set -euo pipefail
cd "$(dirname "$0")/.."
CRANE_VERSION=v0.22.1
crane=bin/crane-$CRANE_VERSION
if [ ! -x "$crane" ]; then
  GOBIN="$PWD/bin" GOFLAGS= go install "github.com/google/go-containerregistry/cmd/crane@$CRANE_VERSION"
  mv bin/crane "$crane"
fi
grep -E '^FROM [^ ]+@sha256:' Dockerfile | awk '{print $2}' | while read -r ref; do
  tag=${ref%@sha256:*}
  digest=$("$crane" digest "$tag")
  if [ "$ref" != "$tag@$digest" ]; then
    sed -i "s|$ref|$tag@$digest|" Dockerfile
    echo "pin-images: $tag -> $digest"
  fi
done
