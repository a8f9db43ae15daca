#!/usr/bin/env bash
# Regenerates the llama.cpp reference data in tests/data/llamacpp/ with the
# pinned llama-cpp-python (tools/scripts/reference_env.sh) and the pinned
# SmolLM2 model (tools/scripts/fetch_model.sh).
#
#   tools/scripts/regen_llamacpp_data.sh
#
# Environment: KVJIT_MODEL_DIR, KVJIT_REFERENCE_VENV (see those scripts);
#   KVJIT_SHARED  the shared/ folder (default: <repo>/../shared).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DATA="$ROOT/tests/data/llamacpp"
SHARED="${KVJIT_SHARED:-$ROOT/../shared}"
STORIES="$SHARED/models/stories260K.gguf"

die() { echo "regen_llamacpp_data.sh: error: $*" >&2; exit 1; }

PY="$("$ROOT/tools/scripts/reference_env.sh" | tail -n1)"
SMOL="$("$ROOT/tools/scripts/fetch_model.sh" | tail -n1)"
[[ -f "$STORIES" ]] || die "$STORIES not found (set KVJIT_SHARED)"
REF="$ROOT/tools/scripts/llamacpp_reference.py"

"$PY" "$REF" tokenize "$SMOL" --cases "$DATA/smollm2_tokenize_cases.json" \
  -o "$DATA/smollm2_tokenize.json"
"$PY" "$REF" greedy "$SMOL" --prompts "$DATA/smollm2_greedy_prompts.json" -n 32 \
  -o "$DATA/smollm2_greedy.json"
"$PY" "$REF" greedy "$STORIES" --prompts "$DATA/stories260K_greedy_prompts.json" -n 64 \
  -o "$DATA/stories260K_greedy.json"

# The random-weight family models, written with the gguf package
# scripts/setup.sh installs for python3 (not in the reference venv).
RANDOM_DIR="$(mktemp -d)"
trap 'rm -rf "$RANDOM_DIR"' EXIT
TOKENIZERS="$ROOT/tests/data/hf_tokenizers"
write_random() {  # NAME ARGS...
  local name=$1
  shift
  python3 "$ROOT/tools/scripts/make_random_gguf_model.py" "$@" "$RANDOM_DIR/random_$name.gguf"
  "$PY" "$REF" greedy "$RANDOM_DIR/random_$name.gguf" \
    --prompts "$DATA/random_families_greedy_prompts.json" -n 16 -o "$DATA/random_${name}_greedy.json"
}
write_random llama3 --family llama3 --tokenizer "$TOKENIZERS/llama3_style.tokenizer.json"
write_random llama3_tied --family llama3 --tied --tokenizer "$TOKENIZERS/llama3_style.tokenizer.json"
write_random qwen3 --family qwen3 --tokenizer "$TOKENIZERS/qwen25_style.tokenizer.json"
write_random phi3 --family phi3 --tokenizer "$TOKENIZERS/llama3_style.tokenizer.json"
write_random gemma2 --family gemma2 --tokenizer "$TOKENIZERS/llama3_style.tokenizer.json"
write_random gemma3 --family gemma3 --tokenizer "$TOKENIZERS/llama3_style.tokenizer.json"
echo "regenerated reference data in $DATA" >&2
