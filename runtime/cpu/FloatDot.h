#ifndef KVJIT_RUNTIME_CPU_FLOATDOT_H_
#define KVJIT_RUNTIME_CPU_FLOATDOT_H_

// The f32 row operations of PagedAttention's f32 KV cache path: scores as dot
// products of the query with each cached key, outputs as the weighted sum of
// the cached values. Each is written out with a fixed order of separate
// multiplies and adds (no FMA), so the portable, AVX2 and AVX-512 forms
// return the same bits, and so does every thread count.

#include <cstdint>

namespace kvjit::cpu {

// out[r] = scale * dot(row r of x, y) over n elements, for r < rows; row r of
// x is n f32 values at x + r * row_bytes. The dot product's order: element i
// goes to lane i % 8 of one 8-lane accumulator (product, then sum), the
// lanes are folded by DotKernels.h's LaneSum, and the n % 8 products after
// the last full group of eight are added to that, in order.
void FloatDotRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t n, float scale,
                  float* out);

// acc[i] = acc[i] + a[r] * x[r][i] for r < rows in row order and i < n (the
// product rounded, then the sum): the weighted sum of value rows, each
// element of acc accumulated in key order.
void FloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t n, float* acc);

namespace internal {
// The implementations behind FloatDotRows and FloatAxpyRows, for tests.
struct FloatDotKernels {
  void (*dot_rows)(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t n, float scale,
                   float* out);
  void (*axpy_rows)(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t n, float* acc);
};
const FloatDotKernels& PortableFloatDotKernels();
// Null where this build or CPU has no AVX2.
const FloatDotKernels* Avx2FloatDotKernels();
// Dot rows eight at a time and an axpy holding its sums in 16-lane
// registers; null unless the ISA chosen (BestCpuIsa) is AVX-512 VNNI.
const FloatDotKernels* Avx512FloatDotKernels();
}  // namespace internal

}  // namespace kvjit::cpu

#endif  // KVJIT_RUNTIME_CPU_FLOATDOT_H_
