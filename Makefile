# The two commands of the README: `make demo` and `make test`.
# Every set-up step lives here; nothing needs to be installed by hand.
SHELL := /bin/bash
export GOTOOLCHAIN := local

BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/policy-ccm/hcloud-policy-ccm/ccm.Version=$(VERSION)

# Build tags of every go command here (exported as GOFLAGS, so the builds inside the e2e and bench
# tests get them too). grpcnotrace keeps golang.org/x/net/trace, and with it html/template, out of
# the binary: the template engine calls reflect.Value.MethodByName, which turns off the linker's
# dead-code elimination of methods (a third of the binary and of its resident memory; see
# docs/performance.md § Memory). `make dce-check` fails if something brings such a call back.
GO_BUILD_TAGS := grpcnotrace
export GOFLAGS := $(strip $(GOFLAGS) -tags=$(GO_BUILD_TAGS))

# kube-apiserver, etcd and kubectl are built once from the Go module proxy (test/tools, a module
# of its own) and cached outside the work tree, so fresh clones on the same machine (CI) reuse
# the build (about 8-10 minutes cold on 2 cores).
KUBE_VERSION ?= v1.37.2
KUBE_CACHE ?= $(HOME)/.cache/hcloud-policy-ccm
KUBE_BIN_DIR ?= $(KUBE_CACHE)/kube-$(KUBE_VERSION)
export KUBE_BIN_DIR

# helm, for the chart checks (deploy/chart), built once from the Go module proxy by test/tools/helm
# (a module of its own, so helm never enters the product's go.mod) and cached next to the kube
# binaries (a few minutes cold on 2 idle cores).
HELM_VERSION := $(shell awk '$$1 == "helm.sh/helm/v3" { print $$2; exit }' test/tools/helm/go.mod)
HELM_DIR ?= $(KUBE_CACHE)/helm-$(HELM_VERSION)
HELM_BIN ?= $(HELM_DIR)/helm
export HELM_BIN
CHART := deploy/chart
CHART_VALUES := $(CHART)/ci/official-default-values.yaml $(CHART)/ci/official-full-daemonset-values.yaml \
	$(CHART)/ci/official-default-values.yaml,$(CHART)/ci/policy-values.yaml

# golangci-lint, for `make lint` (.golangci.yml), built once from the Go module proxy by
# test/tools/golangci-lint (a module of its own) and cached next to the kube binaries.
GOLANGCI_LINT_VERSION := $(shell awk '$$1 == "github.com/golangci/golangci-lint/v2" { print $$2; exit }' test/tools/golangci-lint/go.mod)
LINT_DIR ?= $(KUBE_CACHE)/golangci-lint-$(GOLANGCI_LINT_VERSION)
LINT_BIN ?= $(LINT_DIR)/golangci-lint

GO_TEST_FLAGS ?= -count=1
E2E_TIMEOUT ?= 30m
# e2e tests run this many at a time (each owns its apiserver, etcd, emulator and CCM; every test
# starts with t.Parallel(), TestEveryTestRunsInParallel checks it). Most of a test's time is
# waiting for the CCM, so more than the number of cores pays off: on 2 cores 4 halves the phase.
E2E_PARALLEL ?= 4

.PHONY: all build release dce-check test e2e-stress unit race vet lint lint-bin fmt-check generate check-generated policy-test kube-bins helm-bin chart-test e2e e2e-versions bench bench-smoke bench-official official-ccm soak demo clean

all: build

include plugins/plugins.mk

# Static and with trimmed paths, as deploy/Dockerfile and deploy/release.sh build the binaries that
# ship, so the e2e tests and `make bench` run and measure that binary (a cgo build also maps libc
# and the dynamic loader, about 1.3 MiB; docs/performance.md § The memory target, measured
# again). Debug information is kept here (the releases strip it with -s -w; it is never loaded).
build:
	mkdir -p $(BIN)
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

# Release artefacts under bin/release/$(VERSION)/ (deploy/release.sh): static linux binaries for
# RELEASE_ARCHES, capabilities.json, policy-input.schema.json, policy-samples.tar.gz (the sample
# inputs, for opa test), VERSIONS.txt and SHA256SUMS. Not
# part of `make test`. VERSION defaults to `git describe`; a -dirty one is refused.
RELEASE_ARCHES ?= amd64 arm64
release:
	deploy/release.sh $(BIN)/release/$(VERSION) $(VERSION) $(RELEASE_ARCHES)

