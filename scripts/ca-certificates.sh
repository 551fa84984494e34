#!/usr/bin/env bash
# Rebuilds the release image's CA bundle, deploy/image/rootfs/etc/ssl/certs/ca-certificates.crt,
# from Debian's ca-certificates package, pinned by version and SHA-256 below: the certificates
# of /usr/share/ca-certificates/mozilla/ concatenated in file-name order, as Debian's
# update-ca-certificates writes /etc/ssl/certs/ca-certificates.crt with the default
# /etc/ca-certificates.conf (and no local CAs). The bundle is committed, so make release needs no
# network and two releases of one commit carry the same bytes. To move: pick the version Debian
# now serves (apt-cache policy ca-certificates), set VERSION and SHA256 (apt-cache show
# ca-certificates=VERSION | grep SHA256), run this, review the diff, commit, note it in CHANGELOG.md.
#   scripts/ca-certificates.sh      # needs apt-get (after apt-get update) and dpkg-deb
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=20230311+deb12u1
SHA256=0d5f444f594e48c1e16a41d8fc628a09b24c658916a1274025c2330f2a802bed
out=deploy/image/rootfs/etc/ssl/certs/ca-certificates.crt

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && apt-get download -q "ca-certificates=$VERSION" >/dev/null)
deb=$(ls "$work"/ca-certificates_*.deb)
got=$(sha256sum "$deb" | cut -d' ' -f1)
if [ "$got" != "$SHA256" ]; then
  echo "ca-certificates: $deb has SHA-256 $got, want $SHA256 (the pin in $0)" >&2
  exit 1
fi
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$work" ./usr/share/ca-certificates/mozilla
export LC_ALL=C # the glob below sorts bytewise
: > "$work/bundle.crt"
for f in "$work"/usr/share/ca-certificates/mozilla/*.crt; do
  # shellcheck disable=SC1003 # sed's "append a newline if the last line has none"
  sed -e '$a\' "$f" >> "$work/bundle.crt"
done
mkdir -p "$(dirname "$out")"
mv "$work/bundle.crt" "$out"
echo "ca-certificates: $out from ca-certificates $VERSION ($(grep -c 'BEGIN CERTIFICATE' "$out") certificates)"
