# Plugin targets. Include from the top-level Makefile with `include plugins/plugins.mk`.
#
#   make plugins                  build the example plugins into $(BIN)/plugins (.wasm and .wasm.gz)
#   make plugins-test             go test ./plugins/... and the SDK module's tests (builds the Go examples itself)
#   make plugins-bench            load, call latency and memory benchmarks
#   make plugins-fixtures         rebuild the committed WAT fixtures from their .wat sources
#   make plugins-fixtures-check   fail when a committed .wasm differs from its .wat source
#
# Tools are installed on demand (CI machines are fresh): wat2wasm from Debian's wabt.

BIN ?= $(CURDIR)/bin
PLUGINS_OUT ?= $(BIN)/plugins
PLUGINS_GO_EXAMPLES := labels-and-name node-labels lb-name
PLUGINS_WAT := $(wildcard plugins/testdata/*.wat) plugins/examples/wat-labels/labels.wat
PLUGINS_SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: plugins plugins-tools plugins-test plugins-bench plugins-fixtures plugins-fixtures-check

plugins-tools:
	@command -v wat2wasm >/dev/null || ($(PLUGINS_SUDO) apt-get update && $(PLUGINS_SUDO) apt-get install -y --no-install-recommends wabt)

plugins: plugins-tools
	mkdir -p $(PLUGINS_OUT)
	set -e; for ex in $(PLUGINS_GO_EXAMPLES); do \
		GOOS=wasip1 GOARCH=wasm GOTOOLCHAIN=local go build -buildmode=c-shared -trimpath -ldflags="-s -w" \
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
