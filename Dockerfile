# fleetbot: one static binary on a distroless base, running as a non-root user.
#   docker build -t fleetbot:dev --build-arg VERSION=$(git describe --always --dirty) .
#   docker run --rm fleetbot:dev version
# The default command is the webhook service (fleetbot serve); see docs/serve.md.

FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN go build -ldflags "-s -w -X main.version=${VERSION}" -o /out/fleetbot ./cmd/bot

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/fleetbot /fleetbot
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/fleetbot"]
CMD ["serve"]
