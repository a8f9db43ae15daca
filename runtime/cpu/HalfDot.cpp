#include "runtime/cpu/HalfDot.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "runtime/cpu/CpuIsa.h"
#include "runtime/quant/Half.h"

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
#include <immintrin.h>
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

namespace kvjit::cpu {
namespace {

constexpr int kVecDotLanes = 32;
constexpr int kTinyBlasLanes = 8;

float LoadHalf(const uint8_t* x, int64_t i) {
  uint16_t bits;
  std::memcpy(&bits, x + 2 * i, sizeof bits);
  return quant::HalfToFloat(bits);
}

// kVecDot's tail: the n % 32 elements after the lanes, added in double to
// the folded lanes, as ggml_vec_dot_f16 does.
float AddVecDotTail(float folded, const uint8_t* x, const float* y, int64_t begin, int64_t n) {
  double sum = folded;
  for (int64_t i = begin; i < n; ++i) sum += static_cast<double>(LoadHalf(x, i) * y[i]);
  return static_cast<float>(sum);
}

HalfDotOrder EffectiveOrder(HalfDotOrder order, int64_t n) {
  return order == HalfDotOrder::kTinyBlas && n % kTinyBlasLanes != 0 ? HalfDotOrder::kVecDot : order;
}

float PortableHalfDot(HalfDotOrder order, const uint8_t* x, const float* y, int64_t n) {
  const int lanes = HalfDotLanes(order);
  float acc[kVecDotLanes] = {};
  const int64_t full = n / lanes * lanes;
  for (int64_t i = 0; i < full; ++i) acc[i % lanes] = std::fma(LoadHalf(x, i), y[i], acc[i % lanes]);
  const float folded = FoldHalfDotLanes(order, acc, 1);
  return order == HalfDotOrder::kVecDot ? AddVecDotTail(folded, x, y, full, n) : folded;
}

void PortableHalfDotRows(HalfDotOrder order, const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y,
                         int64_t n, float* out) {
  order = EffectiveOrder(order, n);
  for (int64_t r = 0; r < rows; ++r) out[r] = PortableHalfDot(order, x + r * row_bytes, y, n);
}

void PortableHalfAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t n, float* lanes,
                          int lane_count, int64_t first_element) {
  for (int64_t r = 0; r < rows; ++r) {
    float* lane = lanes + (first_element + r) % lane_count * n;
    for (int64_t i = 0; i < n; ++i) lane[i] = std::fma(LoadHalf(x + r * row_bytes, i), a[r], lane[i]);
  }
}

void PortableHalfDotRowsQueries(HalfDotOrder order, const uint8_t* x, int64_t row_bytes, int64_t rows,
                                const float* y, int64_t queries, int64_t n, float* out, int64_t out_stride) {
  for (int64_t q = 0; q < queries; ++q) PortableHalfDotRows(order, x, row_bytes, rows, y + q * n, n, out + q * out_stride);
}

void PortableHalfAxpyRowsQueries(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t a_stride,
                                 int64_t queries, int64_t n, float* lanes, int64_t lanes_stride, int lane_count,
                                 int64_t first_element) {
  for (int64_t q = 0; q < queries; ++q) {
    PortableHalfAxpyRows(x, row_bytes, rows, a + q * a_stride, n, lanes + q * lanes_stride, lane_count, first_element);
  }
}

void PortableRoundToHalfRow(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = quant::HalfToFloat(quant::FloatToHalf(x[i]));
}

void PortableStoreHalfRow(const float* x, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t bits = quant::FloatToHalf(x[i]);
    std::memcpy(out + 2 * i, &bits, sizeof bits);
  }
}

// The same additions as FoldHalfDotLanes, columns first..n-1.
void PortableFoldHalfDotLaneRows(HalfDotOrder order, const float* lanes, int64_t n, int64_t first, float* out) {
  const auto row = [&](int lane) { return lanes + lane * n; };
  if (order == HalfDotOrder::kTinyBlas) {
    for (int64_t i = first; i < n; ++i) {
      out[i] = ((row(0)[i] + row(4)[i]) + (row(2)[i] + row(6)[i])) + ((row(1)[i] + row(5)[i]) + (row(3)[i] + row(7)[i]));
    }
    return;
  }
  for (int64_t i = first; i < n; ++i) {
    float v[8];
    for (int l = 0; l < 8; ++l) v[l] = (row(l)[i] + row(16 + l)[i]) + (row(8 + l)[i] + row(24 + l)[i]);
    out[i] = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
  }
}

