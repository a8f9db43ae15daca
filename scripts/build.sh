#!/usr/bin/env bash
# Configures and builds kvjit into ${KVJIT_BUILD_DIR:-build} with Ninja and ccache.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${KVJIT_BUILD_DIR:-$root/build}

if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -G Ninja -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@"
elif (($#)); then
  cmake "$build_dir" "$@"
fi
cmake --build "$build_dir"
