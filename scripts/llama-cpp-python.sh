#!/usr/bin/env bash
# Builds llama-cpp-python's OpenAI-compatible server (python -m llama_cpp.server), the
# llama-server-compatible peer of the remote tests (app/server/llamacpppython_test.go), once, into a
# venv in a cache folder; a no-op when it is there. pip compiles llama.cpp from the pinned sdist
# (sha256-checked; CPU only, portable flags): minutes on 2 cores.
#
#   scripts/llama-cpp-python.sh          build if missing; prints nothing when cached
#   scripts/llama-cpp-python.sh --path   print the venv's python if built (nothing otherwise)
#
# The venv counts as built only once .ok is written in it, last. When the build fails (no PyPI, no
# compiler, no cmake, no python3-venv) it says so in ONE line and exits 0, so that `make test` goes
# on: the tests then skip, naming LORE_LLAMA_CPP_PYTHON (unset), unless LORE_PEERS_REQUIRED=1.
# LORE_PEERS sets the cache root (default ~/.cache/lore/peers); PYTHON the base interpreter;
# CMAKE_BUILD_PARALLEL_LEVEL the compile jobs (default: the CPUs).
set -u

VERSION=0.3.36
SDIST=llama_cpp_python-$VERSION.tar.gz
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
ROOT=${LORE_PEERS:-${XDG_CACHE_HOME:-$HOME/.cache}/lore/peers}
DIR=$ROOT/llama-cpp-python-$VERSION
PY=$DIR/bin/python
LOG=$ROOT/llama-cpp-python-$VERSION.log

fail() {
	rm -rf "$DIR" "$ROOT/.sdist"
	echo "llama-cpp-python $VERSION: not built ($(echo "$1" | tr -s ' \t' ' ' | cut -c1-160); log $LOG): its tests will skip (LORE_LLAMA_CPP_PYTHON unset)"
	exit 0
}

pipi() { "$PY" -m pip --disable-pip-version-check --no-input "$@" --timeout 30 --retries 2; }

build() {
	"${PYTHON:-python3}" -m venv "$DIR" || return
	pipi download --no-deps --no-binary :all: -d "$ROOT/.sdist" "llama-cpp-python==$VERSION" || return
	echo "$SHA256  $ROOT/.sdist/$SDIST" | sha256sum -c - || return
	# Portable (no -march=native: the cache may move to another CPU), CPU only, no libmtmd
	# (LLAVA_BUILD: the text-only server never loads it). llama-cpp-python forces llama.cpp's common
	# library on, which it does not load either: no-common.cmake, run inside llama.cpp's project(),
	# turns it off again, and with it cpp-httplib (together 40 % of the compile).
	local arch=""
	case "$(uname -m)" in
	x86_64 | amd64) arch="-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON" ;;
	esac
	echo 'set(LLAMA_BUILD_COMMON OFF CACHE BOOL "llama-cpp-python loads no llama-common" FORCE)' >"$ROOT/no-common.cmake" || return
	CMAKE_ARGS="-DGGML_NATIVE=OFF $arch -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAVA_BUILD=OFF \
-DCMAKE_PROJECT_llama.cpp_INCLUDE=$ROOT/no-common.cmake ${CMAKE_ARGS:-}" \
		CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)} \
		pipi install "$ROOT/.sdist/$SDIST[server]" || return
	"$PY" -c 'import llama_cpp, llama_cpp.server.app; print("llama_cpp", llama_cpp.__version__)' || return
	"$PY" -m pip freeze >"$DIR/freeze.txt"
}

main() {
	if [ "${1:-}" = --path ]; then
		[ -f "$DIR/.ok" ] && echo "$PY"
		return 0
	fi
	[ -f "$DIR/.ok" ] && return 0
	mkdir -p "$ROOT" || fail "cannot create $ROOT"
	local start=$SECONDS
	rm -rf "$DIR" "$ROOT/.sdist"
	build >"$LOG" 2>&1 ||
		fail "$(grep -E -m1 'ERROR|error:|FAILED|No module named|ensurepip is not available|No matching distribution|CMake Error' "$LOG" ||
			grep -v '^[[:space:]]*$' "$LOG" | tail -n1)"
	rm -rf "$ROOT/.sdist"
	touch "$DIR/.ok"
	echo "llama-cpp-python $VERSION: built in $((SECONDS - start)) s"
}

# All in functions, read before anything runs: editing this file during a build is safe.
main "$@"
exit
