# Plugin targets. Include from the top-level Makefile with `include plugins/plugins.mk`.
#
#   make plugins                  build the example plugins into $(BIN)/plugins (.wasm and .wasm.gz)
#   make plugins-test             go test ./plugins/... and the SDK module's tests (builds the Go examples itself)
#   make plugins-bench            load, call latency and memory benchmarks
#   make plugins-fixtures         rebuild the committed WAT fixtures from their .wat sources
#   make plugins-fixtures-check   fail when a committed .wasm differs from its .wat source
#   make plugins-rust             build the Rust example (offline, Debian's rustc and serde)
#   make plugins-as               build the AssemblyScript example (npm ci: asc pinned by package-lock.json)
#   make plugins-examples-test    every example against plugins/examples/cases with `plugin test`,
#                                 the Rust unit tests, and each example's gzipped size limit
#
# Tools are installed on demand (CI machines are fresh): wat2wasm from Debian's wabt; Debian's
# rustc, cargo, wasm32 standard library, lld and serde crates for the Rust example.

BIN ?= $(CURDIR)/bin
PLUGINS_OUT ?= $(BIN)/plugins
PLUGINS_GO_EXAMPLES := labels-and-name node-labels lb-name
# No inlining: the module grows (3.29 → 3.51 MB for labels-and-name) but gzips 6% smaller
# (920,531 → 865,588 bytes), and the gzipped size is what a ConfigMap holds; call latency did
# not measurably change (docs/plugins.md, "Go plugins with the SDK").
PLUGINS_GO_GCFLAGS := -gcflags=all=-l
PLUGINS_WAT := $(wildcard plugins/testdata/*.wat) plugins/examples/wat-labels/labels.wat
PLUGINS_SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: plugins plugins-tools plugins-test plugins-bench plugins-fixtures plugins-fixtures-check \
	plugins-rust-tools plugins-rust plugins-as-tools plugins-as plugins-examples-test

# The Rust example builds with Debian's toolchain by absolute path, so that a rustup toolchain
# earlier in PATH (whose std does not match Debian's crates) is not picked up.
PLUGINS_RUST := plugins/examples/rust-labels
PLUGINS_CARGO := RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc /usr/bin/cargo
PLUGINS_RUST_WASM := $(PLUGINS_RUST)/target/wasm32-unknown-unknown/release/rust_labels.wasm
PLUGINS_RUST_DEBS := rustc cargo libstd-rust-dev-wasm32 lld librust-serde-json-dev librust-serde-derive-dev
# Gzipped size limits of the examples, in bytes: `plugins-examples-test` fails above them, so a
# change that bloats a module is seen (measured: labels-and-name 865,588 with PLUGINS_GO_GCFLAGS; rust-labels 43,914;
# as-labels 10,683).
PLUGINS_MAX_GZ_GO := 900000
PLUGINS_MAX_GZ_RUST := 65536
PLUGINS_MAX_GZ_AS := 16384
PLUGINS_AS := plugins/examples/as-labels

plugins-tools:
	@command -v wat2wasm >/dev/null || ($(PLUGINS_SUDO) apt-get update && $(PLUGINS_SUDO) apt-get install -y --no-install-recommends wabt)

plugins: plugins-tools
	mkdir -p $(PLUGINS_OUT)
	set -e; for ex in $(PLUGINS_GO_EXAMPLES); do \
		GOOS=wasip1 GOARCH=wasm GOTOOLCHAIN=local go build -buildmode=c-shared -trimpath -ldflags="-s -w" $(PLUGINS_GO_GCFLAGS) \
			-o $(PLUGINS_OUT)/$$ex.wasm ./plugins/examples/$$ex; \
		gzip -9 -n -k -f $(PLUGINS_OUT)/$$ex.wasm; \
	done
	wat2wasm plugins/examples/wat-labels/labels.wat -o $(PLUGINS_OUT)/wat-labels.wasm
	@ls -l $(PLUGINS_OUT)

plugins-test:
	GOTOOLCHAIN=local go test -count=1 ./plugins/...
	cd plugins/sdk && GOTOOLCHAIN=local go test -count=1 ./...

plugins-bench:
	GOTOOLCHAIN=local go test -run '^$$' -bench . -benchmem ./plugins/

plugins-fixtures: plugins-tools
	set -e; for f in $(PLUGINS_WAT); do wat2wasm "$$f" -o "$${f%.wat}.wasm"; done

plugins-fixtures-check: plugins-tools
	@set -e; tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	for f in $(PLUGINS_WAT); do \
		wat2wasm "$$f" -o $$tmp/out.wasm; \
		cmp -s $$tmp/out.wasm "$${f%.wat}.wasm" || { echo "$${f%.wat}.wasm is stale: run make plugins-fixtures"; exit 1; }; \
	done; echo "plugin fixtures match their .wat sources"

plugins-rust-tools:
	@dpkg -s $(PLUGINS_RUST_DEBS) >/dev/null 2>&1 || ($(PLUGINS_SUDO) apt-get update && $(PLUGINS_SUDO) apt-get install -y --no-install-recommends $(PLUGINS_RUST_DEBS))

plugins-rust: plugins-rust-tools
	cd $(PLUGINS_RUST) && $(PLUGINS_CARGO) build --release --target wasm32-unknown-unknown
	mkdir -p $(PLUGINS_OUT)
	cp $(PLUGINS_RUST_WASM) $(PLUGINS_OUT)/rust-labels.wasm

plugins-as-tools:
	@command -v npm >/dev/null || ($(PLUGINS_SUDO) apt-get update && $(PLUGINS_SUDO) apt-get install -y --no-install-recommends nodejs npm)

plugins-as: plugins-as-tools
	cd $(PLUGINS_AS) && npm ci --no-audit --no-fund && npm run build
	mkdir -p $(PLUGINS_OUT)
	cp $(PLUGINS_AS)/build/as-labels.wasm $(PLUGINS_OUT)/as-labels.wasm

# plugins-examples-test needs `make build` (the CCM binary runs `plugin test`) and `make plugins`.
plugins-examples-test: plugins-rust plugins-as
	cd $(PLUGINS_RUST) && $(PLUGINS_CARGO) test --release --lib
	$(BIN)/hcloud-policy-ccm plugin test --module $(PLUGINS_OUT)/labels-and-name.wasm.gz plugins/examples/cases
	$(BIN)/hcloud-policy-ccm plugin test --module $(PLUGINS_OUT)/rust-labels.wasm plugins/examples/cases/node_labels
	$(BIN)/hcloud-policy-ccm plugin test --module $(PLUGINS_OUT)/as-labels.wasm plugins/examples/cases/node_labels
	$(BIN)/hcloud-policy-ccm plugin check $(PLUGINS_OUT)/labels-and-name.wasm.gz $(PLUGINS_OUT)/rust-labels.wasm $(PLUGINS_OUT)/as-labels.wasm
	@set -e; check() { n=$$(gzip -9 -n -c "$$1" | wc -c); [ "$$n" -le "$$2" ] || { echo "$$1: $$n bytes gzipped, over the limit of $$2 (plugins.mk)"; exit 1; }; echo "$$1: $$n bytes gzipped (limit $$2)"; }; \
	check $(PLUGINS_OUT)/labels-and-name.wasm $(PLUGINS_MAX_GZ_GO); check $(PLUGINS_OUT)/rust-labels.wasm $(PLUGINS_MAX_GZ_RUST); \
	check $(PLUGINS_OUT)/as-labels.wasm $(PLUGINS_MAX_GZ_AS)