void PortableFoldLaneRows(HalfDotOrder order, const float* lanes, int64_t n, float* out) {
  PortableFoldHalfDotLaneRows(order, lanes, n, 0, out);
}

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
// The columns first..n-1 of one value row (the vector forms' tail), for
// every set of weights: set q's weight is a[q * a_stride], its lane row
// lanes + q * lanes_stride.
void AxpyTailColumns(const uint8_t* row, int64_t first, int64_t n, const float* a, int64_t a_stride,
                     int64_t queries, float* lanes, int64_t lanes_stride) {
  for (int64_t i = first; i < n; ++i) {
    const float value = LoadHalf(row, i);
    for (int64_t q = 0; q < queries; ++q) {
      lanes[q * lanes_stride + i] = std::fma(value, a[q * a_stride], lanes[q * lanes_stride + i]);
    }
  }
}

__attribute__((target("avx2,fma,f16c"))) __m256 LoadHalf8(const uint8_t* x) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
}

// FoldHalfDotLanes' additions on registers: lo + hi halves gives
// t_i = v_i + v_{i+4}; two horizontal adds then give (t0 + t1) + (t2 + t3)
// (kVecDot), movehl and movehdup adds (t0 + t2) + (t1 + t3) (kTinyBlas).
__attribute__((target("avx2,fma,f16c"))) float Avx2VecDotFold(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 v = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pairs = _mm_hadd_ps(t, t);
  return _mm_cvtss_f32(_mm_hadd_ps(pairs, pairs));
}