# The linker's dead-code elimination of methods is on for the CCM binary: no function that calls
# reflect's Method or MethodByName with a non-constant argument is reachable from main (cmd/
# hcloud-policy-ccm/linker_test.go prints the call path and the fix when one is).
dce-check:
	go test $(GO_TEST_FLAGS) -tags $(GO_BUILD_TAGS),dce -run TestLinkerDeadCodeElimination ./cmd/hcloud-policy-ccm/

# plugins/sdk is a module of its own (docs/plugins.md § The SDK module), which ./... does not
# reach: vet, lint and unit run in it separately, for the host and as GOOS=wasip1 builds it.
SDK_DIR := plugins/sdk

vet:
	go vet ./...
	go vet -tags e2e ./test/e2e/...
	go vet -tags soak ./test/soak/
	cd $(SDK_DIR) && go vet ./... && GOOS=wasip1 GOARCH=wasm go vet ./...

lint-bin:
	test/tools/golangci-lint/build.sh $(LINT_DIR)

# golangci-lint with .golangci.yml, which sets the build tags e2e and bench so those files are
# linted too; then the plugin SDK and examples again as GOOS=wasip1 builds them (*_wasip1.go).
lint: lint-bin
	$(LINT_BIN) run ./...
	cd $(SDK_DIR) && $(LINT_BIN) run --config $(CURDIR)/.golangci.yml ./...
	GOOS=wasip1 GOARCH=wasm $(LINT_BIN) run --tests=false ./plugins/examples/...
	cd $(SDK_DIR) && GOOS=wasip1 GOARCH=wasm $(LINT_BIN) run --config $(CURDIR)/.golangci.yml --tests=false ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# Every generated file, one way: `go generate ./...`. Each generator is a main package
# internal/gen<what> next to its source, run by a flagless `//go:generate go run ./internal/gen<what>`:
# the reference pages docs/reference/{annotations,env,policy-input}.md and
# docs/policy-input.schema.json (internal/gendoc of ccm/annotation, ccm/config and policy), and
# the kustomize manifests deploy/ccm.yaml and deploy/networks/ccm-networks.yaml rendered from the
# chart (test/deploy/internal/genmanifests, which runs helm: hence helm-bin).
generate: helm-bin
	go generate ./...

# Fails, naming `make generate`, when a generated file differs from what its generator writes
# today: each generator has a test TestGeneratedCurrent (test/deploy's is TestManifestsCurrent,
# with the other checks of one source for policies and manifests). `make unit` runs them too.
check-generated: helm-bin
	go test $(GO_TEST_FLAGS) -run '^(TestGeneratedCurrent|TestManifestsCurrent)$$' ./...

# Unit, contract and integration tests against the emulator (no Kubernetes binaries needed;
# helm for test/deploy, which renders the chart).
unit: helm-bin
	go test $(GO_TEST_FLAGS) ./...
	cd $(SDK_DIR) && go test $(GO_TEST_FLAGS) ./...

# The concurrency-sensitive packages again under the race detector (hammer tests).
race:
	go test $(GO_TEST_FLAGS) -race ./ccm/servercache/ ./ccm/lbcache/ ./ccm/executor/ ./ccm/loadbalancer/ ./ccm/requeue/ ./plugins/ ./internal/hcloudemu/ ./policy/

# Rego tests as the CCM runs them (policy test), and with the real opa CLI, built from the same
# module version as the library, plus format, strict and schema checks.
policy-test: build
	$(BIN)/hcloud-policy-ccm policy test examples/policies
	$(BIN)/hcloud-policy-ccm policy capabilities > $(BIN)/capabilities.json
	go tool opa fmt --fail --list examples/policies
	go tool opa check --strict --capabilities $(BIN)/capabilities.json --schema docs/policy-input.schema.json examples/policies
	go tool opa test --fail-on-empty --capabilities $(BIN)/capabilities.json examples/policies

kube-bins:
	test/tools/build.sh $(KUBE_BIN_DIR) $(KUBE_VERSION)

helm-bin:
	test/tools/helm/build.sh $(HELM_DIR)

# The Helm chart: `helm lint --strict` and `helm template` with the official chart's default
# values, an official-style full DaemonSet values file and this chart's own values on top of the
# defaults (deploy/chart/ci/). What the renders contain, and that the RBAC equals deploy/'s, is
# checked by the e2e tests (TestChart*), which also install the rendered chart once.
chart-test: helm-bin
	set -e; for v in $(CHART_VALUES); do \
		flags=$$(echo "$$v" | sed 's/^/--values /; s/,/ --values /g'); \
		echo "helm lint/template $(CHART) $$flags"; \
		$(HELM_BIN) lint --strict $(CHART) --namespace kube-system $$flags; \
		$(HELM_BIN) template hccm $(CHART) --namespace kube-system $$flags >/dev/null; \
	done

