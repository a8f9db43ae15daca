#!/usr/bin/env bash
# Interleaved rounds of kvjit bench, the kvjit of 4ef70c3 (before issue 14's
# GEMMs for the K-quants and float types) against this session's, per model.
# usage: before_after.sh OUT ROUNDS MODEL...
set -euo pipefail
out=$1; rounds=$2; shift 2
mkdir -p "$out"
for model in "$@"; do
  name=$(basename "$model" .gguf)
  for ((r = 1; r <= rounds; ++r)); do
    for build in before after; do
      bin=/tmp/kvjit-$build
      "$bin" bench "$model" --runs 1 --bench_threads 2 --bench_cache_dtypes f32 --prompt_tokens 128 --gen_tokens 64 \
        --report_json "$out/$name-$build-batch1-$r.json" >"$out/$name-$build-batch1-$r.txt" 2>&1
      "$bin" bench "$model" --runs 1 --bench_threads 2 --bench_cache_dtypes f32 --requests 16 --prompt_tokens 8 \
        --gen_tokens 128 --max_batch_tokens 256 --report_json "$out/$name-$build-batched16-$r.json" \
        >"$out/$name-$build-batched16-$r.txt" 2>&1
    done
  done
  for build in before after; do
    /tmp/kvjit-$build bench "$model" --runs 1 --bench_threads 2 --bench_cache_dtypes f32 --prompt_tokens 128 \
      --gen_tokens 64 --profile >"$out/$name-$build-profile.txt" 2>&1
  done
done
uptime >"$out/load.txt"
