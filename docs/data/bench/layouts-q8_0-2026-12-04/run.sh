#!/bin/bash
# Interleaved Q8_0 rows and the tied output projection on Zen 4 (2026-12-04),
# working tree on 9998801 with the embedding lookup reading interleaved tables.
# Executables, f32 cache (kvjit compile's default), 2 threads:
#   A: SmolLM2-135M-Instruct.Q4_1.gguf --cpu_isa avx512vnni --cpu_model zen4 as
#      the policy was (120 Q4_1 linears interleaved, the tied Q8_0 token_embd in GGUF's rows)
#   B: the same model, --pipeline '...choose-weight-layouts{isa=avx512vnni policy=every}...'
#      (the 120 linears and token_embd interleaved: what the zen4 policy chooses now)
#   X: SmolLM2 requantized to Q8_0 (tools/scripts/requantize_gguf.py IN OUT q8_0),
#      --cpu_model generic (every weight in GGUF's rows)
#   Y: the Q8_0 model with policy=every (121 Q8_0 weights interleaved)
K=build/tools/kvjit/kvjit
for r in 1 2 3 4 5; do
  for v in A B X Y; do
    $K bench $v.kvx --runs 1 --bench_threads 2 --prompt_tokens 128 --gen_tokens 64 --report_json $v-b1-$r.json
    $K bench $v.kvx --runs 1 --bench_threads 2 --requests 16 --prompt_tokens 8 --gen_tokens 128 \
      --max_batch_tokens 256 --report_json $v-b16-$r.json
  done
done
# Then, alternating, twice: the profile of each op (A-prof-R.json.gz, B-prof-R.json.gz)
for r in 1 2; do
  for v in A B; do
    $K bench $v.kvx --runs 2 --bench_threads 2 --prompt_tokens 128 --gen_tokens 64 --profile --report_json $v-prof-$r.json
  done
done
# python3 table.py prints the table of docs/benchmarks.md from the first loop's reports.
