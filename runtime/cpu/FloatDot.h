#ifndef KVJIT_RUNTIME_CPU_FLOATDOT_H_
#define KVJIT_RUNTIME_CPU_FLOATDOT_H_

// The f32 row operations of PagedAttention's f32 KV cache path: scores as dot
// products of the query with each cached key, outputs as the weighted sum of
// the cached values. Each is written out with a fixed order of separate
// multiplies and adds (no FMA), so the portable, AVX2 and AVX-512 forms
// return the same bits, and so does every thread count.

#include <cstdint>

namespace kvjit::cpu {

// out[q * out_stride + r] = scale * dot(row r of x, query q) over n elements,
// for q < queries and r < rows; row r of x is n f32 values at x + r *
// row_bytes, query q n values at y + q * n (the query heads that share one
// kv head, side by side, read each cached key once). The dot product's
// order: element i goes to lane i % 8 of one 8-lane accumulator (product,
// then sum), the lanes are folded by DotKernels.h's LaneSum, and the n % 8
// products after the last full group of eight are added to that, in order;
// each query's results are the bits it would get alone.
void FloatDotRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t queries, int64_t n,
                  float scale, float* out, int64_t out_stride);

// acc[q * n + i] = acc[q * n + i] + a[q * a_stride + r] * x[r][i] for r < rows
// in row order, i < n and q < queries (the product rounded, then the sum):
// the weighted sums of value rows of several query heads, each element
// accumulated in key order.
void FloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t a_stride,
                   int64_t queries, int64_t n, float* acc);

namespace internal {
// The implementations behind FloatDotRows and FloatAxpyRows, for tests.
struct FloatDotKernels {
  void (*dot_rows)(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t queries, int64_t n,
                   float scale, float* out, int64_t out_stride);
  void (*axpy_rows)(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t a_stride,
                    int64_t queries, int64_t n, float* acc);
};
const FloatDotKernels& PortableFloatDotKernels();
// Null where this build or CPU has no AVX2.
const FloatDotKernels* Avx2FloatDotKernels();
// Dot rows eight at a time and an axpy holding its sums in 16-lane
// registers, up to three queries per pass over the rows; null unless the ISA
// chosen (BestCpuIsa) is AVX-512 VNNI.
const FloatDotKernels* Avx512FloatDotKernels();
}  // namespace internal

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_FLOATDOT_H_
