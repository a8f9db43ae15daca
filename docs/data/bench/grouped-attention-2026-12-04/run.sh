#!/bin/bash
# f32-cache attention with a kv head's query heads attended together
# (2026-12-04). One executable, SmolLM2-135M-Instruct.Q4_1 compiled for this
# Zen 4 machine (121 weights interleaved, f32 cache): C.kvx. Two kvjit
# binaries of the same working tree: `new` (build/tools/kvjit/kvjit) and
# `old`, the same link with runtime/cpu/FloatDot.cpp and PagedAttention.cpp
# as they were at 9998801 (heads one at a time) put into
# libkvjit_cpu_kernels.a in their place. Alternating, three rounds, each with
# the profile of every op:
for r in 1 2 3; do
  for v in old new; do
    $v/kvjit bench C.kvx --runs 2 --bench_threads 2 --prompt_tokens 128 --gen_tokens 64 --profile \
      --report_json att-$v-b1-$r.json
    $v/kvjit bench C.kvx --runs 1 --bench_threads 2 --requests 16 --prompt_tokens 8 --gen_tokens 128 \
      --max_batch_tokens 256 --profile --report_json att-$v-b16-$r.json
  done
done
# table.py prints each run's KvAttention and Linear ms per step, by phase.
