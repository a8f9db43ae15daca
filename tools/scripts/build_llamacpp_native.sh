#!/usr/bin/env bash
# Builds llama.cpp's own command-line tools (llama-completion, llama-bench,
# llama-batched-bench, llama-server, llama-perplexity, llama-quantize) natively for this CPU from the source of
# the pinned llama-cpp-python sdist, the same llama.cpp that
# reference_env.sh builds: the peer for measurements a Python process would
# distort (resident memory, start-up time).
#
#   tools/scripts/build_llamacpp_native.sh     # last line of stdout: the bin/ folder
#
# GGML_NATIVE=ON (AVX-512 and VNNI where the CPU has them) and OpenMP, as
# llama.cpp builds by default. Idempotent: an existing build of the same
# version is reused.
#
# Environment:
#   KVJIT_LLAMACPP_DIR  where the source and build go (default: $HOME/.cache/kvjit/llama.cpp-native)
#   KVJIT_BUILD_JOBS    compile jobs (default: 1, under `nice -n 19`)
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION="0.3.36"
DIR="${KVJIT_LLAMACPP_DIR:-$HOME/.cache/kvjit/llama.cpp-native}"
SOURCE="$DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
BUILD="$DIR/build-$LLAMA_CPP_PYTHON_VERSION"
TOOLS=(llama-completion llama-bench llama-batched-bench llama-server llama-perplexity llama-quantize)

die() { echo "build_llamacpp_native.sh: error: $*" >&2; exit 1; }
log() { echo "build_llamacpp_native.sh: $*" >&2; }

have_all() {
  local tool
  for tool in "${TOOLS[@]}"; do [[ -x "$BUILD/bin/$tool" ]] || return 1; done
}

if have_all; then
  log "reusing $BUILD/bin"
  echo "$BUILD/bin"
  exit 0
fi

mkdir -p "$DIR"
if [[ ! -f "$SOURCE/CMakeLists.txt" ]]; then
  log "fetching the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist"
  python3 -m pip download --quiet --no-deps --no-binary :all: \
    "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$DIR" >&2 || die "pip download failed"
  tar -xzf "$DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" -C "$DIR" \
    || die "cannot unpack the sdist"
fi

log "building ${TOOLS[*]} (native, OpenMP) in $BUILD"
cmake -S "$SOURCE" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
  -DGGML_OPENMP=ON -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON >&2 \
  || die "configure failed"
nice -n 19 cmake --build "$BUILD" --parallel "${KVJIT_BUILD_JOBS:-1}" --target "${TOOLS[@]}" >&2 \
  || die "build failed"
have_all || die "the build did not produce ${TOOLS[*]}"
log "ready: $BUILD/bin"
echo "$BUILD/bin"
