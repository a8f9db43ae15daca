#include "runtime/cpu/FloatDot.h"

#include <algorithm>
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

// Eight rows at a time: eight independent chains of adds where one row's
// eight adds form a single chain, each 8-lane accumulator in its own EVEX
// register, and the query's register loaded once for the eight. The folds
// then run side by side: each row's halves are added (lane l + lane l + 4,
// two rows per register), a 4 x 4 transpose within each 128-bit half puts
// the same partial sum of four rows in one register, and
// (p0 + p2) + (p1 + p3) is LaneSum's order for all eight rows at once.
__attribute__((target("avx512f,avx512vl,avx2"))) void Avx512DotEightRows(const uint8_t* x, int64_t row_bytes,
                                                                          const float* y, int64_t n, float scale,
                                                                          float* out) {
  __m256 lanes[8];
  for (__m256& accumulator : lanes) accumulator = _mm256_setzero_ps();
  const int64_t full = n / 8 * 8;
  for (int64_t i = 0; i < full; i += 8) {
    const __m256 query = _mm256_loadu_ps(y + i);
    for (int r = 0; r < 8; ++r) {
      const __m256 key = _mm256_loadu_ps(reinterpret_cast<const float*>(x + r * row_bytes + 4 * i));
      lanes[r] = _mm256_add_ps(lanes[r], _mm256_mul_ps(key, query));
    }
  }
  __m256 halves[4];
  for (int p = 0; p < 4; ++p) {
    const __m256 low = _mm256_permute2f128_ps(lanes[2 * p], lanes[2 * p + 1], 0x20);
    const __m256 high = _mm256_permute2f128_ps(lanes[2 * p], lanes[2 * p + 1], 0x31);
    halves[p] = _mm256_add_ps(low, high);  // rows 2p and 2p + 1: l + (l + 4) for l < 4
  }
  const __m256 t0 = _mm256_unpacklo_ps(halves[0], halves[1]);
  const __m256 t1 = _mm256_unpackhi_ps(halves[0], halves[1]);
  const __m256 t2 = _mm256_unpacklo_ps(halves[2], halves[3]);
  const __m256 t3 = _mm256_unpackhi_ps(halves[2], halves[3]);
  const __m256 p0 = _mm256_shuffle_ps(t0, t2, 0x44);
  const __m256 p1 = _mm256_shuffle_ps(t0, t2, 0xee);
  const __m256 p2 = _mm256_shuffle_ps(t1, t3, 0x44);
  const __m256 p3 = _mm256_shuffle_ps(t1, t3, 0xee);
  // Rows 0, 2, 4, 6 in the low half, 1, 3, 5, 7 in the high half.
  const __m256 interleaved = _mm256_add_ps(_mm256_add_ps(p0, p2), _mm256_add_ps(p1, p3));
  __m256 sums = _mm256_permutevar8x32_ps(interleaved, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  if (full < n) {
    alignas(32) float row_sums[8];
    _mm256_store_ps(row_sums, sums);
    for (int r = 0; r < 8; ++r) {
      for (int64_t i = full; i < n; ++i) row_sums[r] = row_sums[r] + LoadFloat(x + r * row_bytes, i) * y[i];
    }
    sums = _mm256_load_ps(row_sums);
  }
  _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_set1_ps(scale), sums));
}

__attribute__((target("avx512f,avx512vl,avx2"))) void Avx512FloatDotRows(const uint8_t* x, int64_t row_bytes,
                                                                          int64_t rows, const float* y, int64_t n,
                                                                          float scale, float* out) {
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) Avx512DotEightRows(x + r * row_bytes, row_bytes, y, n, scale, out + r);
  for (; r < rows; ++r) out[r] = scale * Avx2Dot(x + r * row_bytes, y, n);
}

// The axpy is element-wise, so 16 lanes compute what 8 do. Up to 64
// elements of acc stay in four registers across all the rows (masked where
// fewer remain), so each element's sum runs from row to row in a register,
// not through memory.
__attribute__((target("avx512f,avx2"))) void Avx512FloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows,
                                                                  const float* a, int64_t n, float* acc) {
  constexpr int kRegisters = 4;
  for (int64_t i = 0; i < n; i += 16 * kRegisters) {
    __mmask16 masks[kRegisters];
    __m512 sums[kRegisters];
    for (int k = 0; k < kRegisters; ++k) {
      const int64_t remaining = std::clamp<int64_t>(n - i - 16 * k, 0, 16);
      masks[k] = static_cast<__mmask16>((1u << remaining) - 1u);
      sums[k] = _mm512_maskz_loadu_ps(masks[k], acc + i + 16 * k);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = reinterpret_cast<const float*>(x + r * row_bytes) + i;
      const __m512 factor = _mm512_set1_ps(a[r]);
      for (int k = 0; k < kRegisters; ++k) {
        const __m512 product = _mm512_mul_ps(factor, _mm512_maskz_loadu_ps(masks[k], row + 16 * k));
        sums[k] = _mm512_add_ps(sums[k], product);
      }
    }
    for (int k = 0; k < kRegisters; ++k) _mm512_mask_storeu_ps(acc + i + 16 * k, masks[k], sums[k]);
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
  static constexpr FloatDotKernels kKernels = {Avx512FloatDotRows, Avx512FloatAxpyRows};
  if (BestCpuIsa() == CpuIsa::kAvx512Vnni) return &kKernels;
#endif
  return nullptr;
}

}  // namespace internal
}  // namespace kvjit::cpu
