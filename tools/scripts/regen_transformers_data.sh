#!/usr/bin/env bash
# Regenerates tests/data/transformers/: the random-weight models written by
# transformers, transformers' reference runs, llama.cpp's GGUF conversions of
# them and llama.cpp's runs on those (tests/data/transformers/README.md).
#
#   tools/scripts/regen_transformers_data.sh
#
# Environment:
#   KVJIT_HF_PYTHON     a python with torch and transformers
#                       (default: $HOME/.cache/kvjit/hf-venv/bin/python)
#   KVJIT_LLAMACPP_DIR  where build_llamacpp_native.sh unpacked the pinned
#                       llama-cpp-python sdist, whose llama.cpp holds
#                       convert_hf_to_gguf.py (default: $HOME/.cache/kvjit/llama.cpp-native)
#   KVJIT_REFERENCE_VENV  see reference_env.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DATA="$ROOT/tests/data/transformers"
HF_PYTHON="${KVJIT_HF_PYTHON:-$HOME/.cache/kvjit/hf-venv/bin/python}"
CONVERTER="${KVJIT_LLAMACPP_DIR:-$HOME/.cache/kvjit/llama.cpp-native}/llama_cpp_python-0.3.36/vendor/llama.cpp"

die() { echo "regen_transformers_data.sh: error: $*" >&2; exit 1; }

"$HF_PYTHON" -c 'import torch, transformers' 2>/dev/null \
  || die "$HF_PYTHON cannot import torch and transformers (set KVJIT_HF_PYTHON)"
[[ -f "$CONVERTER/convert_hf_to_gguf.py" ]] \
  || die "$CONVERTER/convert_hf_to_gguf.py not found (run tools/scripts/build_llamacpp_native.sh)"
PY="$("$ROOT/tools/scripts/reference_env.sh" | tail -n1)"

"$HF_PYTHON" "$ROOT/tools/scripts/make_transformers_models.py" --converter "$CONVERTER" "$DATA"
for gguf in "$DATA"/*.gguf; do
  "$PY" "$ROOT/tools/scripts/llamacpp_reference.py" greedy "$gguf" --prompts "$DATA/prompts.json" \
    -n 16 --top-k 16 -o "${gguf%.gguf}.llamacpp.json"
done
# Both references must have run the same prompts: the tokenizer.json of the
# folder and the GGUF's vocabulary tokenise them alike.
python3 - "$DATA" <<'CHECK'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.llamacpp.json"))):
    family = os.path.basename(path).split(".")[0]
    llama_cpp = json.load(open(path))["prompts"]
    transformers = json.load(open(os.path.join(sys.argv[1], family + "-f32.transformers.json")))["prompts"]
    for ours, theirs in zip(llama_cpp, transformers):
        if ours["prompt_ids"] != theirs["prompt_ids"]:
            sys.exit("regen_transformers_data.sh: error: %s: prompt %s tokenises differently" % (path, ours["name"]))
CHECK
echo "regenerated the models and reference data in $DATA" >&2
