#!/usr/bin/env bash
# The three ratios issue 14 sets goals for, for one GGUF model: kvjit beside
# llama.cpp built natively for this CPU (build_llamacpp_native.sh), 2 threads,
# engines interleaved round by round, each round running five commands in
# turn: kvjit bench (pp128 + tg64), llama-bench (-p 128 -n 64), llama-bench's
# tg64 again at depth 128 (-d 128: 128 tokens in the cache first, as kvjit's
# 64 decode steps follow its 128-token prompt; llama-bench's plain tg64
# starts from an empty cache), kvjit bench with 16 concurrent requests (8
# prompt tokens, 128 generated), and llama-batched-bench (-npp 8 -ntg 128
# -npl 16). Raw reports go to OUT_DIR;
# the table (median and range of the rounds) is printed at the end by
# native_ratios_table.py.
#
#   tools/scripts/run_native_ratios.sh MODEL.gguf OUT_DIR [ROUNDS, default 5]
#
# Needs build/ (scripts/build.sh) and llama.cpp's tools; run it on an
# otherwise idle machine: anything else running shows in the ranges.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
model=$1
out=$2
rounds=${3:-5}
kvjit="$root/build/tools/kvjit/kvjit"
llama_bin=$("$root/tools/scripts/build_llamacpp_native.sh" | tail -n1)
mkdir -p "$out"
git -C "$root" describe --always --dirty >"$out/commit.txt"
for ((r = 1; r <= rounds; ++r)); do
  echo "== round $r of $rounds" >&2
  "$kvjit" bench "$model" --runs 1 --bench_threads 2 --prompt_tokens 128 --gen_tokens 64 \
    --report_json "$out/kvjit-batch1-$r.json" >"$out/kvjit-batch1-$r.txt"
  "$llama_bin/llama-bench" -m "$model" -p 128 -n 64 -t 2 -r 1 -o json >"$out/llama-bench-$r.json" 2>/dev/null
  "$llama_bin/llama-bench" -m "$model" -p 0 -n 64 -d 128 -t 2 -r 1 -o json >"$out/llama-depth128-$r.json" 2>/dev/null
  "$kvjit" bench "$model" --runs 1 --bench_threads 2 --requests 16 --prompt_tokens 8 --gen_tokens 128 \
    --max_batch_tokens 256 --report_json "$out/kvjit-batched16-$r.json" >"$out/kvjit-batched16-$r.txt"
  "$llama_bin/llama-batched-bench" -m "$model" -c 4096 -b 256 -ub 256 -npp 8 -ntg 128 -npl 16 -t 2 -fa on \
    --output-format jsonl >"$out/llama-batched-$r.jsonl" 2>/dev/null
done
python3 "$root/tools/scripts/native_ratios_table.py" "$out"