__attribute__((target("avx2,fma,f16c"))) float Avx2TinyBlasFold(__m256 v) {
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pairs = _mm_add_ps(t, _mm_movehl_ps(t, t));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

__attribute__((target("avx2,fma,f16c"))) float Avx2HalfDot(HalfDotOrder order, const uint8_t* x, const float* y,
                                                          int64_t n) {
  if (order == HalfDotOrder::kTinyBlas) {
    __m256 sum = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += kTinyBlasLanes) sum = _mm256_fmadd_ps(LoadHalf8(x + 2 * i), _mm256_loadu_ps(y + i), sum);
    return Avx2TinyBlasFold(sum);
  }
  __m256 sums[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  const int64_t full = n / kVecDotLanes * kVecDotLanes;
  for (int64_t i = 0; i < full; i += kVecDotLanes) {
    for (int j = 0; j < 4; ++j) sums[j] = _mm256_fmadd_ps(LoadHalf8(x + 2 * (i + 8 * j)), _mm256_loadu_ps(y + i + 8 * j), sums[j]);
  }
  const float folded = Avx2VecDotFold(sums[0], sums[1], sums[2], sums[3]);
  return full == n ? folded : AddVecDotTail(folded, x, y, full, n);
}

__attribute__((target("avx2,fma,f16c"))) void Avx2HalfDotRows(HalfDotOrder order, const uint8_t* x, int64_t row_bytes,
                                                             int64_t rows, const float* y, int64_t n, float* out) {
  order = EffectiveOrder(order, n);
  int64_t r = 0;
  if (order == HalfDotOrder::kTinyBlas) {
    // Four rows side by side: each row's sum is one chain of dependent FMAs,
    // so interleaving them hides the latency without changing any sum.
    for (; r + 4 <= rows; r += 4) {
      const uint8_t* row = x + r * row_bytes;
      __m256 sums[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (int64_t i = 0; i < n; i += kTinyBlasLanes) {
        const __m256 y8 = _mm256_loadu_ps(y + i);
        for (int k = 0; k < 4; ++k) sums[k] = _mm256_fmadd_ps(LoadHalf8(row + k * row_bytes + 2 * i), y8, sums[k]);
      }
      for (int k = 0; k < 4; ++k) out[r + k] = Avx2TinyBlasFold(sums[k]);
    }
  }
  for (; r < rows; ++r) out[r] = Avx2HalfDot(order, x + r * row_bytes, y, n);
}

// kKeys key rows against kQueries queries in tinyBLAS's order: kKeys x
// kQueries accumulators, each one row's and one query's chain of FMAs as
// Avx2HalfDotRows runs it, so each sum is that kernel's bits. At least eight
// chains keep the FMA units busy through each FMA's latency.
template <int kQueries, int kKeys = kQueries <= 2 ? 4 : 2>
__attribute__((target("avx2,fma,f16c"))) void Avx2TinyBlasRowsQueries(const uint8_t* x, int64_t row_bytes,
                                                                     int64_t rows, const float* y, int64_t n,
                                                                     float* out, int64_t out_stride) {
  int64_t r = 0;
  for (; r + kKeys <= rows; r += kKeys) {
    const uint8_t* row = x + r * row_bytes;
    __m256 sums[kKeys][kQueries];
    for (int k = 0; k < kKeys; ++k) {
      for (int q = 0; q < kQueries; ++q) sums[k][q] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n; i += kTinyBlasLanes) {
      __m256 keys[kKeys];
      for (int k = 0; k < kKeys; ++k) keys[k] = LoadHalf8(row + k * row_bytes + 2 * i);
      for (int q = 0; q < kQueries; ++q) {
        const __m256 y8 = _mm256_loadu_ps(y + q * n + i);
        for (int k = 0; k < kKeys; ++k) sums[k][q] = _mm256_fmadd_ps(keys[k], y8, sums[k][q]);
      }
    }
    for (int q = 0; q < kQueries; ++q) {
      for (int k = 0; k < kKeys; ++k) out[q * out_stride + r + k] = Avx2TinyBlasFold(sums[k][q]);
    }
  }
  for (; r < rows; ++r) {
    for (int q = 0; q < kQueries; ++q) out[q * out_stride + r] = Avx2HalfDot(HalfDotOrder::kTinyBlas, x + r * row_bytes, y + q * n, n);
  }
}

__attribute__((target("avx2,fma,f16c"))) void Avx2HalfDotRowsQueries(HalfDotOrder order, const uint8_t* x,
                                                                    int64_t row_bytes, int64_t rows, const float* y,
                                                                    int64_t queries, int64_t n, float* out,
                                                                    int64_t out_stride) {
  if (EffectiveOrder(order, n) != HalfDotOrder::kTinyBlas) {
    for (int64_t q = 0; q < queries; ++q) Avx2HalfDotRows(order, x, row_bytes, rows, y + q * n, n, out + q * out_stride);
    return;
  }
  // At most four queries at a time: 8 accumulators, 2 keys and a query in
  // AVX2's 16 registers.
  for (int64_t q = 0; q < queries; q += 4) {
    const float* first_query = y + q * n;
    float* first_out = out + q * out_stride;
    switch (std::min<int64_t>(4, queries - q)) {
      case 1: Avx2TinyBlasRowsQueries<1>(x, row_bytes, rows, first_query, n, first_out, out_stride); break;
      case 2: Avx2TinyBlasRowsQueries<2>(x, row_bytes, rows, first_query, n, first_out, out_stride); break;
      case 3: Avx2TinyBlasRowsQueries<3>(x, row_bytes, rows, first_query, n, first_out, out_stride); break;
      default: Avx2TinyBlasRowsQueries<4>(x, row_bytes, rows, first_query, n, first_out, out_stride); break;
    }
  }
}

// tinyBLAS's eight lanes of one set of weights, eight columns at a time: the
// columns' eight lane rows are loaded once, take every row's FMA in row
// order in registers, and are stored once, instead of a load and a store per
// row. Row r feeds lane (first_element + r) % 8, which register r % 8 holds,
// so every lane's operations and their order are the row-by-row loop's.
__attribute__((target("avx2,fma,f16c"))) void Avx2AxpyEightLanes(const uint8_t* x, int64_t row_bytes, int64_t rows,
                                                                const float* a, int64_t n, float* lanes,
                                                                int64_t first_element) {
  const int64_t first_lane = first_element % kTinyBlasLanes;
  for (int64_t i = 0; i < n; i += 8) {
    __m256 acc[kTinyBlasLanes];
    for (int k = 0; k < kTinyBlasLanes; ++k) acc[k] = _mm256_loadu_ps(lanes + (first_lane + k) % kTinyBlasLanes * n + i);
    for (int64_t r = 0; r < rows; r += kTinyBlasLanes) {
      for (int k = 0; k < kTinyBlasLanes; ++k) {
        if (r + k < rows) {
          acc[k] = _mm256_fmadd_ps(LoadHalf8(x + (r + k) * row_bytes + 2 * i), _mm256_set1_ps(a[r + k]), acc[k]);
        }
      }
    }
    for (int k = 0; k < kTinyBlasLanes; ++k) _mm256_storeu_ps(lanes + (first_lane + k) % kTinyBlasLanes * n + i, acc[k]);
  }
}

__attribute__((target("avx2,fma,f16c"))) void Avx2HalfAxpyRowsQueries(const uint8_t* x, int64_t row_bytes, int64_t rows,
                                                                     const float* a, int64_t a_stride, int64_t queries,
                                                                     int64_t n, float* lanes, int64_t lanes_stride,
                                                                     int lane_count, int64_t first_element) {
  if (lane_count == kTinyBlasLanes && n % 8 == 0) {
    for (int64_t q = 0; q < queries; ++q) {
      Avx2AxpyEightLanes(x, row_bytes, rows, a + q * a_stride, n, lanes + q * lanes_stride, first_element);
    }
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = x + r * row_bytes;
    const int64_t lane_offset = (first_element + r) % lane_count * n;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      const __m256 values = LoadHalf8(row + 2 * i);
      for (int64_t q = 0; q < queries; ++q) {
        float* lane = lanes + q * lanes_stride + lane_offset + i;
        _mm256_storeu_ps(lane, _mm256_fmadd_ps(values, _mm256_set1_ps(a[q * a_stride + r]), _mm256_loadu_ps(lane)));
      }
    }
    AxpyTailColumns(row, i, n, a + r, a_stride, queries, lanes + lane_offset, lanes_stride);
  }
}

// Columns i..i+7 of lane row l of lanes [lane][n].
__attribute__((target("avx2,fma,f16c"))) __m256 LaneColumns(const float* lanes, int64_t n, int l, int64_t i) {
  return _mm256_loadu_ps(lanes + l * n + i);
}

// FoldHalfDotLaneRows eight columns to a register: the columns are
// independent, each takes the portable loop's additions.
__attribute__((target("avx2,fma,f16c"))) void Avx2FoldLaneRows(HalfDotOrder order, const float* lanes, int64_t n,
                                                              float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if (order == HalfDotOrder::kTinyBlas) {
      const __m256 even = _mm256_add_ps(_mm256_add_ps(LaneColumns(lanes, n, 0, i), LaneColumns(lanes, n, 4, i)),
                                        _mm256_add_ps(LaneColumns(lanes, n, 2, i), LaneColumns(lanes, n, 6, i)));
      const __m256 odd = _mm256_add_ps(_mm256_add_ps(LaneColumns(lanes, n, 1, i), LaneColumns(lanes, n, 5, i)),
                                       _mm256_add_ps(LaneColumns(lanes, n, 3, i), LaneColumns(lanes, n, 7, i)));
      _mm256_storeu_ps(out + i, _mm256_add_ps(even, odd));
      continue;
    }
    __m256 v[8];
    for (int l = 0; l < 8; ++l) {
      v[l] = _mm256_add_ps(_mm256_add_ps(LaneColumns(lanes, n, l, i), LaneColumns(lanes, n, 16 + l, i)),
                           _mm256_add_ps(LaneColumns(lanes, n, 8 + l, i), LaneColumns(lanes, n, 24 + l, i)));
    }
    const __m256 low = _mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[1], v[5]));
    const __m256 high = _mm256_add_ps(_mm256_add_ps(v[2], v[6]), _mm256_add_ps(v[3], v[7]));
    _mm256_storeu_ps(out + i, _mm256_add_ps(low, high));
  }
  PortableFoldHalfDotLaneRows(order, lanes, n, i, out);
}

