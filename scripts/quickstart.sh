#!/usr/bin/env bash
# The main job on a fresh Debian machine: install, build, then run the furthest
# stage of the pipeline that works today (see the README's status table).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${KVJIT_BUILD_DIR:-$root/build}

"$root/scripts/setup.sh"
"$root/scripts/build.sh"

"$build_dir/tools/kvjit/kvjit" --version
echo "--- the tfm IR of a model, verified and printed back by kvjit-opt:"
"$build_dir/tools/kvjit-opt/kvjit-opt" "$root/docs/examples/tiny_llama_layer.mlir"
