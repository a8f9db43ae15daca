#!/usr/bin/env bash
# Runs every CPU benchmark of docs/benchmarks.md and keeps each one's raw JSON
# report in OUT_DIR (default docs/data/bench): kvjit against llama.cpp built
# natively for this CPU, engines interleaved, --runs times each.
#
#   tools/scripts/run_benchmarks.sh [OUT_DIR]
#
# Needs: build/ (scripts/build.sh), the SmolLM2 model (tools/scripts/fetch_model.sh),
# the native llama-cpp-python (tools/scripts/reference_env.sh native) and
# llama.cpp's own tools (tools/scripts/build_llamacpp_native.sh). Takes about
# 15 minutes on 2 cores; anything else running on the machine shows in the
# spread of the figures, so run it on an otherwise idle machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=${1:-docs/data/bench}
mkdir -p "$out"
runs=${KVJIT_BENCH_RUNS:-5}
kvjit=build/tools/kvjit/kvjit
py=$(tools/scripts/reference_env.sh native | tail -n1)
llama_bin=$(tools/scripts/build_llamacpp_native.sh | tail -n1)
smollm2=$(tools/scripts/fetch_model.sh | tail -n1)
stories=../shared/models/stories260K.gguf
common=(--runs "$runs" --bench_threads 2 --llamacpp_python "$py")

run() {
  local name=$1
  shift
  echo "== $name: $*" >&2
  "$@" --report_json "$out/$name.json" | grep -v '^{' >"$out/$name.txt"
  cat "$out/$name.txt" >&2
}

run batch1-smollm2 "$kvjit" bench "$smollm2" "${common[@]}"
run batch1-stories260K "$kvjit" bench "$stories" "${common[@]}"
run load16-smollm2 "$kvjit" bench "$smollm2" "${common[@]}" --requests 16 --prompt_tokens 128 \
  --gen_tokens 64 --max_batch_tokens 256
run load16-prefix96-smollm2 "$kvjit" bench "$smollm2" --runs "$runs" --bench_threads 2 \
  --bench_cache_dtypes f32 --requests 16 --prompt_tokens 128 --gen_tokens 64 \
  --max_batch_tokens 256 --shared_prefix_tokens 96
run load16-prefix96-nocache-smollm2 "$kvjit" bench "$smollm2" --runs "$runs" --bench_threads 2 \
  --bench_cache_dtypes f32 --requests 16 --prompt_tokens 128 --gen_tokens 64 \
  --max_batch_tokens 256 --shared_prefix_tokens 96 --prefix_caching=false
echo "== memory and start-up" >&2
python3 tools/scripts/bench_memory.py --kvjit "$kvjit" --llamacpp_bin "$llama_bin" \
  --model "$smollm2" --runs "$runs" -o "$out/memory-smollm2.json" | tee "$out/memory-smollm2.txt" >&2
git rev-parse HEAD >"$out/commit.txt"
echo "reports in $out" >&2
