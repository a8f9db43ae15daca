#!/usr/bin/env bash
# The one script for a machine with an NVIDIA GPU: builds kvjit with the CUDA
# backend, runs the GPU tests, compiles SmolLM2 for this GPU and benchmarks it
# (decode at batch 1 and 64: tokens/s, TPOT; prefill: TTFT), writing
# everything into one folder. Needs no network: models come from paths.
#
#   scripts/gpu_check.sh [OUT_DIR]        # run from the repository root
#
# OUT_DIR defaults to $OUT, else gpu-check-<time>. Environment:
#   KVJIT_MODEL       SmolLM2-135M-Instruct.Q4_1.gguf (default: as fetched by
#                     tools/scripts/fetch_model.sh into ~/.cache/kvjit/models)
#   KVJIT_MODEL_F16   optionally, the same model with f16 weights (a GGUF or a
#                     Hugging Face directory): compiled and benchmarked too.
#                     The frontend has no option to requantize weights to f16,
#                     so without it only Q4_1 is measured.
#   KVJIT_SHARED_DIR  the shared test material (stories260K); default ../shared
#   KVJIT_BUILD_DIR   build folder (default: build-gpu)
#   KVJIT_SM          compute capability × 10 to compile for (default: the GPU's)
#   KVJIT_JOBS        build jobs (default: every core)
#
# Every stage runs under a time limit, and all of them within KVJIT_CHECK_S
# seconds (default 470: under 8 minutes); its outcome goes to summary.txt. A
# failing stage does not stop the later ones. Exit status: 0 when every stage
# ran and passed.
set -uo pipefail

root=$(pwd)
out=${1:-${OUT:-$root/gpu-check-$(date +%Y%m%d-%H%M%S)}}
build=${KVJIT_BUILD_DIR:-$root/build-gpu}
model=${KVJIT_MODEL:-$HOME/.cache/kvjit/models/SmolLM2-135M-Instruct.Q4_1.gguf}
model_f16=${KVJIT_MODEL_F16:-}
mkdir -p "$out"
# The GPU tests find SmolLM2 by file name in KVJIT_MODEL_DIR.
if [[ -f $model && $(basename "$model") == SmolLM2-135M-Instruct.Q4_1.gguf ]]; then
  export KVJIT_MODEL_DIR
  KVJIT_MODEL_DIR=$(cd "$(dirname "$model")" && pwd)
fi
summary=$out/summary.txt
: >"$summary"
failures=0
started=$SECONDS
budget=${KVJIT_CHECK_S:-470}

note() { echo "$*" | tee -a "$summary"; }

# stage NAME LIMIT_S CMD...: runs CMD with its output in NAME.log, within
# LIMIT_S and what is left of the budget; records the outcome and the time.
stage() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - (SECONDS - started)))
  if ((left < 5)); then
    note "$(printf '%-28s %s' "$name" "SKIPPED: out of time")"
    failures=$((failures + 1))
    return 124
  fi
  ((limit > left)) && limit=$left
  local begin=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  local outcome=ok
  if ((rc == 124)); then
    outcome="TIMED OUT after ${limit}s"
  elif ((rc != 0)); then
    outcome="FAILED (exit $rc)"
  fi
  [[ $outcome == ok ]] || failures=$((failures + 1))
  note "$(printf '%-28s %-22s %4ds' "$name" "$outcome" $((SECONDS - begin)))"
  return $rc
}

note "kvjit GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi >"$out/nvidia-smi.txt" 2>&1
  note "GPU: $(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
else
  note "GPU: nvidia-smi not found"
fi
sm=${KVJIT_SM:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ')}
sm=${sm:-90}
note "compiling kernels for sm_$sm"

# Build: only what this check runs, on every core.
targets=(kvjit kvjit-cuda-bench kvjit_runner_factory_test kvjit_cuda_host_test
  kvjit_cuda_fake_driver_test kvjit_cuda_gpu_test)
stage configure 120 cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DKVJIT_ENABLE_CUDA=ON
stage build 300 cmake --build "$build" --parallel "${KVJIT_JOBS:-$(nproc)}" --target "${targets[@]}"
kvjit=$build/tools/kvjit/kvjit
bench=$build/runtime/cuda/kvjit-cuda-bench

# Tests: the host-side logic, the runner's launches against a stand-in
# driver, then the runner against the CPU on real models.
tests_dir=$build/tests/unit/runtime/cuda
for test in kvjit_runner_factory_test kvjit_cuda_host_test kvjit_cuda_fake_driver_test \
  kvjit_cuda_gpu_test; do
  if [[ -x $tests_dir/$test ]]; then
    stage "$test" 180 "$tests_dir/$test" --gtest_output="xml:$out/$test.xml"
    # The counts, and the name of every failed test.
    grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$out/$test.log" | sed 's/^/    /' |
      tee -a "$summary"
    grep -E '^\[  FAILED  \] [A-Za-z]' "$out/$test.log" | sed 's/ (.*//' | sort -u |
      sed 's/^/    /' | tee -a "$summary"
  else
    note "$test: not built"
    failures=$((failures + 1))
  fi
done

# Compile and benchmark: Q4_1, and f16 where a model with f16 weights is given.
# bench_model NAME MODEL: compiles MODEL for CUDA, then benchmarks it with
# CUDA graphs and launch by launch.
bench_model() {
  local name=$1 path=$2
  if [[ ! -e $path ]]; then
    note "$name: model not found at $path (set KVJIT_MODEL / KVJIT_MODEL_F16); skipped"
    return
  fi
  local kvx=$build/$name-sm$sm.kvx
  if ! stage "compile-$name" 120 "$kvjit" compile "$path" --target cuda --sm "$sm" \
    --cache_dtype f16 -o "$kvx"; then
    return
  fi
  if stage "bench-$name" 120 "$bench" "$kvx" --batch 1,64 --prompt_tokens 128 --gen_tokens 64; then
    cp "$out/bench-$name.log" "$out/bench-$name.txt"
    grep '^{' "$out/bench-$name.log" >"$out/bench-$name.jsonl"
    grep -v '^{' "$out/bench-$name.log" | sed 's/^/    /' | tee -a "$summary"
  fi
  if stage "bench-$name-no-graphs" 90 "$bench" "$kvx" --batch 1,64 --prompt_tokens 128 \
    --gen_tokens 64 --largest_graph_batch 0; then
    grep '^{' "$out/bench-$name-no-graphs.log" >"$out/bench-$name-no-graphs.jsonl"
    grep -v '^{' "$out/bench-$name-no-graphs.log" | sed 's/^/    /' | tee -a "$summary"
  fi
}

if [[ -x $kvjit && -x $bench ]]; then
  bench_model smollm2-q4_1 "$model"
  if [[ -n $model_f16 ]]; then
    bench_model smollm2-f16 "$model_f16"
  else
    note "f16 weights: not measured (no KVJIT_MODEL_F16; the frontend cannot requantize to f16)"
  fi
else
  note "benchmarks: kvjit or kvjit-cuda-bench not built; skipped"
fi

note "total $((SECONDS - started))s, $failures failed stage(s); logs in $out"
((failures == 0))
