# The two commands of the README: `make demo` and `make test`.
# Every set-up step lives here; nothing needs to be installed by hand.
SHELL := /bin/bash
export GOTOOLCHAIN := local

BIN := $(CURDIR)/bin
# kube-apiserver and etcd are built once from the Go module proxy (test/tools) and cached here,
# outside the work tree, so fresh clones on the same machine (CI) reuse the build.
KUBE_VERSION ?= v1.36.3
KUBE_BIN_DIR ?= $(HOME)/.cache/hcloud-policy-ccm/kube-$(KUBE_VERSION)

GO_TEST_FLAGS ?= -count=1

.PHONY: all build test unit vet policy-test bench demo clean

all: build

build:
	mkdir -p $(BIN)
	go build -o $(BIN)/ ./cmd/...

vet:
	go vet ./...

unit:
	go test $(GO_TEST_FLAGS) ./...

# Rego tests with the real opa CLI, built from the same module version as the library.
policy-test:
	@if ls examples/policies/*.rego >/dev/null 2>&1; then go tool opa test --fail-on-empty -v examples/policies; fi

test: vet build unit policy-test

bench:
	go test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf $(BIN)
