#!/usr/bin/env bash
# Builds kvjit and runs every test: GoogleTest binaries and the lit suite, via ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${KVJIT_BUILD_DIR:-$root/build}

"$root/scripts/build.sh"
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "$@"
