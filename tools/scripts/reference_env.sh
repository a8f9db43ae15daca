#!/usr/bin/env bash
# Creates (or reuses) a Python virtual environment holding a pinned, CPU-only
# llama-cpp-python, used to generate reference data (tests/data/llamacpp/).
#
#   tools/scripts/reference_env.sh            # prints the venv's python path (last line)
#
# Environment:
#   KVJIT_REFERENCE_VENV  venv location (default: $HOME/.cache/kvjit/reference-venv)
#   KVJIT_PYTHON          python used to create the venv (default: python3)
#
# llama-cpp-python is an sdist: pip compiles llama.cpp from source with CMake.
# That takes a while (~10-30 min on 2 cores); it runs under `nice -n 19` with a
# single build job so it does not starve other work on the machine.
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"

VENV="${KVJIT_REFERENCE_VENV:-$HOME/.cache/kvjit/reference-venv}"
PYTHON="${KVJIT_PYTHON:-python3}"

die() { echo "reference_env.sh: error: $*" >&2; exit 1; }
log() { echo "reference_env.sh: $*" >&2; }

command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' not found (set KVJIT_PYTHON)"

VPY="$VENV/bin/python"

installed_version() {
  "$VPY" -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))' 2>/dev/null || true
}

if [[ -x "$VPY" ]] && [[ "$(installed_version)" == "$LLAMA_CPP_PYTHON_VERSION" ]] \
   && "$VPY" -c 'import llama_cpp' >/dev/null 2>&1; then
  log "reusing $VENV (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION)"
  echo "$VPY"
  exit 0
fi

if [[ ! -x "$VPY" ]]; then
  log "creating venv at $VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV" || die "could not create venv at $VENV (is python3-venv installed?)"
fi

command -v cmake >/dev/null 2>&1 || log "warning: cmake not on PATH; pip will try its own cmake wheel"
command -v c++ >/dev/null 2>&1 || command -v g++ >/dev/null 2>&1 \
  || die "no C++ compiler found (need g++ or clang++ to build llama.cpp)"

log "installing llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION (CPU build from source; this takes a while)"
"$VPY" -m pip install --quiet --upgrade pip >&2 || die "could not upgrade pip in $VENV"

# CPU-only, portable build (no -march=native), no OpenMP/BLAS/server/examples.
export CMAKE_ARGS="${CMAKE_ARGS:-} -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-1}"
export MAX_JOBS="${MAX_JOBS:-1}"
export FORCE_CMAKE=1

nice -n 19 "$VPY" -m pip install --no-cache-dir --verbose \
  "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >&2 \
  || die "pip install llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION failed (see the build log above)"

"$VPY" -c 'import llama_cpp' >/dev/null 2>&1 || die "llama_cpp does not import after install"
[[ "$(installed_version)" == "$LLAMA_CPP_PYTHON_VERSION" ]] \
  || die "installed version '$(installed_version)' != pinned $LLAMA_CPP_PYTHON_VERSION"

log "ready: llama-cpp-python $LLAMA_CPP_PYTHON_VERSION in $VENV"
echo "$VPY"