__attribute__((target("avx2,fma,f16c"))) void Avx2RoundToHalfRow(const float* x, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i halves = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(halves));
  }
  PortableRoundToHalfRow(x + i, out + i, n - i);
}

__attribute__((target("avx2,fma,f16c"))) void Avx2StoreHalfRow(const float* x, uint8_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  PortableStoreHalfRow(x + i, out + 2 * i, n - i);
}

// The AVX-512 forms keep every lane's operations: kVecDot's four 8-lane
// accumulators a0..a3 sit in two 16-lane registers as (a0 | a1) and
// (a2 | a3), so one register FMA is two of AVX2's, and their sum's halves
// are (a0 + a2) and (a1 + a3), the fold's first step. tinyBLAS's single
// accumulator has no second register to pair with; it stays AVX2.
__attribute__((target("avx512f,avx2,fma,f16c"))) __m512 LoadHalf16(const uint8_t* x) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)));
}

__attribute__((target("avx512f,avx2,fma,f16c"))) float Avx512VecDot(const uint8_t* x, const float* y, int64_t n) {
  __m512 low = _mm512_setzero_ps();   // a0 | a1
  __m512 high = _mm512_setzero_ps();  // a2 | a3
  const int64_t full = n / kVecDotLanes * kVecDotLanes;
  for (int64_t i = 0; i < full; i += kVecDotLanes) {
    low = _mm512_fmadd_ps(LoadHalf16(x + 2 * i), _mm512_loadu_ps(y + i), low);
    high = _mm512_fmadd_ps(LoadHalf16(x + 2 * (i + 16)), _mm512_loadu_ps(y + i + 16), high);
  }
  const __m512 pairs = _mm512_add_ps(low, high);  // (a0 + a2) | (a1 + a3)
  const __m256 v = _mm256_add_ps(_mm512_castps512_ps256(pairs),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(pairs), 1)));
  const __m128 t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 sums = _mm_hadd_ps(t, t);
  const float folded = _mm_cvtss_f32(_mm_hadd_ps(sums, sums));
  return full == n ? folded : AddVecDotTail(folded, x, y, full, n);
}

