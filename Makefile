# fleetbot — build, test and measure. Every target works offline once the
# Go module cache is warm (go mod download).
GO        ?= go
BIN       ?= bin/fleetbot
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
FORGE     ?= .fleetbot/forge
PKGS      ?= ./...

export GOTOOLCHAIN := local

# The SBOM generator of make release: CycloneDX's own, for Go binaries (pinned; installed into
# bin/ on first use). Defined before any rule names it: make expands a rule's prerequisites
# when it reads the rule.
CYCLONEDX_GOMOD_VERSION ?= v1.10.0
SBOM_TOOL := bin/cyclonedx-gomod-$(CYCLONEDX_GOMOD_VERSION)

.PHONY: schemas build test test-short fuzz e2e e2e-tools lint bench bench-quick bench-go screenshot demo clean release sbom-tool ca-certificates

## build: the fleetbot binary in bin/ (rebuilt only when a source file changed). No -trimpath
## here: it changes every package's build-cache key, so the first make demo after go run or
## go test recompiled every dependency (minutes); make release, the Dockerfile and action.yml
## keep it.
build: $(BIN)

$(BIN): go.mod go.sum $(shell git ls-files '*.go' 2>/dev/null)
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/bot

## schemas: install GitHub's published descriptions (npm, pinned: scripts/github-schemas.sh) and
## regenerate from them the compact copies the tests read (internal/githubtest/testdata/schemas,
## committed); make test needs neither npm nor this target
schemas:
	scripts/github-schemas.sh
	$(GO) test -count=1 -run '^TestSchemaCopiesArePublished$$' ./internal/githubtest/ -args -update-schemas

## test: vet, then every test with the race detector (go test -race -count=1 $(PKGS), from test
## binaries kept in .cache/test-bin/race/ so only the stale ones are linked again: scripts/test.sh).
## Needs only Go and git: GitHub's descriptions are read from their committed compact copies
## (checked against the published packages when make schemas installed them).
## (cmd/release's test builds a release of the work tree with the pinned SBOM tool: $(SBOM_TOOL))
test: $(SBOM_TOOL)
	$(GO) vet $(PKGS)
	FLEETBOT_SBOM_TOOL=$(CURDIR)/$(SBOM_TOOL) GO=$(GO) PKGS="$(PKGS)" scripts/test.sh

## e2e: fleetbot on a real API server and real Flux (etcd from Debian's etcd-server;
## kube-apiserver, kube-controller-manager and the Flux controllers built once per tool set,
## pinned by e2e/tools/*/go.mod, into ~/.cache/fleetbot-e2e/<set>-<version>-<hash>; see README
## "End-to-end tests")
e2e:
	@tools=$$(scripts/e2e-tools.sh) && FLEETBOT_E2E_TOOLS=$$tools $(GO) test -count=1 -timeout 30m -v ./e2e/

## e2e-tools: only build (or find) the e2e binaries and print their directory
e2e-tools:
	@scripts/e2e-tools.sh

## test-short: tests without the race detector (faster while editing)
test-short:
	$(GO) test -count=1 $(PKGS)

# Fuzz targets as package:Target; each runs for FUZZTIME (go test -fuzz runs one target at a time).
FUZZTIME    ?= 30s
FUZZTARGETS ?= ./internal/control:FuzzControlDecode ./internal/fanout:FuzzValueSubstitution \
	./internal/fanout:FuzzKustomizationLoad ./internal/policy:FuzzCodeowners ./internal/ingress:FuzzWebhookPayload \
	./internal/pr:FuzzMarker ./internal/ingress:FuzzFrontBatch ./internal/githubapi:FuzzTenantTree \
	./internal/fanout:FuzzTenantObject ./internal/rollout:FuzzParseHealthEvent

## fuzz: run each fuzz target for FUZZTIME (default 30s; seed corpora in testdata/fuzz run in make test too)
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh $(FUZZTARGETS)

