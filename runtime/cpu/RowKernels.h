#ifndef KVJIT_RUNTIME_CPU_ROWKERNELS_H_
#define KVJIT_RUNTIME_CPU_ROWKERNELS_H_

// Row-wise and element-wise kernels on f32 activations. Matrices are
// row-major; `out` may alias the input it replaces element for element (not
// for Softmax's or GatherRows' other rows). Arithmetic follows llama.cpp's
// scalar definitions (sums of squares and softmax denominators in double,
// everything else f32). SiLU's exp is FastExp, ggml's vectorized exp, so that
// SwiGlu matches llama.cpp bit for bit for widths that are multiples of 8
// (ggml takes the C library's expf for the last width % 8 elements of a row,
// kvjit FastExp throughout); Softmax's
// is the C library's expf (ggml's AVX2 build uses FastExp's there too; they
// agree to ~1 ulp).
// Rows are split across the pool's threads; no result depends on how.
// Errors are InvalidArgument naming the kernel and the sizes.

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/cpu/MatMul.h"
#include "runtime/cpu/ThreadPool.h"

namespace kvjit::cpu {

// out[r, :] = x[r, :] * (1 / sqrt(mean(x[r, :]^2) + eps)) * weight[:], in
// that order of f32 operations (the mean in double, as ggml's rms_norm).
absl::Status RmsNorm(const float* x, const float* weight, float eps, int64_t rows, int64_t width, float* out,
                     ThreadPool& pool);

// The residual stream's add and norm in one pass: residual += delta (the sum
// is written back), normed_out = RmsNorm(residual).
absl::Status AddRmsNorm(float* residual, const float* delta, const float* weight, float eps, int64_t rows,
                        int64_t width, float* normed_out, ThreadPool& pool);

// out = silu(gate) * up, silu(v) = v / (1 + FastExp(-v)).
absl::Status SwiGlu(const float* gate, const float* up, float* out, int64_t n, ThreadPool& pool);
// SwiGlu over `rows` rows of `width`, gate's and up's rows `gate_stride` and
// `up_stride` floats apart (column views of wider rows), out's dense; the
// same values as SwiGlu on dense rows.
absl::Status SwiGluRows(const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
                        float* out, int64_t rows, int64_t width, ThreadPool& pool);
absl::Status Silu(const float* x, float* out, int64_t n, ThreadPool& pool);
// GELU in its tanh form, 0.5 x (1 + tanh(u)) with u = sqrt(2/pi) x (1 +
// 0.044715 x^2), computed as x / (1 + FastExp(-2u)) in f32: within 2e-6 of
// the value in double, relative to |x|, the same bits on every ISA and
// thread count.
absl::Status GeluTanh(const float* x, float* out, int64_t n, ThreadPool& pool);
// tanh(x) in f32 over the thread pool (Gemma 2's soft-capping of attention
// scores and of the final logits, a vocabulary wide): (1 - e) / (1 + e) with
// e = FastExp(-2|x|), its sign restored, and below |x| = 0.1, where that
// form loses digits to cancellation, x (1 - x^2/3 + 2x^4/15 - 17x^6/315).
// Within 1e-6 of the value in double, relative to it (±1 at ±infinity, NaN
// for NaN); the same bits on every ISA and thread count.
absl::Status Tanh(const float* x, float* out, int64_t n, ThreadPool& pool);
absl::Status Add(const float* a, const float* b, float* out, int64_t n, ThreadPool& pool);
absl::Status Mul(const float* a, const float* b, float* out, int64_t n, ThreadPool& pool);
absl::Status Scale(const float* x, float factor, float* out, int64_t n, ThreadPool& pool);

// Row-wise softmax: exp(x - max) / sum, the sum in double.
absl::Status Softmax(const float* x, int64_t rows, int64_t width, float* out, ThreadPool& pool);

// out[i, :] = table row token_ids[i], dequantized (bit for bit as ggml's
// get_rows); only the selected rows are read, in either of MatMul.h's
// layouts (a tied table is also the output projection's weight, which the
// compiler may interleave). Ids outside [0, table.rows) are an OutOfRange
// error, a table the kernels cannot read (CheckWeight) InvalidArgument.
absl::Status EmbeddingLookup(const WeightView& table, const int32_t* token_ids, int64_t count, float* out,
                             ThreadPool& pool);

// out[i, :] = src[indices[i], :] (e.g. the rows that produce logits).
absl::Status GatherRows(const float* src, int64_t src_rows, int64_t width, const int32_t* indices, int64_t count,
                        float* out, ThreadPool& pool);

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_ROWKERNELS_H_
