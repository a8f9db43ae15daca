#!/usr/bin/env bash
# Regenerates tests/data/transformers/ (README.md there): each family's config
# files as transformers writes them; its weights as
# write_transformers_weights.py writes them with numpy and gguf (what
# TransformersFamiliesTest runs), checked equal to what transformers'
# save_pretrained and llama.cpp's convert_hf_to_gguf.py write; transformers'
# and llama.cpp's reference runs on those weights; the seeds and sha256 of
# the weights (weights.json). The weights themselves are not kept.
#
#   tools/scripts/regen_transformers_data.sh [FAMILY...]
#
# Environment:
#   KVJIT_HF_PYTHON     a python with torch and transformers
#                       (default: $HOME/.cache/kvjit/hf-venv/bin/python)
#   KVJIT_WRITER_PYTHON a python with the numpy and gguf scripts/setup.sh pins
#                       (default: python3)
#   KVJIT_LLAMACPP_DIR  where build_llamacpp_native.sh unpacked the pinned
#                       llama-cpp-python sdist, whose llama.cpp holds
#                       convert_hf_to_gguf.py (default: $HOME/.cache/kvjit/llama.cpp-native)
#   KVJIT_REFERENCE_VENV  see reference_env.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DATA="$ROOT/tests/data/transformers"
HF_PYTHON="${KVJIT_HF_PYTHON:-$HOME/.cache/kvjit/hf-venv/bin/python}"
WRITER_PYTHON="${KVJIT_WRITER_PYTHON:-python3}"
CONVERTER="${KVJIT_LLAMACPP_DIR:-$HOME/.cache/kvjit/llama.cpp-native}/llama_cpp_python-0.3.36/vendor/llama.cpp"

die() { echo "regen_transformers_data.sh: error: $*" >&2; exit 1; }

"$HF_PYTHON" -c 'import torch, transformers' 2>/dev/null \
  || die "$HF_PYTHON cannot import torch and transformers (set KVJIT_HF_PYTHON)"
"$WRITER_PYTHON" -c 'import numpy, gguf' 2>/dev/null \
  || die "$WRITER_PYTHON cannot import numpy and gguf (set KVJIT_WRITER_PYTHON)"
[[ -f "$CONVERTER/convert_hf_to_gguf.py" ]] \
  || die "$CONVERTER/convert_hf_to_gguf.py not found (run tools/scripts/build_llamacpp_native.sh)"
PY="$("$ROOT/tools/scripts/reference_env.sh" | tail -n1)"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
ONLY=()
for family in "$@"; do ONLY+=(--only "$family"); done

"$HF_PYTHON" "$ROOT/tools/scripts/make_transformers_models.py" --converter "$CONVERTER" \
  --work "$WORK" --writer_python "$WRITER_PYTHON" "${ONLY[@]}" "$DATA"
for gguf in "$WORK"/*.gguf; do
  name="$(basename "${gguf%.gguf}")"
  "$PY" "$ROOT/tools/scripts/llamacpp_reference.py" greedy "$gguf" --prompts "$DATA/prompts.json" \
    -n 16 --top-k 16 -o "$DATA/$name.llamacpp.json"
done
# What the test writes is what the references ran on: every file's sha256 is
# the manifest's, and the manifest's the references'.
"$WRITER_PYTHON" "$ROOT/tools/scripts/write_transformers_weights.py" "$WORK/check" "${ONLY[@]}"
# Both references must have run the same prompts: the tokenizer.json of the
# folder and the GGUF's vocabulary tokenise them alike. And each ran the
# weights of the manifest.
python3 - "$DATA" "$@" <<'CHECK'
import glob, json, os, sys
manifest = json.load(open(os.path.join(sys.argv[1], "weights.json")))["families"]
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.*.json"))):
    reference = json.load(open(path))
    if "model_sha256" not in reference:
        continue
    model = reference["model"]
    stored = model if model.endswith(".gguf") else model + "/model.safetensors"
    family = model.split(".")[0].rsplit("-", 1)[0]
    if sys.argv[2:] and family not in sys.argv[2:]:
        continue
    if manifest[family]["sha256"][stored] != reference["model_sha256"]:
        sys.exit("regen_transformers_data.sh: error: %s ran %s, not the manifest's %s" % (path, reference["model_sha256"], stored))
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.llamacpp.json"))):
    family = os.path.basename(path).split(".")[0]
    llama_cpp = json.load(open(path))["prompts"]
    transformers = json.load(open(os.path.join(sys.argv[1], family + "-f32.transformers.json")))["prompts"]
    for ours, theirs in zip(llama_cpp, transformers):
        if ours["prompt_ids"] != theirs["prompt_ids"]:
            sys.exit("regen_transformers_data.sh: error: %s: prompt %s tokenises differently" % (path, ours["name"]))
CHECK
echo "regenerated the models and reference data in $DATA" >&2
