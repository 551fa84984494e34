# fleetbot: one static binary on a distroless base, running as a non-root user.
#   docker build -t fleetbot:dev --build-arg VERSION=$(git describe --always --dirty) .
#   docker run --rm fleetbot:dev version
# The default command is the webhook service (fleetbot serve); see docs/serve.md.
#
# Base images are pinned by digest (the multi-arch index) so a rebuild of the same commit uses the
# same bytes; scripts/pin-images.sh re-resolves the tags and rewrites the digests below when you
# decide to move (a new Go patch release, a distroless security update).

FROM golang:1.26.8-bookworm@sha256:a688600ca24f8a4d3ca77f95b0dd40704a9fc787c826660eb7ba0b641b8b175d AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN go build -ldflags "-s -w -X main.version=${VERSION}" -o /out/fleetbot ./cmd/bot

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/fleetbot /fleetbot
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/fleetbot"]
CMD ["serve"]
