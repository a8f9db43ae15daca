#!/bin/bash
# Interleaved rows (choose-weight-layouts policy=every) against GGUF's rows
# (policy=measured with cpu=generic, which interleaves nothing) on an AMD
# Zen 5 (family 1Ah), round by round: prefill and decode of a 128-token
# prompt, and 16 concurrent decodes; f16 KV cache, 2 threads.
# Usage: run.sh KVJIT OUT_DIR NAME=MODEL.gguf ...
set -e
K=$1; D=$2; shift 2
mkdir -p "$D"
for spec in "$@"; do
  name=${spec%%=*}; model=${spec#*=}
  for p in every measured; do
    $K compile "$model" -o "$D/$name-$p.kvx" --pipeline \
      "fuse-attention,fuse-projections,choose-weight-layouts{cpu=generic isa=avx512vnni policy=$p},insert-kv-cache{block-size=16 cache-dtype=f16},fuse-elementwise,plan-memory"
  done
done
for r in 1 2 3; do
  for spec in "$@"; do
    name=${spec%%=*}
    for p in every measured; do
      out=$($K bench "$D/$name-$p.kvx" --runs 1 --bench_threads 2 --prompt_tokens 128 --gen_tokens 64 2>&1 | grep -A1 "^engine" | tail -1)
      b=$($K bench "$D/$name-$p.kvx" --runs 1 --bench_threads 2 --requests 16 --prompt_tokens 8 --gen_tokens 64 2>&1 | grep "decode-only tokens/s" | awk '{print $3}')
      echo "round $r $name $p | $out | 16str: $b"
    done
  done
done
