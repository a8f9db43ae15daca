#ifndef KVJIT_RUNTIME_CPU_CPUNUMERICS_H_
#define KVJIT_RUNTIME_CPU_CPUNUMERICS_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvjit::cpu {

// How the CPU matrix kernels may order their sums (docs/numerics.md). Both
// are batch invariant: a token's results never depend on the other tokens
// of its step, the thread count or the step's size.
enum class CpuNumerics {
  // llama.cpp's unrepacked vec_dot arithmetic at every batch size, thread
  // count and ISA, so that greedy text matches llama.cpp's AVX2 build where
  // the tests say so.
  kBatchInvariant,
  // Under AVX-512 VNNI, K-quant weights (Q4_K, Q5_K, Q6_K) are multiplied
  // summing each sub-block's products as one integer before its scale, and
  // the scaled sums as one integer per super-block before one float
  // multiply-add, as llama.cpp's repacked Q4_K GEMV does (its GEMM takes
  // one per 64 elements; docs/numerics.md): the same integers,
  // fewer float roundings, and about 1.5x the GEMM's speed (prefill, batched
  // decode). The 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) sum
  // each block's products as one integer before one float multiply-add per
  // block, eight blocks to a register: about twice the GEMM's speed. Under
  // AVX-512 BF16, bf16 weights (rows of a multiple of 32 columns) are
  // multiplied by vdpbf16ps, twice the f32 FMA's products per instruction.
  // Every other weight type and ISA computes kBatchInvariant's bits.
  kFast,
};

absl::string_view CpuNumericsName(CpuNumerics numerics);

// "batch-invariant" or "fast"; InvalidArgument naming the choices otherwise.
absl::StatusOr<CpuNumerics> ParseCpuNumerics(absl::string_view name);

// What the step kernels use in this process: $KVJIT_CPU_NUMERICS
// ("batch-invariant", the default, or "fast"), read once; another value is
// reported on stderr and ignored, as $KVJIT_CPU_ISA's are.
CpuNumerics ProcessCpuNumerics();

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_CPUNUMERICS_H_
