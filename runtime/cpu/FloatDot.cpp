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

void PortableFloatDotRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t queries,
                          int64_t n, float scale, float* out, int64_t out_stride) {
  for (int64_t q = 0; q < queries; ++q) {
    for (int64_t r = 0; r < rows; ++r) out[q * out_stride + r] = scale * PortableDot(x + r * row_bytes, y + q * n, n);
  }
}

void PortableFloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t a_stride,
                           int64_t queries, int64_t n, float* acc) {
  for (int64_t q = 0; q < queries; ++q) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < n; ++i) {
        acc[q * n + i] = acc[q * n + i] + a[q * a_stride + r] * LoadFloat(x + r * row_bytes, i);
      }
    }
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
                                                      const float* y, int64_t queries, int64_t n, float scale,
                                                      float* out, int64_t out_stride) {
  for (int64_t q = 0; q < queries; ++q) {
    for (int64_t r = 0; r < rows; ++r) out[q * out_stride + r] = scale * Avx2Dot(x + r * row_bytes, y + q * n, n);
  }
}

__attribute__((target("avx2"))) void Avx2AxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a,
                                                  int64_t n, float* acc) {
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

__attribute__((target("avx2"))) void Avx2FloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows,
                                                       const float* a, int64_t a_stride, int64_t queries, int64_t n,
                                                       float* acc) {
  for (int64_t q = 0; q < queries; ++q) Avx2AxpyRows(x, row_bytes, rows, a + q * a_stride, n, acc + q * n);
}

