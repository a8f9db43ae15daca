#!/usr/bin/env bash
# Configures and builds kvjit into ${KVJIT_BUILD_DIR:-build} with Ninja and ccache.
#
#   scripts/build.sh [--target NAME]... [CMAKE_ARGS...]
#
# With no --target it builds the whole tree, tests included (what
# scripts/test.sh needs); quickstart.sh names only the tools the main job runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${KVJIT_BUILD_DIR:-$root/build}

targets=()
cmake_args=()
while (($#)); do
  case $1 in
    --target)
      (($# >= 2)) || { echo "build.sh: --target needs a target name" >&2; exit 2; }
      targets+=(--target "$2")
      shift 2
      ;;
    *)
      cmake_args+=("$1")
      shift
      ;;
  esac
done

if [[ ! -f "$build_dir/build.ninja" ]]; then
  cmake -G Ninja -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "${cmake_args[@]}"
elif ((${#cmake_args[@]})); then
  cmake "$build_dir" "${cmake_args[@]}"
fi
cmake --build "$build_dir" "${targets[@]}"
