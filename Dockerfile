# fleetbot: one static binary FROM scratch, running as the non-root user 65532. make release builds
# the same image without Docker (cmd/release: same build flags, files, user, entrypoint and labels;
# TestDockerfileMatchesTheReleaseImage keeps the two alike), reproducibly, for linux/amd64 and arm64.
#   docker build -t fleetbot:dev --build-arg VERSION=$(git describe --always --dirty) \
#     --build-arg COMMIT=$(git rev-parse HEAD) --build-arg CREATED=$(git show -s --format=%cI HEAD) .
#   docker run --rm fleetbot:dev version
# The default command is the webhook service (fleetbot serve); see docs/serve.md.
#
# The build image is pinned by digest (the multi-arch index) so a rebuild of the same commit uses
# the same compiler; scripts/pin-images.sh re-resolves the tag and rewrites the digest below when
# you decide to move (a new Go patch release). The final image has no base: its files besides the
# binary are deploy/image/rootfs (passwd and group with the nonroot user, nsswitch.conf, Debian's
# CA certificates for serve's TLS to GitHub: scripts/ca-certificates.sh).

FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=
RUN go build -trimpath -buildvcs=false -ldflags "-s -w -X main.version=${VERSION} -X main.commit=${COMMIT}" -o /out/fleetbot ./cmd/bot
RUN mkdir -p /rootfs/home/nonroot /rootfs/tmp && cp -R deploy/image/rootfs/. /rootfs/ && \
    chown 65532:65532 /rootfs/home/nonroot && chmod 0700 /rootfs/home/nonroot && chmod 1777 /rootfs/tmp

FROM scratch
ARG VERSION=dev
ARG COMMIT=
ARG CREATED=
COPY --from=build /rootfs/ /
COPY --from=build /out/fleetbot /fleetbot
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
WORKDIR /home/nonroot
EXPOSE 8080
LABEL org.opencontainers.image.title="fleetbot" \
      org.opencontainers.image.description="fleetbot serve: the GitHub App webhook service of fleetbot" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${COMMIT}" \
      org.opencontainers.image.source="https://github.com/fleetbot-io/fleetbot" \
      org.opencontainers.image.url="https://github.com/fleetbot-io/fleetbot" \
      org.opencontainers.image.licenses="NOASSERTION" \
      org.opencontainers.image.created="${CREATED}"
ENTRYPOINT ["/fleetbot"]
CMD ["serve"]