// Per 128-bit quarter: a0 + a1, a2 + a3, b0 + b1, b2 + b3.
__attribute__((target("avx512f,avx2,fma,f16c"))) __m512 Avx512AdjacentPairSums(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Avx512VecDot's fold for sixteen rows at once: pairs[k] holds row k's
// (a0 + a2) | (a1 + a3). Each step adds the halves of two (then four) rows'
// registers in one instruction, the additions each row's own fold makes, so
// that a row's fold costs three instructions instead of a dozen. Returns row
// k's total in lane 4 * (k % 4) + k / 4.
__attribute__((target("avx512f,avx2,fma,f16c"))) __m512 Avx512VecDotFoldSixteen(const __m512 pairs[16]) {
  // v = low eight + high eight: rows 2j and 2j + 1 in halves of one register.
  __m512 v[8];
  for (int j = 0; j < 8; ++j) {
    v[j] = _mm512_add_ps(_mm512_shuffle_f32x4(pairs[2 * j], pairs[2 * j + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(pairs[2 * j], pairs[2 * j + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // t_i = v_i + v_{i+4}: rows 4m .. 4m + 3 in the four 128-bit quarters.
  __m512 t[4];
  for (int m = 0; m < 4; ++m) {
    t[m] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * m], v[2 * m + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(v[2 * m], v[2 * m + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // (t0 + t1) and (t2 + t3) of two quarters' rows side by side, then their sum.
  return Avx512AdjacentPairSums(Avx512AdjacentPairSums(t[0], t[1]), Avx512AdjacentPairSums(t[2], t[3]));
}

// kVecDot over n a multiple of 32 for kQueries queries, sixteen rows at a
// time: each row's two accumulators take Avx512VecDot's FMAs in its order,
// a row's values converted once for every query, and sixteen rows' folds
// share their instructions (Avx512VecDotFoldSixteen). The same bits.
template <int kQueries>
__attribute__((target("avx512f,avx2,fma,f16c"))) void Avx512VecDotSixteenRows(const uint8_t* x, int64_t row_bytes,
                                                                               int64_t rows, const float* y,
                                                                               int64_t n, float* out,
                                                                               int64_t out_stride) {
  // Lane 4 * (k % 4) + k / 4 to lane k.
  const __m512i row_order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  for (int64_t r = 0; r < rows; r += 16) {
    const int count = static_cast<int>(std::min<int64_t>(16, rows - r));
    __m512 pairs[kQueries][16];
    for (int k = 0; k < 16; ++k) {
      for (int q = 0; q < kQueries; ++q) pairs[q][k] = _mm512_setzero_ps();
    }
    for (int k = 0; k < count; ++k) {
      const uint8_t* row = x + (r + k) * row_bytes;
      __m512 low[kQueries], high[kQueries];
      for (int q = 0; q < kQueries; ++q) low[q] = high[q] = _mm512_setzero_ps();
      for (int64_t i = 0; i < n; i += kVecDotLanes) {
        const __m512 first = LoadHalf16(row + 2 * i);
        const __m512 second = LoadHalf16(row + 2 * (i + 16));
        for (int q = 0; q < kQueries; ++q) {
          low[q] = _mm512_fmadd_ps(first, _mm512_loadu_ps(y + q * n + i), low[q]);
          high[q] = _mm512_fmadd_ps(second, _mm512_loadu_ps(y + q * n + i + 16), high[q]);
        }
      }
      for (int q = 0; q < kQueries; ++q) pairs[q][k] = _mm512_add_ps(low[q], high[q]);
    }
    const __mmask16 stored = static_cast<__mmask16>((1u << count) - 1);
    for (int q = 0; q < kQueries; ++q) {
      const __m512 totals = _mm512_permutexvar_ps(row_order, Avx512VecDotFoldSixteen(pairs[q]));
      _mm512_mask_storeu_ps(out + q * out_stride + r, stored, totals);
    }
  }
}

__attribute__((target("avx512f,avx2,fma,f16c"))) void Avx512HalfDotRows(HalfDotOrder order, const uint8_t* x,
                                                                         int64_t row_bytes, int64_t rows,
                                                                         const float* y, int64_t n, float* out) {
  if (EffectiveOrder(order, n) == HalfDotOrder::kTinyBlas) return Avx2HalfDotRows(order, x, row_bytes, rows, y, n, out);
  if (n % kVecDotLanes == 0) return Avx512VecDotSixteenRows<1>(x, row_bytes, rows, y, n, out, 0);
  for (int64_t r = 0; r < rows; ++r) out[r] = Avx512VecDot(x + r * row_bytes, y, n);
}

// Avx2AxpyEightLanes for kQueries sets of weights at once, sixteen columns
// at a time: a value row's sixteen columns are loaded and converted once for
// every set, whose 8 x kQueries lane registers AVX-512's 32 registers hold.
// Whole groups of eight rows run without a bound check per row. Each set's
// lanes take the row-by-row loop's operations in its order (columns are
// independent, so their width per register changes nothing).
template <int kQueries>
__attribute__((target("avx512f,avx2,fma,f16c"))) void Avx512AxpyEightLanesQueries(
    const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t a_stride, int64_t n, float* lanes,
    int64_t lanes_stride, int64_t first_element) {
  const int64_t first_lane = first_element % kTinyBlasLanes;
  const int64_t whole_groups = rows / kTinyBlasLanes * kTinyBlasLanes;
  for (int64_t i = 0; i < n; i += 16) {
    __m512 acc[kQueries][kTinyBlasLanes];
    for (int q = 0; q < kQueries; ++q) {
      for (int k = 0; k < kTinyBlasLanes; ++k) {
        acc[q][k] = _mm512_loadu_ps(lanes + q * lanes_stride + (first_lane + k) % kTinyBlasLanes * n + i);
      }
    }
    int64_t r = 0;
    for (; r < whole_groups; r += kTinyBlasLanes) {
      for (int k = 0; k < kTinyBlasLanes; ++k) {
        const __m512 values = LoadHalf16(x + (r + k) * row_bytes + 2 * i);
        for (int q = 0; q < kQueries; ++q) {
          acc[q][k] = _mm512_fmadd_ps(values, _mm512_set1_ps(a[q * a_stride + r + k]), acc[q][k]);
        }
      }
    }
    for (int k = 0; k < kTinyBlasLanes; ++k) {
      if (r + k < rows) {
        const __m512 values = LoadHalf16(x + (r + k) * row_bytes + 2 * i);
        for (int q = 0; q < kQueries; ++q) {
          acc[q][k] = _mm512_fmadd_ps(values, _mm512_set1_ps(a[q * a_stride + r + k]), acc[q][k]);
        }
      }
    }
    for (int q = 0; q < kQueries; ++q) {
      for (int k = 0; k < kTinyBlasLanes; ++k) {
        _mm512_storeu_ps(lanes + q * lanes_stride + (first_lane + k) % kTinyBlasLanes * n + i, acc[q][k]);
      }
    }
  }
}

// tinyBLAS's order keeps one 8-lane accumulator per product, which AVX2's
// queries form already holds in registers; kVecDot's (a decode step's) takes
// two queries per pass over the rows.
__attribute__((target("avx512f,avx2,fma,f16c"))) void Avx512HalfDotRowsQueries(
    HalfDotOrder order, const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t queries, int64_t n,
    float* out, int64_t out_stride) {
  if (EffectiveOrder(order, n) == HalfDotOrder::kTinyBlas) {
    return Avx2HalfDotRowsQueries(order, x, row_bytes, rows, y, queries, n, out, out_stride);
  }
  int64_t q = 0;
  if (n % kVecDotLanes == 0) {
    for (; q + 2 <= queries; q += 2) {
      Avx512VecDotSixteenRows<2>(x, row_bytes, rows, y + q * n, n, out + q * out_stride, out_stride);
    }
  }
  for (; q < queries; ++q) Avx512HalfDotRows(order, x, row_bytes, rows, y + q * n, n, out + q * out_stride);
}

// One pass of Avx512AxpyLaneByLane: the rows first_row, first_row +
// lane_count, ... into kRegisters registers of 16 columns of one lane
// (lane_columns, the lane's row of set 0 from the pass's first column), for
// kQueries sets. The register count is a template argument so that the
// accumulators stay in registers: under a run-time count GCC kept them in
// memory and copied them with rep movsq.
template <int kQueries, int kRegisters>
__attribute__((target("avx512f,avx2,fma,f16c"))) void Avx512AxpyLanePass(
    const uint8_t* const* row_pointers, int64_t first_row, int64_t rows, int lane_count, int64_t column,
    const float* a, int64_t a_stride, float* lane_columns, int64_t lanes_stride) {
  __m512 acc[kQueries][kRegisters];
  for (int q = 0; q < kQueries; ++q) {
    for (int j = 0; j < kRegisters; ++j) acc[q][j] = _mm512_loadu_ps(lane_columns + q * lanes_stride + 16 * j);
  }
  for (int64_t r = first_row; r < rows; r += lane_count) {
    const uint8_t* row = row_pointers[r] + 2 * column;
    __m512 weight[kQueries];
    for (int q = 0; q < kQueries; ++q) weight[q] = _mm512_set1_ps(a[q * a_stride + r]);
    for (int j = 0; j < kRegisters; ++j) {
      const __m512 values = LoadHalf16(row + 32 * j);
      for (int q = 0; q < kQueries; ++q) acc[q][j] = _mm512_fmadd_ps(values, weight[q], acc[q][j]);
    }
  }
  for (int q = 0; q < kQueries; ++q) {
    for (int j = 0; j < kRegisters; ++j) _mm512_storeu_ps(lane_columns + q * lanes_stride + 16 * j, acc[q][j]);
  }
}

// Avx512AxpyEightLanesQueries lane by lane: the rows of lane k (every
// lane_count-th row) against all of a set's columns, up to 128 at a time held
// in registers, so that each row's values are read whole, once per pass,
// where the column-by-column form reads a 32-byte piece of every row for
// each 16 columns, and a lane is loaded and stored once per pass, not once
// per row (kVecDot's 32 lanes, a decode step's). Each lane takes its rows in
// the same order, with the same operations: the same bits.
template <int kQueries>
__attribute__((target("avx512f,avx2,fma,f16c"))) void Avx512AxpyLaneByLane(
    const uint8_t* const* row_pointers, int64_t rows, const float* a, int64_t a_stride, int64_t n, float* lanes, int64_t lanes_stride,
    int lane_count, int64_t first_element) {
  for (int64_t k = 0; k < lane_count && k < rows; ++k) {
    float* lane = lanes + (first_element + k) % lane_count * n;
    const auto pass = [&](auto registers, int64_t column) {
      Avx512AxpyLanePass<kQueries, decltype(registers)::value>(row_pointers, k, rows, lane_count, column, a, a_stride,
                                                               lane + column, lanes_stride);
    };
    // Passes of 128 columns, then of 64, 32 and 16 for the rest.
    int64_t c = 0;
    for (; c + 128 <= n; c += 128) pass(std::integral_constant<int, 8>{}, c);
    if (n - c >= 64) pass(std::integral_constant<int, 4>{}, c), c += 64;
    if (n - c >= 32) pass(std::integral_constant<int, 2>{}, c), c += 32;
    if (n - c >= 16) pass(std::integral_constant<int, 1>{}, c);
  }
}

__attribute__((target("avx512f,avx2,fma,f16c"))) void Avx512HalfAxpyRowsQueries(
    const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t a_stride, int64_t queries, int64_t n,
    float* lanes, int64_t lanes_stride, int lane_count, int64_t first_element) {
  if (lane_count != kTinyBlasLanes || n % 16 != 0) {
    // One row at a time (kVecDot's 32 lanes, or columns off a multiple of
    // 16), its values converted once for every set, sixteen columns to a
    // register. PagedAttention's value sums take the row-pointer form, which
    // runs lane by lane where the columns allow.
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* row = x + r * row_bytes;
      const int64_t lane_offset = (first_element + r) % lane_count * n;
      int64_t i = 0;
      for (; i + 16 <= n; i += 16) {
        const __m512 values = LoadHalf16(row + 2 * i);
        for (int64_t q = 0; q < queries; ++q) {
          float* lane = lanes + q * lanes_stride + lane_offset + i;
          _mm512_storeu_ps(lane, _mm512_fmadd_ps(values, _mm512_set1_ps(a[q * a_stride + r]), _mm512_loadu_ps(lane)));
        }
      }
      AxpyTailColumns(row, i, n, a + r, a_stride, queries, lanes + lane_offset, lanes_stride);
    }
    return;
  }
  // Two sets at a time: 16 lane registers, and the row's values and a
  // broadcast weight beside them.
  int64_t q = 0;
  for (; q + 2 <= queries; q += 2) {
    Avx512AxpyEightLanesQueries<2>(x, row_bytes, rows, a + q * a_stride, a_stride, n, lanes + q * lanes_stride,
                                     lanes_stride, first_element);
  }
  if (q < queries) {
    Avx512AxpyEightLanesQueries<1>(x, row_bytes, rows, a + q * a_stride, a_stride, n, lanes + q * lanes_stride,
                                     lanes_stride, first_element);
  }
}
// One set of weights: the queries forms' single set, the same operations.
__attribute__((target("avx2,fma,f16c"))) void Avx2HalfAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows,
                                                              const float* a, int64_t n, float* lanes, int lane_count,
                                                              int64_t first_element) {
  Avx2HalfAxpyRowsQueries(x, row_bytes, rows, a, 0, 1, n, lanes, 0, lane_count, first_element);
}

__attribute__((target("avx512f,avx2,fma,f16c"))) void Avx512HalfAxpyRows(const uint8_t* x, int64_t row_bytes,
                                                                          int64_t rows, const float* a, int64_t n,
                                                                          float* lanes, int lane_count,
                                                                          int64_t first_element) {
  Avx512HalfAxpyRowsQueries(x, row_bytes, rows, a, 0, 1, n, lanes, 0, lane_count, first_element);
}
#endif

const internal::HalfDotKernels& Kernels() {
  static const internal::HalfDotKernels& kernels =
      internal::Avx512HalfDotKernels() != nullptr ? *internal::Avx512HalfDotKernels()
      : internal::Avx2HalfDotKernels() != nullptr ? *internal::Avx2HalfDotKernels()
                                                  : internal::PortableHalfDotKernels();
  return kernels;
}

}  // namespace

int HalfDotLanes(HalfDotOrder order) { return order == HalfDotOrder::kVecDot ? kVecDotLanes : kTinyBlasLanes; }

float SumEightLanes(const float* v, int64_t stride) {
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = v[i * stride] + v[(i + 4) * stride];
  return (t[0] + t[2]) + (t[1] + t[3]);
}

float FoldHalfDotLanes(HalfDotOrder order, const float* lanes, int64_t stride) {
  if (order == HalfDotOrder::kTinyBlas) return SumEightLanes(lanes, stride);
  // Lane l of accumulator j is lanes[(8 * j + l) * stride].
  float v[8];
  for (int l = 0; l < 8; ++l) {
    v[l] = (lanes[l * stride] + lanes[(16 + l) * stride]) + (lanes[(8 + l) * stride] + lanes[(24 + l) * stride]);
  }
  float t[4];
  for (int i = 0; i < 4; ++i) t[i] = v[i] + v[i + 4];
  return (t[0] + t[1]) + (t[2] + t[3]);
}

void FoldHalfDotLaneRows(HalfDotOrder order, const float* lanes, int64_t n, float* out) {
  Kernels().fold_lane_rows(order, lanes, n, out);
}

void HalfDotRows(HalfDotOrder order, const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y, int64_t n,
                 float* out) {
  Kernels().dot_rows(order, x, row_bytes, rows, y, n, out);
}

void HalfAxpyRows(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t n, float* lanes,
                  int lane_count, int64_t first_element) {
  Kernels().axpy_rows(x, row_bytes, rows, a, n, lanes, lane_count, first_element);
}

void HalfDotRowsQueries(HalfDotOrder order, const uint8_t* x, int64_t row_bytes, int64_t rows, const float* y,
                        int64_t queries, int64_t n, float* out, int64_t out_stride) {
  Kernels().dot_rows_queries(order, x, row_bytes, rows, y, queries, n, out, out_stride);
}

void HalfAxpyRowsQueries(const uint8_t* x, int64_t row_bytes, int64_t rows, const float* a, int64_t a_stride,
                         int64_t queries, int64_t n, float* lanes, int64_t lanes_stride, int lane_count,
                         int64_t first_element) {
  Kernels().axpy_rows_queries(x, row_bytes, rows, a, a_stride, queries, n, lanes, lanes_stride, lane_count,
                              first_element);
}

void HalfAxpyRowPointersQueries(const uint8_t* const* rows, int64_t count, const float* a, int64_t a_stride,
                                int64_t queries, int64_t n, float* lanes, int64_t lanes_stride, int lane_count,
                                int64_t first_element) {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (internal::Avx512HalfDotKernels() != nullptr && n % 16 == 0) {
    int64_t q = 0;
    for (; q + 2 <= queries; q += 2) {
      Avx512AxpyLaneByLane<2>(rows, count, a + q * a_stride, a_stride, n, lanes + q * lanes_stride, lanes_stride,
                              lane_count, first_element);
    }
    if (q < queries) {
      Avx512AxpyLaneByLane<1>(rows, count, a + q * a_stride, a_stride, n, lanes + q * lanes_stride, lanes_stride,
                              lane_count, first_element);
    }
    return;
  }
#endif
  // Runs of equally spaced rows through the strided form.
  for (int64_t r = 0; r < count;) {
    const int64_t stride = r + 1 < count ? rows[r + 1] - rows[r] : 0;
    int64_t run = 1;
    while (r + run < count && rows[r + run] - rows[r + run - 1] == stride) ++run;
    HalfAxpyRowsQueries(rows[r], stride, run, a + r, a_stride, queries, n, lanes, lanes_stride, lane_count,
                        first_element + r);
    r += run;
  }
}

void RoundToHalfRow(const float* x, float* out, int64_t n) { Kernels().round_to_half(x, out, n); }

void StoreHalfRow(const float* x, uint8_t* out, int64_t n) { Kernels().store_half(x, out, n); }

namespace internal {

const HalfDotKernels& PortableHalfDotKernels() {
  static constexpr HalfDotKernels kKernels = {PortableHalfDotRows,         PortableHalfAxpyRows,
                                              PortableHalfDotRowsQueries,  PortableHalfAxpyRowsQueries,
                                              PortableFoldLaneRows,        PortableRoundToHalfRow,
                                              PortableStoreHalfRow};
  return kKernels;
}

const HalfDotKernels* Avx2HalfDotKernels() {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  static constexpr HalfDotKernels kKernels = {Avx2HalfDotRows,         Avx2HalfAxpyRows, Avx2HalfDotRowsQueries,
                                              Avx2HalfAxpyRowsQueries, Avx2FoldLaneRows, Avx2RoundToHalfRow,
                                              Avx2StoreHalfRow};
  if (CpuSupports(CpuIsa::kAvx2)) return &kKernels;
#endif
  return nullptr;
}

const HalfDotKernels* Avx512HalfDotKernels() {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  static constexpr HalfDotKernels kKernels = {Avx512HalfDotRows,         Avx512HalfAxpyRows, Avx512HalfDotRowsQueries,
                                              Avx512HalfAxpyRowsQueries, Avx2FoldLaneRows,   Avx2RoundToHalfRow,
                                              Avx2StoreHalfRow};
  if (BestCpuIsa() == CpuIsa::kAvx512Vnni) return &kKernels;
#endif
  return nullptr;
}

}  // namespace internal
}  // namespace kvjit::cpu
