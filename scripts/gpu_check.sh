#!/usr/bin/env bash
# The GPU check, in two halves, because a GPU machine may have CUDA but not
# kvjit's compiler toolchain (LLVM and MLIR, Debian's Abseil) nor a network:
#
#   scripts/gpu_check.sh prepare [BUNDLE]       # on the build machine (no GPU needed)
#   scripts/gpu_check.sh run [BUNDLE] [OUT_DIR] # on the GPU machine; both from the repository root
#   scripts/gpu_check.sh all [OUT_DIR]          # both, on a GPU machine that can build kvjit
#
# prepare builds the runtime-only GPU binaries (kvjit-cuda-bench and the CUDA
# tests) and `kvjit`, compiles the test models for the GPU (NVRTC needs no
# GPU), and gathers into BUNDLE (default build-gpu-bundle, which git ignores):
# bin/ the binaries, lib/ the shared libraries they need that a CUDA machine
# lacks (Abseil), models/ stories260K, kvx/ the compiled executables. The
# bundle is what travels to the GPU machine (a few MiB).
#
# run runs the GPU tests and benchmarks the bundle's executables (decode at
# batch 1 and 64: tokens/s, TPOT; prefill: TTFT), with graphs and launch by
# launch. Every stage runs under a time limit, all within KVJIT_CHECK_S
# seconds (default 470: under 8 minutes); a failing stage does not stop the
# later ones. OUT_DIR (default $OUT, else gpu-check-<time>) receives at most
# four files: summary.txt, bench.jsonl, logs.tar.gz (every log and gtest
# XML) and nvidia-smi.txt. Exit status: 0 when every stage ran and passed.
#
# Environment:
#   KVJIT_MODEL       prepare: SmolLM2-135M-Instruct.Q4_1.gguf (default: as
#                     tools/scripts/fetch_model.sh fetches it). Its executable
#                     refers to the GGUF where it lies (98 MB: too large to
#                     travel with the bundle), so run tests and benchmarks it
#                     only where that path exists, e.g. on the build machine.
#   KVJIT_SHARED_DIR  prepare: the shared test material (stories260K); default ../shared
#   KVJIT_BUILD_DIR   prepare: build folder (default: build-gpu)
#   KVJIT_SM          prepare: compute capability × 10 to compile for (default:
#                     the GPU's where there is one, else 90)
#   KVJIT_JOBS        prepare: build jobs (default: every core)
set -uo pipefail

root=$(pwd)
mode=${1:-}
if [[ $mode == all ]]; then
  # A GPU machine that has the toolchain too: both halves, one after the other.
  "$0" prepare "$root/build-gpu-bundle" && exec "$0" run "$root/build-gpu-bundle" "${2:-}"
  exit 1
fi
bundle=${2:-$root/build-gpu-bundle}
case $mode in
  prepare | run) ;;
  *)
    echo "usage: scripts/gpu_check.sh all [OUT_DIR] | prepare [BUNDLE] | run [BUNDLE] [OUT_DIR]" >&2
    exit 2
    ;;
esac
mkdir -p "$bundle"
bundle=$(cd "$bundle" && pwd)

if [[ $mode == prepare ]]; then
  out=$bundle/prepare-logs
else
  out=${3:-${OUT:-$root/gpu-check-$(date +%Y%m%d-%H%M%S)}}
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
logs=$(mktemp -d)
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
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
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

finish() {
  note "total $((SECONDS - started))s, $failures failed stage(s)"
  tar -czf "$out/logs.tar.gz" -C "$logs" . 2>/dev/null
  rm -rf "$logs"
  ((failures == 0))
  exit
}

# The GPU binaries and tests this check needs; all link the runtime alone.
runtime_binaries=(kvjit-cuda-bench kvjit_runner_factory_test kvjit_cuda_host_test
  kvjit_cuda_gpu_test)