STATICCHECK_VERSION ?= v0.8.2
ACTIONLINT_VERSION  ?= v1.7.12
GOCYCLO_VERSION     ?= v0.6.0
# The packages whose functions must stay at or below cyclomatic complexity CYCLO_MAX (the
# operations and the pure decisions: reconcile's phases, pr's decision, the rollout gate).
CYCLO_PKGS ?= internal/reconcile internal/pr internal/rollout
CYCLO_MAX  ?= 20

## lint: formatting, vet, staticcheck (module v0.8.2 = release 2026.2.2, pinned), gocyclo
## (v0.6.0, pinned): no function of CYCLO_PKGS above cyclomatic complexity CYCLO_MAX (fails),
## and the functions above it elsewhere (listed, not failed); actionlint over the example
## workflows (pinned); tools installed into bin/ on first use; shellcheck (Debian's) over the
## Action's install script
lint: bin/staticcheck-$(STATICCHECK_VERSION) bin/gocyclo-$(GOCYCLO_VERSION) bin/actionlint-$(ACTIONLINT_VERSION)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	bin/staticcheck-$(STATICCHECK_VERSION) $(PKGS)
	@out=$$(bin/gocyclo-$(GOCYCLO_VERSION) -over $(CYCLO_MAX) -ignore '_test\.go$$' $(CYCLO_PKGS)); \
	if [ -n "$$out" ]; then echo "cyclomatic complexity above $(CYCLO_MAX) in $(CYCLO_PKGS): split into named steps"; echo "$$out"; exit 1; fi
	@out=$$(bin/gocyclo-$(GOCYCLO_VERSION) -over $(CYCLO_MAX) -ignore '_test\.go$$' $$(git ls-files '*.go' | xargs -n1 dirname | sort -u) | sort -u | sort -rn); \
	if [ -n "$$out" ]; then echo "gocyclo: $$(echo "$$out" | wc -l) functions above $(CYCLO_MAX) outside $(CYCLO_PKGS) (reported, not failed):"; echo "$$out"; fi
	bin/actionlint-$(ACTIONLINT_VERSION) examples/workflows/*.yml
	@if command -v shellcheck >/dev/null; then shellcheck scripts/action-install.sh scripts/ca-certificates.sh; \
	else echo "lint: shellcheck is not installed (apt-get install shellcheck; CI installs it): the Action's install script was not checked"; fi

bin/staticcheck-$(STATICCHECK_VERSION):
	GOBIN=$(CURDIR)/bin GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv bin/staticcheck $@

bin/gocyclo-$(GOCYCLO_VERSION):
	GOBIN=$(CURDIR)/bin GOFLAGS= $(GO) install github.com/fzipp/gocyclo/cmd/gocyclo@$(GOCYCLO_VERSION)
	mv bin/gocyclo $@

bin/actionlint-$(ACTIONLINT_VERSION):
	GOBIN=$(CURDIR)/bin/.actionlint-install GOFLAGS= $(GO) install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	mv bin/.actionlint-install/actionlint $@

PLATFORMS ?= linux/amd64,linux/arm64,darwin/amd64,darwin/arm64
# The image's org.opencontainers.image.licenses, an SPDX expression: NOASSERTION (SPDX's "not
# stated") until the repository has a LICENSE file.
LICENSES  ?= NOASSERTION

## release: release VERSION (make release VERSION=v1.2.3; vMAJOR.MINOR.PATCH[-PRERELEASE]) of the
## committed HEAD into dist/VERSION/: fleetbot for PLATFORMS as tar.gz, a CycloneDX SBOM per
## binary, the OCI image of the linux binaries, SHA256SUMS. Reproducible: the same commit and Go
## release give the same bytes. Refuses a work tree with uncommitted changes (ALLOW_DIRTY=1
## builds one anyway, stamped <sha>-dirty: for trying it, never to publish). Publishes nothing
## (docs/versioning.md: how a release is published and verified).
release: $(SBOM_TOOL)
	$(if $(filter command line environment,$(origin VERSION)),,$(error make release needs VERSION=vMAJOR.MINOR.PATCH, e.g. make release VERSION=v1.2.3))
	$(GO) run ./cmd/release -version "$(VERSION)" -out dist -platforms "$(PLATFORMS)" -licenses "$(LICENSES)" \
		-sbom-tool $(CURDIR)/$(SBOM_TOOL) $(if $(ALLOW_DIRTY),-allow-dirty)

## sbom-tool: install the pinned cyclonedx-gomod into bin/ if needed and print its path
sbom-tool: $(SBOM_TOOL)
	@echo $(CURDIR)/$(SBOM_TOOL)

$(SBOM_TOOL):
	GOBIN=$(CURDIR)/bin/.cyclonedx-install GOFLAGS= $(GO) install github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@$(CYCLONEDX_GOMOD_VERSION)
	mv bin/.cyclonedx-install/cyclonedx-gomod $@

## ca-certificates: rebuild the image's CA bundle from Debian's ca-certificates (pinned in the script)
ca-certificates:
	scripts/ca-certificates.sh

KUSTOMIZE_VERSION ?= v5.8.2

## bin/kustomize-*: the real kustomize CLI, the naive baseline of make bench (v5.8.2 is built
## on the kustomize api v0.21.2 fleetbot uses; pinned; installed into bin/ on first use)
bin/kustomize-$(KUSTOMIZE_VERSION):
	GOBIN=$(CURDIR)/bin/.kustomize-install GOFLAGS= $(GO) install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv bin/.kustomize-install/kustomize $@

## bench: measure render (fleetbot vs the kustomize CLI), incremental plan, GitHub cost, fan-out,
## a rollout in five waves (requests per wave check), and the fleetbot serve binary over HTTP (one-cluster push, acknowledgement latency) at fleet
## scale, and, when FLEETBOT_E2E_TOOLS is set (FLEETBOT_E2E_TOOLS=$$(make e2e-tools) make bench),
## serve's replicas under SIGKILL (the e2e test TestReplicasSurviveKills: lost work, takeover
## time; without it the row says "not measured"), and write docs/benchmarks.md, stamped with the
## commit; refuses a tree with uncommitted changes (several minutes)
bench: $(BIN) bin/kustomize-$(KUSTOMIZE_VERSION)
	$(GO) build -o bin/benchtable ./cmd/benchtable
	bin/benchtable -out docs/benchmarks.md -fleetbot $(BIN) -kustomize bin/kustomize-$(KUSTOMIZE_VERSION) -go $(GO)

## bench-quick: the same on smaller fleets (a few minutes), into bin/benchmarks-quick.md
bench-quick: $(BIN) bin/kustomize-$(KUSTOMIZE_VERSION)
	$(GO) build -o bin/benchtable ./cmd/benchtable
	bin/benchtable -quick -out bin/benchmarks-quick.md -fleetbot $(BIN) -kustomize bin/kustomize-$(KUSTOMIZE_VERSION) -go $(GO)

## bench-go: the Go micro-benchmarks of rendering and of the /status page (10,000 repos)
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 1x -timeout 30m ./internal/fanout/
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 10x ./internal/status/

## screenshot: regenerate docs/status.png with the end-to-end test of /status (headless chromium)
screenshot:
	FLEETBOT_STATUS_SCREENSHOT_DIR=$(CURDIR)/docs $(GO) test -count=1 -run '^TestServeStatusPage$$' ./internal/serve/

## demo: apply the example control repo into a local forge, then show the result
demo: build
	$(BIN) apply --control testdata/control --forge local:$(FORGE)
	git --git-dir $(FORGE)/acme/cluster-prod-eu-1.git log --oneline --all

clean:
	rm -rf bin .fleetbot dist
