#ifndef KVJIT_RUNTIME_CPU_MATMUL_H_
#define KVJIT_RUNTIME_CPU_MATMUL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/cpu/CpuIsa.h"
#include "runtime/cpu/CpuNumerics.h"
#include "runtime/cpu/ThreadPool.h"
#include "runtime/quant/StorageType.h"

namespace kvjit::cpu {

// A weight matrix: `rows` output features, each a row of `cols` input
// features encoded as `type` (ggml's block layouts). With rows_interleaved 1
// the rows lie back to back, as a GGUF file stores them; with 8, in kvx's
// RowsInterleaved8 layout (runtime/schema/WeightLayout.h: each group of 8
// rows' blocks column by column), for the 32-element block types. The bytes
// are read in place (typically memory-mapped).
struct WeightView {
  quant::StorageType type = quant::StorageType::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  absl::Span<const uint8_t> bytes;
  int64_t rows_interleaved = 1;
};

// The bytes of one of w's rows, where w is a matrix the kernels can read:
// non-negative dimensions, whole blocks of its type per row, rows interleaved
// by 1 or (32-element block types, a multiple of 8 rows) 8, and exactly the
// bytes that shape takes. Errors are InvalidArgument, naming `kernel`.
absl::StatusOr<uint64_t> CheckWeight(absl::string_view kernel, const WeightView& w);

// y[t, o] = sum_i w[o, i] * x[t, i] for t < tokens: x is [tokens, w.cols]
// and y [tokens, w.rows], both row-major f32.
//
// Numerics follow llama.cpp's CPU backend, so that greedy decoding can match
// it token for token:
//  - Quantized weights are multiplied against activations quantized per row
//    the way ggml quantizes the right-hand side of each vec_dot: Q8_0 blocks
//    for Q8_0 / Q4_0 / Q5_0 weights, Q8_1 blocks (with the d * sum(q) term)
//    for Q4_1 / Q5_1, Q8_K super-blocks for Q4_K / Q5_K / Q6_K. Q8_0 / Q8_1
//    use ggml's x86 scheme (d = amax / 127 stored as f16, q = round-to-even of
//    x * 127 / amax); Q8_K uses ggml's (scale -127 / max of the largest
//    magnitude, f32 d). Block products are the integer formulas of ggml's
//    vec_dot functions, exact in int32.
//  - F16 / BF16 weights: activations are rounded to f16 / bf16 first (ggml's
//    vec_dot_type) and products accumulate in f32 by FMA.
//  - F32 weights: f32 FMA accumulation.
// The float accumulation order is kvjit's own (see DotKernels.h); it differs
// from ggml's only in the rounding of float sums (relative ~1e-7).
//
// Each y[t, o] is computed by one thread in an order fixed by the weight
// type and w.cols alone: results are bitwise identical for any thread count
// and any number or mix of other tokens in the batch (batch invariance).
// Every ISA gives the same bits, as do the register-blocked GEMMs that take
// steps of three or more tokens under AVX-512 VNNI (BlockGemm.h: every
// weight type), and
// so does every layout: an interleaved weight's results are its GGUF rows'.
// Errors (InvalidArgument) for a null pointer, negative tokens, cols not a
// whole number of blocks, a byte count that does not match rows x cols, or
// an interleaving other than 1 or 8, of a type without 32-element blocks or
// of rows not a multiple of 8; FailedPrecondition for an ISA this CPU lacks.
// The first form runs BestCpuIsa() under ProcessCpuNumerics(); the second
// `isa` under CpuNumerics::kBatchInvariant.
absl::Status MatMul(const WeightView& w, const float* x, int64_t tokens, float* y, ThreadPool& pool);
absl::Status MatMul(const WeightView& w, const float* x, int64_t tokens, float* y, ThreadPool& pool, CpuIsa isa);
// The same under `numerics`: CpuNumerics::kFast lets AVX-512 VNNI's K-quant
// kernels (single rows and GEMMs alike) group their float sums by sub-block,
// so their bits are not llama.cpp's unrepacked ones (CpuNumerics.h);
// everything else above holds, batch invariance included.
absl::Status MatMul(const WeightView& w, const float* x, int64_t tokens, float* y, ThreadPool& pool, CpuIsa isa,
                    CpuNumerics numerics);

// The oracle for tests: each weight row dequantized to f32 (bit for bit as
// ggml dequantizes), multiplied by the unquantized activations, accumulated
// in double. Single-threaded and slow.
absl::Status MatMulF32Reference(const WeightView& w, const float* x, int64_t tokens, float* y);

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_MATMUL_H_
