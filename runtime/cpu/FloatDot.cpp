#include "runtime/cpu/FloatDot.h"

#include <cstring>

#include "runtime/cpu/CpuIsa.h"
#include "runtime/cpu/DotKernels.h"

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
#include <immintrin.h>
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

namespace kvjit::cpu {
namespace {

// Cached rows sit at their slot's stride in the pool, which keeps them
// 4-byte aligned; memcpy says so to the compiler without an aliasing cast.
float LoadFloat(const uint8_t* row, int64_t i) {
  float value;
  std::memcpy(&value, row + 4 * i, sizeof value);
  return value;
}

float PortableDot(const uint8_t* x, const float* y, int64_t n) {
  float lanes[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; ++l) lanes[l] = lanes[l] + LoadFloat(x, i + l) * y[i + l];
  }
  float sum = internal::LaneSum(lanes);
  for (; i < n; ++i) sum = sum + LoadFloat(x, i) * y[i];
  return sum;
}

void PortableFloatDotRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t n, float scale,
                          float* out) {
  for (int64_t r = 0; r < rows; ++r) out[r] = scale * PortableDot(x + r * row_bytes, y, n);
}

void PortableFloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t n, float* acc) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) acc[i] = acc[i] + a[r] * LoadFloat(x + r * row_bytes, i);
  }
}

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
// LaneSum's order on a register: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)).
__attribute__((target("avx2"))) float Avx2LaneSum(__m256 v) {
  const __m128 halves = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

__attribute__((target("avx2"))) float Avx2Dot(const uint8_t* x, const float* y, int64_t n) {
  __m256 lanes = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 row = _mm256_loadu_ps(reinterpret_cast<const float*>(x + 4 * i));
    lanes = _mm256_add_ps(lanes, _mm256_mul_ps(row, _mm256_loadu_ps(y + i)));
  }
  float sum = Avx2LaneSum(lanes);
  for (; i < n; ++i) sum = sum + LoadFloat(x, i) * y[i];
  return sum;
}

__attribute__((target("avx2"))) void Avx2FloatDotRows(const uint8_t* x, int64_t row_bytes, int64_t rows,
                                                      const float* y, int64_t n, float scale, float* out) {
  for (int64_t r = 0; r < rows; ++r) out[r] = scale * Avx2Dot(x + r * row_bytes, y, n);
}

__attribute__((target("avx2"))) void Avx2FloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows,
                                                       const float* a, int64_t n, float* acc) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = x + r * row_bytes;
    const __m256 factor = _mm256_set1_ps(a[r]);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 product = _mm256_mul_ps(factor, _mm256_loadu_ps(reinterpret_cast<const float*>(row + 4 * i)));
      _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), product));
    }
    for (; i < n; ++i) acc[i] = acc[i] + a[r] * LoadFloat(row, i);
  }
}

// The axpy is element-wise, so 16 lanes compute what 8 do. The dot product
// stays AVX2: its order has eight lanes, and a 16-lane product would still
// need two 8-lane additions per register.
__attribute__((target("avx512f,avx2"))) void Avx512FloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows,
                                                                  const float* a, int64_t n, float* acc) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = x + r * row_bytes;
    const __m512 factor = _mm512_set1_ps(a[r]);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512 product = _mm512_mul_ps(factor, _mm512_loadu_ps(reinterpret_cast<const float*>(row + 4 * i)));
      _mm512_storeu_ps(acc + i, _mm512_add_ps(_mm512_loadu_ps(acc + i), product));
    }
    for (; i < n; ++i) acc[i] = acc[i] + a[r] * LoadFloat(row, i);
  }
}
#endif

const internal::FloatDotKernels& Kernels() {
  static const internal::FloatDotKernels& kernels =
      internal::Avx512FloatDotKernels() != nullptr ? *internal::Avx512FloatDotKernels()
      : internal::Avx2FloatDotKernels() != nullptr ? *internal::Avx2FloatDotKernels()
                                                   : internal::PortableFloatDotKernels();
  return kernels;
}

}  // namespace

void FloatDotRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t n, float scale,
                  float* out) {
  Kernels().dot_rows(x, row_bytes, rows, y, n, scale, out);
}

void FloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t n, float* acc) {
  Kernels().axpy_rows(x, row_bytes, rows, a, n, acc);
}

namespace internal {

const FloatDotKernels& PortableFloatDotKernels() {
  static constexpr FloatDotKernels kKernels = {PortableFloatDotRows, PortableFloatAxpyRows};
  return kKernels;
}

const FloatDotKernels* Avx2FloatDotKernels() {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  static constexpr FloatDotKernels kKernels = {Avx2FloatDotRows, Avx2FloatAxpyRows};
  if (CpuSupports(CpuIsa::kAvx2)) return &kKernels;
#endif
  return nullptr;
}

const FloatDotKernels* Avx512FloatDotKernels() {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  static constexpr FloatDotKernels kKernels = {Avx2FloatDotRows, Avx512FloatAxpyRows};
  if (BestCpuIsa() == CpuIsa::kAvx512Vnni) return &kKernels;
#endif
  return nullptr;
}

}  // namespace internal
}  // namespace kvjit::cpu
