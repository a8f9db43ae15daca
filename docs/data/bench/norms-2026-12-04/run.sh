#!/bin/bash
# RMS norms four rows at a time (2026-12-04).
# One executable (SmolLM2-135M-Instruct.Q4_1 compiled for this Zen 4
# machine, f32 cache): C.kvx. Two kvjit binaries: `head` (31d9f1f) and
# `new` (the working tree with this change), alternating, two rounds, each
# with the profile of every op:
for r in 1 2; do
  for v in head new; do
    $v/kvjit bench C.kvx --runs 2 --bench_threads 2 --prompt_tokens 128 --gen_tokens 64 --profile \
      --report_json norm-$v-b1-$r.json
    $v/kvjit bench C.kvx --runs 1 --bench_threads 2 --requests 16 --prompt_tokens 8 --gen_tokens 128 \
      --max_batch_tokens 256 --profile --report_json norm-$v-b16-$r.json
  done
done