# End-to-end: the CCM binary against a real kube-apiserver and etcd on loopback and the emulator.
e2e: kube-bins helm-bin build plugins plugins-rust plugins-as
	CCM_BIN=$(BIN)/hcloud-policy-ccm PLUGINS_DIR=$(PLUGINS_OUT) go test $(GO_TEST_FLAGS) -tags e2e -parallel $(E2E_PARALLEL) -timeout $(E2E_TIMEOUT) ./test/e2e/...

# The e2e suite E2E_STRESS_RUNS times with a CPU hog on every core (test/e2e-stress.sh): a test
# that depends on timing fails here before it fails CI at random. Not part of `make test`.
E2E_STRESS_RUNS ?= 3
e2e-stress: kube-bins helm-bin build plugins plugins-rust plugins-as
	MAKE="$(MAKE)" test/e2e-stress.sh $(E2E_STRESS_RUNS)

# The same suite against the older minors the chart supports (kubeVersion >=1.33: the official
# CCM's four minors, 1.33-1.36, plus 1.37 of make e2e), each the newest patch the module proxy
# serves. Not part of `make test`: each version is a cold build of about 10 minutes.
# E2E_VERSIONS_RUN, if set, is a -run pattern (a subset of the suite).
E2E_VERSIONS ?= v1.33.13 v1.34.4 v1.35.4 v1.36.3
E2E_VERSIONS_RUN ?=
e2e-versions: helm-bin build plugins
	set -e; for v in $(E2E_VERSIONS); do \
		test/tools/build.sh $(KUBE_CACHE)/kube-$$v $$v; \
		KUBE_BIN_DIR=$(KUBE_CACHE)/kube-$$v CCM_BIN=$(BIN)/hcloud-policy-ccm PLUGINS_DIR=$(PLUGINS_OUT) \
			go test $(GO_TEST_FLAGS) -tags e2e -parallel $(E2E_PARALLEL) -timeout $(E2E_TIMEOUT) \
			$(if $(E2E_VERSIONS_RUN),-run '$(E2E_VERSIONS_RUN)') ./test/e2e/...; \
	done

# `make test` runs these phases in order (test/phases.sh), printing each one's duration and a
# table of them at the end; the tool builds (golangci-lint, helm, kube-apiserver) are phases of
# their own, so a cold run shows what they cost.
TEST_PHASES := fmt-check vet lint-bin lint build dce-check plugins-fixtures-check helm-bin unit race \
	policy-test chart-test kube-bins plugins plugins-examples-test e2e bench-smoke
test:
	MAKE="$(MAKE)" test/phases.sh $(TEST_PHASES)

# The randomized fault soak (test/soak, docs/reliability.md § The fault soak): the CCM binary in
# two replicas with leader election and a webhook-only one, the example policies enforced, short
# drift, sweep and audit periods, against a real kube-apiserver and the emulator; a random mix of
# workload and faults drawn from SOAK_SEED (printed at the start; pass it back to replay) for
# SOAK_DURATION, invariants checked all the time, then a quiet period (SOAK_QUIET) and a report
# printed and written to SOAK_REPORT. Fails on any invariant violation. Not part of `make test`.
SOAK_DURATION ?= 20m
SOAK_SEED ?=
SOAK_QUIET ?= 2m
SOAK_REPORT ?= $(BIN)/soak-report.md
soak: kube-bins build
	go vet -tags soak ./test/soak/
	CCM_BIN=$(BIN)/hcloud-policy-ccm SOAK_DURATION=$(SOAK_DURATION) SOAK_SEED=$(SOAK_SEED) SOAK_QUIET=$(SOAK_QUIET) SOAK_REPORT=$(SOAK_REPORT) \
		go test -count=1 -v -tags soak -timeout 0 -run TestSoak ./test/soak/