// LaneSum's order for eight rows' accumulators at once: each row's halves
// are added (lane l + lane l + 4, two rows per register), a 4 x 4 transpose
// within each 128-bit half puts the same partial sum of four rows in one
// register, and (p0 + p2) + (p1 + p3) finishes all eight; row r's sum lands
// in lane r.
__attribute__((target("avx512f,avx512vl,avx2"), always_inline)) inline __m256 FoldEightRows(const __m256 lanes[8]) {
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
  return _mm256_permutevar8x32_ps(interleaved, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Eight rows against kQueries queries: 8 x kQueries independent chains of
// adds, each row-and-query's eight adds a single chain in its own EVEX
// register (24 of the 32 for three queries), each key register loaded once
// for every query and each query's register once for the eight rows.
template <int kQueries>
__attribute__((target("avx512f,avx512vl,avx2"))) void Avx512DotEightRows(const uint8_t* x, int64_t row_bytes,
                                                                          const float* y, int64_t n, float scale,
                                                                          float* out, int64_t out_stride) {
  __m256 lanes[kQueries][8];
#pragma GCC unroll 3
  for (int q = 0; q < kQueries; ++q) {
#pragma GCC unroll 8
    for (__m256& accumulator : lanes[q]) accumulator = _mm256_setzero_ps();
  }
  const int64_t full = n / 8 * 8;
  for (int64_t i = 0; i < full; i += 8) {
    __m256 query[kQueries];
#pragma GCC unroll 3
    for (int q = 0; q < kQueries; ++q) query[q] = _mm256_loadu_ps(y + q * n + i);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      const __m256 key = _mm256_loadu_ps(reinterpret_cast<const float*>(x + r * row_bytes + 4 * i));
#pragma GCC unroll 3
      for (int q = 0; q < kQueries; ++q) lanes[q][r] = _mm256_add_ps(lanes[q][r], _mm256_mul_ps(key, query[q]));
    }
  }
  // Unrolled, so that no accumulator's address is taken and all stay in
  // registers through the loop above.
#pragma GCC unroll 3
  for (int q = 0; q < kQueries; ++q) {
    __m256 sums = FoldEightRows(lanes[q]);
    if (full < n) {
      alignas(32) float row_sums[8];
      _mm256_store_ps(row_sums, sums);
      for (int r = 0; r < 8; ++r) {
        for (int64_t i = full; i < n; ++i) row_sums[r] = row_sums[r] + LoadFloat(x + r * row_bytes, i) * y[q * n + i];
      }
      sums = _mm256_load_ps(row_sums);
    }
    _mm256_storeu_ps(out + q * out_stride, _mm256_mul_ps(_mm256_set1_ps(scale), sums));
  }
}

template <int kQueries>
__attribute__((target("avx512f,avx512vl,avx2"))) void Avx512DotRows(const uint8_t* x, int64_t row_bytes,
                                                                     int64_t rows, const float* y, int64_t n,
                                                                     float scale, float* out, int64_t out_stride) {
  int64_t r = 0;
  for (; r + 8 <= rows; r += 8) {
    Avx512DotEightRows<kQueries>(x + r * row_bytes, row_bytes, y, n, scale, out + r, out_stride);
  }
  for (; r < rows; ++r) {
    for (int q = 0; q < kQueries; ++q) out[q * out_stride + r] = scale * Avx2Dot(x + r * row_bytes, y + q * n, n);
  }
}

// Up to three queries per pass over the rows, the most whose accumulators
// fit the registers.
__attribute__((target("avx512f,avx512vl,avx2"))) void Avx512FloatDotRows(const uint8_t* x, int64_t row_bytes,
                                                                          int64_t rows, const float* y,
                                                                          int64_t queries, int64_t n, float scale,
                                                                          float* out, int64_t out_stride) {
  for (int64_t q = 0; q < queries; q += 3) {
    const float* query = y + q * n;
    float* query_out = out + q * out_stride;
    switch (std::min<int64_t>(3, queries - q)) {
      case 1: Avx512DotRows<1>(x, row_bytes, rows, query, n, scale, query_out, out_stride); break;
      case 2: Avx512DotRows<2>(x, row_bytes, rows, query, n, scale, query_out, out_stride); break;
      default: Avx512DotRows<3>(x, row_bytes, rows, query, n, scale, query_out, out_stride); break;
    }
  }
}

// The axpy is element-wise, so 16 lanes compute what 8 do. Up to 64
// elements of each query's acc stay in four registers across all the rows
// (masked where fewer remain), so each element's sum runs from row to row in
// a register, not through memory, and each row's registers are loaded once
// for every query.
template <int kQueries>
__attribute__((target("avx512f,avx2"))) void Avx512AxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows,
                                                             const float* a, int64_t a_stride, int64_t n,
                                                             float* acc) {
  constexpr int kRegisters = 4;
  for (int64_t i = 0; i < n; i += 16 * kRegisters) {
    __mmask16 masks[kRegisters];
    __m512 sums[kQueries][kRegisters];
#pragma GCC unroll 4
    for (int k = 0; k < kRegisters; ++k) {
      const int64_t remaining = std::clamp<int64_t>(n - i - 16 * k, 0, 16);
      masks[k] = static_cast<__mmask16>((1u << remaining) - 1u);
#pragma GCC unroll 3
      for (int q = 0; q < kQueries; ++q) sums[q][k] = _mm512_maskz_loadu_ps(masks[k], acc + q * n + i + 16 * k);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = reinterpret_cast<const float*>(x + r * row_bytes) + i;
      __m512 factor[kQueries];
#pragma GCC unroll 3
      for (int q = 0; q < kQueries; ++q) factor[q] = _mm512_set1_ps(a[q * a_stride + r]);
#pragma GCC unroll 4
      for (int k = 0; k < kRegisters; ++k) {
        const __m512 value = _mm512_maskz_loadu_ps(masks[k], row + 16 * k);
#pragma GCC unroll 3
        for (int q = 0; q < kQueries; ++q) {
          sums[q][k] = _mm512_add_ps(sums[q][k], _mm512_mul_ps(factor[q], value));
        }
      }
    }
#pragma GCC unroll 4
    for (int k = 0; k < kRegisters; ++k) {
#pragma GCC unroll 3
      for (int q = 0; q < kQueries; ++q) _mm512_mask_storeu_ps(acc + q * n + i + 16 * k, masks[k], sums[q][k]);
    }
  }
}

__attribute__((target("avx512f,avx2"))) void Avx512FloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows,
                                                                  const float* a, int64_t a_stride, int64_t queries,
                                                                  int64_t n, float* acc) {
  for (int64_t q = 0; q < queries; q += 3) {
    const float* weights = a + q * a_stride;
    float* sums = acc + q * n;
    switch (std::min<int64_t>(3, queries - q)) {
      case 1: Avx512AxpyRows<1>(x, row_bytes, rows, weights, a_stride, n, sums); break;
      case 2: Avx512AxpyRows<2>(x, row_bytes, rows, weights, a_stride, n, sums); break;
      default: Avx512AxpyRows<3>(x, row_bytes, rows, weights, a_stride, n, sums); break;
    }
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

void FloatDotRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t queries, int64_t n,
                  float scale, float* out, int64_t out_stride) {
  Kernels().dot_rows(x, row_bytes, rows, y, queries, n, scale, out, out_stride);
}

void FloatAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t a_stride,
                   int64_t queries, int64_t n, float* acc) {
  Kernels().axpy_rows(x, row_bytes, rows, a, a_stride, queries, n, acc);
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
