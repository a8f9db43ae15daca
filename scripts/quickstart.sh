#!/usr/bin/env bash
# The main job on a fresh Debian machine: install, build, fetch the default
# model (SmolLM2-135M-Instruct Q4_1), compile it and generate a reply.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${KVJIT_BUILD_DIR:-$root/build}

"$root/scripts/setup.sh"
# Only what the main job runs: kvjit and the kvjit-compiler it hands compiling
# to; scripts/test.sh builds the rest of the tree.
"$root/scripts/build.sh" --target kvjit --target kvjit-compiler
model=$("$root/tools/scripts/fetch_model.sh" | tail -n 1)
kvjit="$build_dir/tools/kvjit/kvjit"

"$kvjit" --version
"$kvjit" run "$model" --chat --stats --temperature 0 -n "${KVJIT_TOKENS:-64}" \
  -p "${KVJIT_PROMPT:-Explain in two sentences what a KV cache is.}"