prepare() {
  local build=${KVJIT_BUILD_DIR:-$root/build-gpu}
  local shared=${KVJIT_SHARED_DIR:-$root/../shared}
  local model=${KVJIT_MODEL:-$HOME/.cache/kvjit/models/SmolLM2-135M-Instruct.Q4_1.gguf}
  local sm=${KVJIT_SM:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
    head -1 | tr -d '. ')}
  sm=${sm:-90}
  budget=${KVJIT_CHECK_S:-3600}
  note "kvjit GPU bundle for sm_$sm, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  stage configure 600 cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DKVJIT_ENABLE_CUDA=ON || finish
  stage build 3000 cmake --build "$build" --parallel "${KVJIT_JOBS:-$(nproc)}" \
    --target kvjit "${runtime_binaries[@]}" || finish
  rm -rf "$bundle/bin" "$bundle/lib" "$bundle/models" "$bundle/kvx"
  mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/models" "$bundle/kvx"
  local binary
  for binary in "${runtime_binaries[@]}"; do
    cp "$(find "$build" -type f -name "$binary" -perm -u+x | head -1)" "$bundle/bin/" ||
      { note "$binary: not built"; failures=$((failures + 1)); }
  done
  # Shared libraries other than the C and C++ runtimes and CUDA's, which a
  # CUDA machine has (libcuda is loaded at run time, never linked).
  ldd "$bundle"/bin/* | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libgcc_s|libstdc\+\+|ld-linux[^/]*)\.so' |
    grep -Ev '/(libcudart|libnvrtc)\.so' |
    xargs -r cp -L -t "$bundle/lib/"
  if [[ -f $shared/models/stories260K.gguf ]]; then
    cp "$shared/models/stories260K.gguf" "$bundle/models/"
    local kvjit=$build/tools/kvjit/kvjit stories=$bundle/models/stories260K.gguf
    stage compile-stories260K-cuda 300 "$kvjit" compile "$stories" --target cuda --sm "$sm" \
      --cache_dtype f32 --max_tokens_per_step 64 -o "$bundle/kvx/stories260K-cuda.kvx"
    stage compile-stories260K-cpu 300 "$kvjit" compile "$stories" --target cpu \
      --cache_dtype f32 --max_tokens_per_step 64 -o "$bundle/kvx/stories260K-cpu.kvx"
    stage compile-stories260K-bench 300 "$kvjit" compile "$stories" --target cuda --sm "$sm" \
      --cache_dtype f16 -o "$bundle/kvx/stories260K-bench.kvx"
    # Tensor parallelism over 2 GPUs (NCCL) against the same split on the
    # CPU; run needs kvjit itself for mpirun.
    stage compile-stories260K-tp2-cuda 300 "$kvjit" compile "$stories" --tp 2 --target cuda \
      --sm "$sm" --cache_dtype f32 --max_tokens_per_step 64 -o "$bundle/kvx/stories260K-tp2-cuda.kvx"
    stage compile-stories260K-tp2-cpu 300 "$kvjit" compile "$stories" --tp 2 --target cpu \
      --cache_dtype f32 --max_tokens_per_step 64 -o "$bundle/kvx/stories260K-tp2-cpu.kvx"
    cp "$kvjit" "$bundle/bin/" || { note "kvjit: not built"; failures=$((failures + 1)); }
  else
    note "stories260K: not found at $shared/models/stories260K.gguf (set KVJIT_SHARED_DIR)"
    failures=$((failures + 1))
  fi
  if [[ -f $model ]]; then
    stage compile-SmolLM2-cuda 600 "$build/tools/kvjit/kvjit" compile "$model" --target cuda \
      --sm "$sm" --cache_dtype f16 --max_tokens_per_step 128 -o "$bundle/kvx/SmolLM2-cuda.kvx"
    # Its weights stay where they are: run looks for them there.
    echo "$(cd "$(dirname "$model")" && pwd)/$(basename "$model")" >"$bundle/kvx/SmolLM2-cuda.weights"
  else
    note "SmolLM2: not found at $model (set KVJIT_MODEL); its tests will skip"
  fi
  # Executables name their weight files by absolute path: run links this
  # path to wherever the bundle lands.
  echo "$bundle" >"$bundle/prepared-at.txt"
  note "bundle: $(du -sh "$bundle" | cut -f1) in $bundle"
  finish
}

run() {
  note "kvjit GPU check, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi >"$out/nvidia-smi.txt" 2>&1
    note "GPU: $(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
  else
    note "GPU: nvidia-smi not found"
  fi
  if [[ ! -f $bundle/prepared-at.txt ]]; then
    note "no bundle in $bundle: run scripts/gpu_check.sh prepare on the build machine first"
    failures=$((failures + 1))
    finish
  fi
  local prepared_at
  prepared_at=$(cat "$bundle/prepared-at.txt")
  if [[ $prepared_at != "$bundle" && ! -e $prepared_at ]]; then
    mkdir -p "$(dirname "$prepared_at")" && ln -s "$bundle" "$prepared_at" ||
      note "cannot link $prepared_at to $bundle: the executables will not find their weights"
  fi
  export LD_LIBRARY_PATH="$bundle/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # cuBLAS (loaded at run time, so ldd does not show it) where the CUDA
  # toolkit is neither under /usr/local/cuda nor known to the loader (e.g. a wheel).
  if [[ ! -e /usr/local/cuda/lib64/libcublas.so.13 && ! -e /usr/local/cuda/lib/libcublas.so.13 ]] &&
    ! ldconfig -p 2>/dev/null | grep -q 'libcublas\.so\.13'; then
    local cublas
    cublas=$(find / -xdev -name 'libcublas.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)
    [[ -n $cublas ]] && LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$cublas")"
  fi
  if ldd "$bundle"/bin/* | grep 'not found' | sort -u >"$logs/missing-libraries.log"; then
    note "missing libraries: $(awk '{print $1}' "$logs/missing-libraries.log" | tr '\n' ' ')"
  fi
  export KVJIT_CUDA_TEST_KVX_DIR=$bundle/kvx
  export KVJIT_TEST_DATA_DIR=$root/tests/data
  export KVJIT_SHARED_DIR=$bundle

  local test
  for test in kvjit_runner_factory_test kvjit_cuda_host_test kvjit_cuda_gpu_test; do
    if [[ -x $bundle/bin/$test ]]; then
      stage "$test" 180 "$bundle/bin/$test" --gtest_output="xml:$logs/$test.xml"
      # The counts, and the name of every failed or skipped test.
      grep -E '^\[  (PASSED|FAILED|SKIPPED) +\] [0-9]+ tests?' "$logs/$test.log" |
        sed 's/^/    /' | tee -a "$summary"
      grep -E '^\[  (FAILED|SKIPPED) +\] [A-Za-z]' "$logs/$test.log" | sed 's/ (.*//' |
        sort -u | sed 's/^/    /' | tee -a "$summary"
      # On the GPU machine, a GPU test that skips did not check anything:
      # each one that skips fails the check, as does a run of none.
      if [[ $test == kvjit_cuda_gpu_test ]]; then
        if grep -q '^\[  SKIPPED \] [0-9]' "$logs/$test.log"; then
          note "    GPU tests skipped on the GPU machine: see the reasons in $test.log"
          failures=$((failures + 1))
        elif ! grep -q '^\[  PASSED  \] [1-9]' "$logs/$test.log"; then
          note "    no GPU test ran: see $test.log"
          failures=$((failures + 1))
        fi
      fi
    else
      note "$test: not in the bundle"
      failures=$((failures + 1))
    fi
  done

  # stories260K split over 2 GPUs (kvjit compile --tp 2 --target cuda, NCCL
  # between them): its greedy text must be the CPU split's. Needs 2 GPUs,
  # mpirun and libnccl.so.2 (KVJIT_NCCL_LIBRARY, docs/scale-out-nccl.md).
  local gpus tp_prompt="Once upon a time"
  gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
  if ((gpus < 2)); then
    note "tensor parallelism on GPUs: not checked ($gpus GPU(s); it needs 2)"
  elif ! command -v mpirun >/dev/null; then
    note "tensor parallelism on GPUs: not checked (no mpirun)"; failures=$((failures + 1))
  elif [[ ! -x $bundle/bin/kvjit || ! -f $bundle/kvx/stories260K-tp2-cuda.kvx ]]; then
    note "tensor parallelism on GPUs: kvjit or the --tp 2 executables are not in the bundle"
    failures=$((failures + 1))
  # The generated text alone (stdout) is compared, not the progress.
  elif stage tp2-cpu 120 bash -c '"$@" >"$0"' "$logs/tp2-cpu.txt" \
      mpirun --allow-run-as-root --oversubscribe -np 2 "$bundle/bin/kvjit" run \
      "$bundle/kvx/stories260K-tp2-cpu.kvx" -p "$tp_prompt" -n 40 --temperature 0 --device cpu &&
    stage tp2-cuda 120 bash -c '"$@" >"$0"' "$logs/tp2-cuda.txt" \
      mpirun --allow-run-as-root -np 2 "$bundle/bin/kvjit" run \
      "$bundle/kvx/stories260K-tp2-cuda.kvx" -p "$tp_prompt" -n 40 --temperature 0 --device cuda; then
    if diff "$logs/tp2-cpu.txt" "$logs/tp2-cuda.txt" >"$logs/tp2-diff.log"; then
      note "tensor parallelism on 2 GPUs (NCCL): the greedy text equals the CPU split's"
    else
      note "tensor parallelism on 2 GPUs (NCCL): the text differs from the CPU split's (tp2-diff.log)"
      failures=$((failures + 1))
    fi
  fi

  # bench NAME KVX: benchmarks KVX with CUDA graphs and launch by launch.
  local bench=$bundle/bin/kvjit-cuda-bench name kvx
  : >"$out/bench.jsonl"
  for kvx in "$bundle/kvx/stories260K-bench.kvx" "$bundle/kvx/SmolLM2-cuda.kvx"; do
    name=$(basename "$kvx" .kvx)
    [[ -f $kvx ]] || { note "$name: not in the bundle; not benchmarked"; continue; }
    if [[ -f ${kvx%.kvx}.weights && ! -f $(cat "${kvx%.kvx}.weights") ]]; then
      note "$name: its weights $(cat "${kvx%.kvx}.weights") are not on this machine; not benchmarked"
      continue
    fi
    if stage "bench-$name" 120 "$bench" "$kvx" --batch 1,64 --prompt_tokens 128 \
      --gen_tokens 64; then
      grep '^{' "$logs/bench-$name.log" >>"$out/bench.jsonl"
      grep -v '^{' "$logs/bench-$name.log" | sed 's/^/    /' | tee -a "$summary"
    fi
    if stage "bench-$name-no-graphs" 90 "$bench" "$kvx" --batch 1,64 --prompt_tokens 128 \
      --gen_tokens 64 --largest_graph_batch 0; then
      grep '^{' "$logs/bench-$name-no-graphs.log" >>"$out/bench.jsonl"
      grep -v '^{' "$logs/bench-$name-no-graphs.log" | sed 's/^/    /' | tee -a "$summary"
    fi
  done
  finish
}

"$mode"
