#!/usr/bin/env bash
# Interleaved rounds: SmolLM2 Q4_1 with every linear interleaved (il8) and without the pass (gguf).
set -euo pipefail
K=/work/wt-layout/build/tools/kvjit/kvjit
M=~/.cache/kvjit/models/SmolLM2-135M-Instruct.Q4_1.gguf
OUT=${OUT:-/tmp/layout-bench/out}
ROUNDS=${ROUNDS:-5}
mkdir -p $OUT
cd $OUT
if [[ ! -f il8.kvx ]]; then
  $K compile $M -o il8.kvx --no_verify --pipeline 'fuse-attention,fuse-projections,choose-weight-layouts{isa=avx512vnni policy=every},insert-kv-cache{block-size=16 cache-dtype=f32},fuse-elementwise,plan-memory{max-tokens-per-step=512 kv-memory-mib=1024}' 2> compile-il8.txt
  $K compile $M -o gguf.kvx --no_verify --cpu_isa none 2> compile-gguf.txt
fi
for i in $(seq 1 $ROUNDS); do
  for v in gguf il8; do
    echo "round $i $v load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a loads.txt
    $K bench $v.kvx --prompt_tokens 128 --gen_tokens 64 --bench_threads 2 --runs 1 --bench_cache_dtypes f32 --report_json batch1-$v-$i.json > batch1-$v-$i.txt 2>&1
    $K bench $v.kvx --runs 1 --bench_threads 2 --requests 16 --prompt_tokens 8 --gen_tokens 128 --max_batch_tokens 256 --bench_cache_dtypes f32 --report_json load16-$v-$i.json > load16-$v-$i.txt 2>&1
  done
done
