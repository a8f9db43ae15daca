#!/usr/bin/env bash
# Creates (or reuses) a Python virtual environment holding a pinned
# llama-cpp-python, in one of two builds of llama.cpp:
#
#   tools/scripts/reference_env.sh [portable]  # the arithmetic reference (tests/data/llamacpp/)
#   tools/scripts/reference_env.sh native      # the benchmark peer (kvjit bench --llamacpp_python)
#
# Each prints the venv's python path as its last line.
#
# portable: GGML_NATIVE=OFF, no OpenMP: llama.cpp's AVX2 kernels, whose sums
#   kvjit's CPU kernels follow bit for bit (docs/numerics.md). The reference
#   data in tests/data/llamacpp comes from this build.
# native: GGML_NATIVE=ON (-march=native: AVX-512, VNNI where the CPU has them)
#   and OpenMP on, as llama.cpp's own build does by default: the strongest
#   llama.cpp this machine can run, the one kvjit is measured against. Built for
#   the CPU it is built on: a venv copied to another machine must be rebuilt.
#
# Environment:
#   KVJIT_REFERENCE_VENV  portable venv (default: $HOME/.cache/kvjit/reference-venv)
#   KVJIT_NATIVE_VENV     native venv (default: $HOME/.cache/kvjit/native-venv)
#   KVJIT_PYTHON          python used to create the venv (default: python3)
#   KVJIT_BUILD_JOBS      compile jobs (default: 1, under `nice -n 19`, so the
#                         build does not starve other work on the machine)
#
# llama-cpp-python is an sdist: pip compiles llama.cpp from source with CMake
# (~10-30 min on 2 cores with one job).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"

die() { echo "reference_env.sh: error: $*" >&2; exit 1; }
log() { echo "reference_env.sh: $*" >&2; }

BUILD="${1:-portable}"
COMMON_ARGS="-DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF"
case "$BUILD" in
  portable)
    VENV="${KVJIT_REFERENCE_VENV:-$HOME/.cache/kvjit/reference-venv}"
    BUILD_ARGS="-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF $COMMON_ARGS"
    ;;
  native)
    VENV="${KVJIT_NATIVE_VENV:-$HOME/.cache/kvjit/native-venv}"
    BUILD_ARGS="-DGGML_NATIVE=ON -DGGML_OPENMP=ON $COMMON_ARGS"
    ;;
  *) die "unknown build '$BUILD': expected portable or native" ;;
esac
PYTHON="${KVJIT_PYTHON:-python3}"
command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' not found (set KVJIT_PYTHON)"

VPY="$VENV/bin/python"
# What the venv's llama.cpp was built with; a venv built otherwise is rebuilt.
STAMP="$VENV/kvjit-llama-cpp-build.txt"
WANTED_STAMP="llama-cpp-python $LLAMA_CPP_PYTHON_VERSION; CMAKE_ARGS $BUILD_ARGS; host $(uname -m)"

installed_version() {
  "$VPY" -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))' 2>/dev/null || true
}

if [[ -x "$VPY" ]] && [[ "$(installed_version)" == "$LLAMA_CPP_PYTHON_VERSION" ]] \
   && [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANTED_STAMP" ]] \
   && "$VPY" -c 'import llama_cpp' >/dev/null 2>&1; then
  log "reusing $VENV (llama-cpp-python $LLAMA_CPP_PYTHON_VERSION, $BUILD build)"
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

log "installing llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION ($BUILD CPU build from source; this takes a while)"
"$VPY" -m pip install --quiet --upgrade pip numpy >&2 || die "could not install pip and numpy in $VENV"

export CMAKE_ARGS="${CMAKE_ARGS:-} $BUILD_ARGS"
export CMAKE_BUILD_PARALLEL_LEVEL="${KVJIT_BUILD_JOBS:-1}"
export MAX_JOBS="${KVJIT_BUILD_JOBS:-1}"
export FORCE_CMAKE=1

rm -f "$STAMP"
nice -n 19 "$VPY" -m pip install --no-cache-dir --force-reinstall --no-deps --verbose \
  "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >&2 \
  || die "pip install llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION failed (see the build log above)"
"$VPY" -m pip install --quiet "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >&2 \
  || die "could not install llama-cpp-python's dependencies"

"$VPY" -c 'import llama_cpp' >/dev/null 2>&1 || die "llama_cpp does not import after install"
[[ "$(installed_version)" == "$LLAMA_CPP_PYTHON_VERSION" ]] \
  || die "installed version '$(installed_version)' != pinned $LLAMA_CPP_PYTHON_VERSION"
echo "$WANTED_STAMP" >"$STAMP"

log "ready: llama-cpp-python $LLAMA_CPP_PYTHON_VERSION ($BUILD) in $VENV"
log "llama.cpp: $("$VPY" -c 'import llama_cpp; print(llama_cpp.llama_print_system_info().decode())')"
echo "$VPY"
