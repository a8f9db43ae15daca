#!/usr/bin/env bash
# Interleaved Q4_1 rows on AMD Zen 4 (docs/benchmarks.md): the kernel bench's
# decode pass and GEMM shapes, then SmolLM2 Q4_1 compiled for the generic
# CPU (GGUF's rows) and for Zen 4 (its 120 Q4_1 linears interleaved by 8),
# alternating, 5 rounds of kvjit bench at batch 1 and with 16 requests.
# usage: run.sh OUT   (from the repository root, after scripts/build.sh)
set -euo pipefail
out=$1; mkdir -p "$out"
K=build/tools/kvjit/kvjit; B=build/runtime/cpu/kvjit_cpu_kernel_bench
M=${M:-$HOME/.cache/kvjit/models/SmolLM2-135M-Instruct.Q4_1.gguf}
git describe --always --dirty >"$out/commit.txt"
for r in 1 2 3; do $B 300 decode >"$out/kernel-decode-$r.txt" 2>&1; done
for r in 1 2; do $B 200 shapes >"$out/kernel-shapes-$r.txt" 2>&1; done
for model in generic zen4; do
  $K compile "$M" --no_verify --cpu_isa avx512vnni --cpu_model $model -o "$out/$model.kvx" 2>"$out/compile-$model.txt"
done
for r in 1 2 3 4 5; do
  for model in generic zen4; do
    $K bench "$out/$model.kvx" --runs 1 --bench_threads 2 --prompt_tokens 128 --gen_tokens 64 \
      --report_json "$out/$model-batch1-$r.json" >"$out/$model-batch1-$r.txt" 2>&1
    $K bench "$out/$model.kvx" --runs 1 --bench_threads 2 --requests 16 --prompt_tokens 8 --gen_tokens 128 \
      --max_batch_tokens 256 --report_json "$out/$model-batched16-$r.json" >"$out/$model-batched16-$r.txt" 2>&1
  done
done
rm -f "$out"/*.kvx "$out"/*.kvw
uptime >"$out/load.txt"