# The demo: local kube-apiserver + etcd + Hetzner API emulator + this CCM with the example
# policies and plugins (cmd/ccm-demo). Ctrl-C stops everything. Your own setup (README, "The
# demo"): POLICIES=dir (*.rego and data files), PLUGINS=dir|none (node-labels.wasm[.gz],
# load-balancer-name.wasm[.gz]), MODE=enforce|dryrun, ROUTES=1, V=N (the CCM's log verbosity).
demo: kube-bins build plugins
	$(BIN)/ccm-demo --kube-bin-dir=$(KUBE_BIN_DIR) --bin-dir=$(BIN) \
		$(if $(POLICIES),--policies=$(POLICIES)) $(if $(PLUGINS),--plugins=$(PLUGINS)) \
		$(if $(MODE),--policy-mode=$(MODE)) $(if $(ROUTES),--routes=$(ROUTES)) $(if $(V),--ccm-v=$(V))

# Scale benchmark of the CCM binary (test/bench, docs/performance.md): real kube-apiserver + etcd,
# the emulator, routes on. Prints a Markdown table and writes it to $(BENCH_OUT); then the Go
# micro-benchmarks. Not part of `make test` (about an hour); bench-smoke is. BENCH_STEADY=auto
# measures one server-list period per size (5, 10 and 20 minutes); BENCH_POLICIES=on|off|both.
# Each size ends with a churn phase (issue 24): +JOIN nodes join, /BATCH at a time (default 10 at
# once, 2 at the smoke size); 50x200+10/1 is 200 Services under 10 single-node events; a p after
# SERVICES puts the nodes in node pools, 2 Services selecting each (500x50p+10: issue 24's setup).
BENCH_SIZES ?= 50x10,200x50,500x50+10,500x50p+10,50x200+10/1
BENCH_STEADY ?= auto
BENCH_POLICIES ?= on
BENCH_OUT ?= $(BIN)/bench.md
bench: kube-bins build
	CCM_BIN=$(BIN)/hcloud-policy-ccm BENCH_SIZES=$(BENCH_SIZES) BENCH_STEADY=$(BENCH_STEADY) BENCH_POLICIES=$(BENCH_POLICIES) BENCH_OUT=$(BENCH_OUT) \
		go test -count=1 -v -tags bench -timeout 3h -run TestBench ./test/bench/
	go test -run '^$$' -bench . -benchmem ./...

# The same at a smoke size (10 nodes, 2 Services, a 20 s window), so the benchmark cannot rot.
bench-smoke: kube-bins build
	go vet -tags bench ./test/bench/
	CCM_BIN=$(BIN)/hcloud-policy-ccm BENCH_SIZES=10x2 BENCH_STEADY=20s BENCH_OUT=$(BIN)/bench-smoke.md \
		go test $(GO_TEST_FLAGS) -tags bench -timeout 5m -run TestBench ./test/bench/

# CPU side by side with the official CCM (issue 41): the official hcloud-cloud-controller-manager,
# pinned in test/tools/official-ccm/build.sh (v1.35.0), is built once into $(KUBE_CACHE)/official-
# <commit>/ from OFFICIAL_CCM_GIT (a git directory or URL; default the local mirror when it exists,
# else GitHub); then every size of BENCH_OFFICIAL_SIZES runs with this CCM and the official, one
# after the other, and the table adds each pair's CPU ratios (docs/performance.md § CPU side by
# side). Two pairs by default (the figures vary between runs on a shared machine); about 45
# minutes at 500x50+10. Not part of `make test`.
OFFICIAL_CCM_MIRROR := /work/.mirror/hetznercloud+hcloud-cloud-controller-manager/repo
OFFICIAL_CCM_GIT ?= $(if $(wildcard $(OFFICIAL_CCM_MIRROR)),$(OFFICIAL_CCM_MIRROR),https://github.com/hetznercloud/hcloud-cloud-controller-manager.git)
BENCH_OFFICIAL_SIZES ?= 500x50+10,500x50+10
BENCH_OFFICIAL_STEADY ?= 3m
official-ccm:
	test/tools/official-ccm/build.sh $(KUBE_CACHE) $(OFFICIAL_CCM_GIT)
bench-official: kube-bins build
	official=$$(test/tools/official-ccm/build.sh $(KUBE_CACHE) $(OFFICIAL_CCM_GIT) | tail -n1) && \
	CCM_BIN=$(BIN)/hcloud-policy-ccm BENCH_OFFICIAL_BIN=$$official BENCH_SIZES=$(BENCH_OFFICIAL_SIZES) \
		BENCH_STEADY=$(BENCH_OFFICIAL_STEADY) BENCH_POLICIES=on BENCH_OUT=$(BIN)/bench-official.md \
		go test -count=1 -v -tags bench -timeout 3h -run TestBench ./test/bench/

clean:
	rm -rf $(BIN)
