# fleetbot — build, test and measure. Every target works offline once the
# Go module cache is warm (go mod download).
GO        ?= go
BIN       ?= bin/fleetbot
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
FORGE     ?= .fleetbot/forge
PKGS      ?= ./...

export GOTOOLCHAIN := local

.PHONY: build test test-short lint bench demo clean

## build: the fleetbot binary in bin/
build:
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/bot

## test: vet, then every test with the race detector
test:
	$(GO) vet $(PKGS)
	$(GO) test -race -count=1 $(PKGS)

## test-short: tests without the race detector (faster while editing)
test-short:
	$(GO) test -count=1 $(PKGS)

## lint: formatting and vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: render and reconcile benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1x -timeout 30m ./internal/fanout/

## demo: apply the example control repo into a local forge, then show the result
demo: build
	$(BIN) apply --control testdata/control --forge local:$(FORGE)
	git --git-dir $(FORGE)/acme/cluster-prod-eu-1.git log --oneline --all

clean:
	rm -rf bin .fleetbot
