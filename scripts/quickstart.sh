#!/usr/bin/env bash
# The main job on a fresh Debian machine: install, build, fetch the default
# model, then run the furthest stage of the pipeline that works today (see the
# README's status table).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${KVJIT_BUILD_DIR:-$root/build}

"$root/scripts/setup.sh"
"$root/scripts/build.sh"
model=$("$root/tools/scripts/fetch_model.sh" | tail -n 1)
kvjit="$build_dir/tools/kvjit/kvjit"

"$kvjit" --version
"$kvjit" inspect "$model" | head -n 24
prompt=${KVJIT_PROMPT:-"<|im_start|>user
What is the capital of France?<|im_end|>
<|im_start|>assistant
"}
echo "--- reference generation (f32, full recompute per token; slow by design):"
"$kvjit" reference "$model" -p "$prompt" -n "${KVJIT_TOKENS:-16}"
