# Lore build entry point. `make setup` prepares a fresh Debian/Ubuntu machine (as root);
# every other target assumes it ran. CPU picks the kernel baseline: native (default, fastest
# on this machine) or a portable level such as x86-64-v3 for builds that ship.

SHELL   := /bin/bash
GO      ?= go
CPU     ?= native
TAGS    := sqlite_fts5
BIN     := bin
INC     := $(CURDIR)/.build/include

APT_PKGS := build-essential pkg-config git nlohmann-json3-dev libstb-dev poppler-utils \
            chromium xvfb x11-apps libgtk-3-dev libwebkit2gtk-4.1-dev

OLLAMA_DIR = $(shell $(GO) list -m -f '{{.Dir}}' github.com/ollama/ollama)
MALGO_DIR  = $(shell $(GO) list -m -f '{{.Dir}}' github.com/gen2brain/malgo)

# GGML_USE_CPU_REPACK is what llama.cpp's CMake always defines; without it the interleaved
# Q4_0 kernels go unused (~1.5x prefill). The llama.cpp include paths let engine/ call C
# functions the Go binding leaves out. Changing any of these rebuilds llama.cpp (minutes).
CGO_ENV = CGO_ENABLED=1 \
	CGO_CPPFLAGS="-I$(INC) -I$(OLLAMA_DIR)/llama/llama.cpp/include -I$(OLLAMA_DIR)/ml/backend/ggml/ggml/include -DGGML_USE_CPU_REPACK" \
	CGO_CFLAGS="-O3 -march=$(CPU)" CGO_CXXFLAGS="-O3 -march=$(CPU)"

.PHONY: env setup deps headers build demo test test-go test-web bench app clean

setup: deps headers

deps:
	@if [ "$$(id -u)" = 0 ] && ! dpkg -s $(APT_PKGS) >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PKGS); fi
	$(GO) mod download

headers: $(INC)/miniaudio/miniaudio.h

$(INC)/miniaudio/miniaudio.h:
	$(GO) mod download github.com/gen2brain/malgo
	mkdir -p $(dir $@)
	cp $(MALGO_DIR)/miniaudio.h $@

build: headers
	$(CGO_ENV) $(GO) build -tags '$(TAGS)' -o $(BIN)/lore ./cmd/lore

demo: setup build
	./$(BIN)/lore demo

test: setup build
	$(CGO_ENV) $(GO) vet -tags '$(TAGS)' ./...
	$(CGO_ENV) LORE_BIN=$(CURDIR)/$(BIN)/lore $(GO) test -tags '$(TAGS)' -count=1 ./...

clean:
	rm -rf $(BIN) .build

# `eval "$$(make -s env)"` gives a shell the same cgo flags as the build, so plain `go test`
# reuses the compiled llama.cpp instead of rebuilding it.
env: headers
	@echo 'export $(CGO_ENV) GOFLAGS="-tags=$(TAGS)"'
