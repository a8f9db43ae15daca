#!/bin/bash
# The f16 KV cache's stores in F16C (2026-12-04). Two kvjit binaries,
# `head` (31d9f1f: WriteKv converting each element with quant::FloatToHalf)
# and `new` (the working tree with StoreHalfRow), alternating, two rounds,
# the f16 cache only, each with the profile of every op:
M=SmolLM2-135M-Instruct.Q4_1.gguf
for r in 1 2; do
  for v in head new; do
    $v/kvjit bench $M --runs 2 --bench_threads 2 --bench_cache_dtypes f16 --prompt_tokens 128 --gen_tokens 64 \
      --profile --report_json kvw-$v-b1-$r.json
    $v/kvjit bench $M --runs 1 --bench_threads 2 --bench_cache_dtypes f16 --requests 16 --prompt_tokens 8 \
      --gen_tokens 128 --max_batch_tokens 256 --profile --report_json kvw-$v-b16-$r.json
  done
done
