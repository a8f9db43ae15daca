// The x86 dot products for AVX2 + FMA + F16C: the only translation unit
// built with those instructions enabled and nothing more. They follow
// DotKernels.h's numeric contract and compute what DotKernelsPortable.cpp
// computes, bit for bit. Nothing here may have external linkage (see
// DotKernels.h) but the two entry points at the end: no standard-library
// templates, no shared inline helpers, and scalar FMAs through the builtin
// rather than std::fma.

#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "runtime/cpu/Avx2Nibbles.h"
#include "runtime/cpu/DotKernels.h"
#include "runtime/cpu/SimdLoads.h"
#include "runtime/quant/Half.h"

namespace kvjit::cpu::internal {
namespace {

// The fold order of DotKernels.h's LaneSum.
float FoldLanes(__m256 v) {
  const __m128 halves = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// 8 lanes of 4-element sums of unsigned weight bytes times signed
// activations. The weights' magnitudes are at most 128 and the activations'
// at most 127, so the 16-bit pair sums cannot saturate: exact.
__m256i UnsignedLaneSums(__m256i weights, __m256i activations) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(weights, activations), _mm256_set1_epi16(1));
}

// 0x10 in byte i where bit i of the 32-bit little-endian word at p is set.
__m256i FifthBits(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof bits);
  const __m256i byte_of_bit = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
  const __m256i bit_in_byte = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), byte_of_bit);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit_in_byte), bit_in_byte);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// A block's weights ready for byte multiply-adds, shared by every
// activation row they meet: the unsigned operand, and (for signed formats)
// the signs to move onto the activations.
struct PreparedWeights {
  __m256i magnitudes;
  __m256i signs;
};

PreparedWeights Signed(__m256i weights) { return {_mm256_sign_epi8(weights, weights), weights}; }
PreparedWeights Unsigned(__m256i weights) { return {weights, weights}; }

// The byte multiply-add takes one unsigned operand: signed formats move the
// weights' signs onto the activations.
template <bool kSigned>
__m256i LaneSumsOf(const PreparedWeights& w, __m256i activations) {
  return UnsignedLaneSums(w.magnitudes, kSigned ? _mm256_sign_epi8(activations, w.signs) : activations);
}

struct Q8_0Format {
  static constexpr int64_t kBytes = 34;
  static constexpr bool kHasOffset = false;
  static constexpr bool kSigned = true;
  static PreparedWeights Prepare(const uint8_t* block) { return Signed(Load256(block + 2)); }
};

struct Q4_0Format {
  static constexpr int64_t kBytes = 18;
  static constexpr bool kHasOffset = false;
  static constexpr bool kSigned = true;
  static PreparedWeights Prepare(const uint8_t* block) {
    return Signed(_mm256_sub_epi8(Nibbles(block + 2), _mm256_set1_epi8(8)));
  }
};

struct Q4_1Format {
  static constexpr int64_t kBytes = 20;
  static constexpr bool kHasOffset = true;
  static constexpr bool kSigned = false;
  static PreparedWeights Prepare(const uint8_t* block) { return Unsigned(Nibbles(block + 4)); }
};

struct Q5_0Format {
  static constexpr int64_t kBytes = 22;
  static constexpr bool kHasOffset = false;
  static constexpr bool kSigned = true;
  static PreparedWeights Prepare(const uint8_t* block) {
    const __m256i values = _mm256_or_si256(Nibbles(block + 6), FifthBits(block + 2));
    return Signed(_mm256_sub_epi8(values, _mm256_set1_epi8(16)));
  }
};

struct Q5_1Format {
  static constexpr int64_t kBytes = 24;
  static constexpr bool kHasOffset = true;
  static constexpr bool kSigned = false;
  static PreparedWeights Prepare(const uint8_t* block) {
    return Unsigned(_mm256_or_si256(Nibbles(block + 8), FifthBits(block + 4)));
  }
};

// Every 32-element block starts with its f16 scale d, and the offset formats
// follow it with their f16 m: one 8-byte load converts both (lanes 0 and 1;
// lanes 2 and 3 hold whatever follows; their products are computed and
// discarded). Against the
// activation block's (scale, scaled_sum) pair, lane 0 of the product is
// d * scale and lane 1 of the FMA is fma(m, scaled_sum, offset) -- the
// contract's operations, without a scalar f16 conversion or insert per value.
__m128 BlockHalves(const uint8_t* block) {
  return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block)));
}
__m128 ScalePair(const Q8Block32& a) {
  static_assert(offsetof(Q8Block32, scaled_sum) == offsetof(Q8Block32, scale) + sizeof(float));
  return _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(&a.scale)));
}

// A GEMV reads each weight byte once, and a decode step's weights (tens of
// megabytes) come from L3 or memory: the hardware prefetcher stops at page
// boundaries, so each block asks for the bytes this far ahead (a few rows;
// past a thread's last row the request is only wasted).
constexpr int64_t kWeightPrefetchBytes = 2048;

// Row-major blocks (kRowsInterleaved 1) or the interleaved layout's (8):
// the next block of a row lies kRowsInterleaved blocks further on.
template <class Format, int64_t kRowsInterleaved = 1>
float DotBlocks32(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  const auto* activations = static_cast<const Q8Block32*>(activation_row);
  __m256 acc = _mm256_setzero_ps();
  __m128 offset = _mm_setzero_ps();  // lane 1
  for (int64_t b = 0; b < cols / 32; ++b) {
    const uint8_t* block = weight_row + b * kRowsInterleaved * Format::kBytes;
    const Q8Block32& a = activations[b];
    _mm_prefetch(reinterpret_cast<const char*>(block) + kWeightPrefetchBytes, _MM_HINT_T0);
    const __m256i lanes = LaneSumsOf<Format::kSigned>(Format::Prepare(block), Load256(a.q));
    const __m128 halves = BlockHalves(block);
    const __m128 scales = ScalePair(a);
    const __m256 d = _mm256_broadcastss_ps(_mm_mul_ps(halves, scales));
    acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc);
    if (Format::kHasOffset) offset = _mm_fmadd_ps(halves, scales, offset);
  }
  return FoldLanes(acc) + _mm_cvtss_f32(_mm_movehdup_ps(offset));
}

// DotBlocks32 for consecutive weight rows against one activation row (a
// decode GEMV), kSideBySide rows at once: each row's sum is a chain of
// dependent FMAs, one per block, so further chains keep the FMA units busy
// while the first waits, and they share the activation block's loads.
// Every row takes exactly DotBlocks32's operations in its order.
//
// Each block asks for the same block of the rows that come next: the next
// kSideBySide rows of GGUF's layout, or the next group of the interleaved
// one (which the caller hands over a group at a time). A fixed distance ahead
// in the row, as DotBlocks32's, reaches only the first of the rows that come
// next, and the rest then wait on memory: a Q8_0 GEMV read its weights at
// 20 GB/s that way and at 41 GB/s this way (2 threads, a 285 MB matrix).
//
// In GGUF's layout, from kL2PrefetchDistance ahead on, the requests go into
// L2 (PrefetchLinesToL2 says why): into L1 they held a 2048 x 16384 Q8_0 GEMV
// to 23-25 GB/s on Zen 4, into L2 it reads at 51-52 (`kvjit_cpu_kernel_bench
// stream`, docs/benchmarks.md, "Prefetching into L2"), and Gemma-3-1B's
// decode (its 262,144-row Q8_0 output) gained 10-30%. Nearer, as SmolLM2's
// narrow rows are, or a group ahead in the interleaved layout, the line must
// be in L1 when its load comes: into L2, SmolLM2's decode lost 15%.
constexpr int64_t kL2PrefetchDistance = 2048;
template <class Format, int64_t kRowsInterleaved = 1, int kSideBySide = 2>
void DotBlocks32Rows(const uint8_t* weights, int64_t row_bytes, int64_t rows, const void* activation_row,
                     int64_t cols, float* out) {
  const auto* activations = static_cast<const Q8Block32*>(activation_row);
  const int64_t ahead =
      kRowsInterleaved == 1 ? kSideBySide * row_bytes : cols / 32 * kRowsInterleaved * Format::kBytes;
  int64_t r = 0;
  for (; r + kSideBySide <= rows; r += kSideBySide) {
    const uint8_t* side_by_side[kSideBySide];
    __m256 acc[kSideBySide];
    __m128 offset[kSideBySide];  // lane 1
    for (int k = 0; k < kSideBySide; ++k) {
      side_by_side[k] = weights + (r + k) * row_bytes;
      acc[k] = _mm256_setzero_ps();
      offset[k] = _mm_setzero_ps();
    }
    for (int64_t b = 0; b < cols / 32; ++b) {
      const Q8Block32& a = activations[b];
      const __m256i q = Load256(a.q);
      const __m128 scales = ScalePair(a);
      for (int k = 0; k < kSideBySide; ++k) {
        const uint8_t* block = side_by_side[k] + b * kRowsInterleaved * Format::kBytes;
        if (kRowsInterleaved == 1 && ahead >= kL2PrefetchDistance) {
          _mm_prefetch(reinterpret_cast<const char*>(block) + ahead, _MM_HINT_T1);
        } else {
          _mm_prefetch(reinterpret_cast<const char*>(block) + ahead, _MM_HINT_T0);
        }
        const __m256i lanes = LaneSumsOf<Format::kSigned>(Format::Prepare(block), q);
        const __m128 halves = BlockHalves(block);
        const __m256 d = _mm256_broadcastss_ps(_mm_mul_ps(halves, scales));
        acc[k] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc[k]);
        if (Format::kHasOffset) offset[k] = _mm_fmadd_ps(halves, scales, offset[k]);
      }
    }
    for (int k = 0; k < kSideBySide; ++k) out[r + k] = FoldLanes(acc[k]) + _mm_cvtss_f32(_mm_movehdup_ps(offset[k]));
  }
  for (; r < rows; ++r) out[r] = DotBlocks32<Format, kRowsInterleaved>(weights + r * row_bytes, activation_row, cols);
}

// DotBlocks32 for four activation rows at once: each block's weights are
// unpacked once for the four. Every row's sums take exactly DotBlocks32's
// operations in its order, so each result is bit for bit the single-row one.
template <class Format, int64_t kRowsInterleaved = 1>
void DotBlocks32x4(const uint8_t* weight_row, const void* const activation_rows[4], int64_t cols,
                   float out[4]) {
  const Q8Block32* activations[4];
  for (int r = 0; r < 4; ++r) activations[r] = static_cast<const Q8Block32*>(activation_rows[r]);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  __m128 offset[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};  // lane 1
  for (int64_t b = 0; b < cols / 32; ++b) {
    const uint8_t* block = weight_row + b * kRowsInterleaved * Format::kBytes;
    _mm_prefetch(reinterpret_cast<const char*>(block) + kWeightPrefetchBytes, _MM_HINT_T0);
    const PreparedWeights weights = Format::Prepare(block);
    const __m128 halves = BlockHalves(block);
    for (int r = 0; r < 4; ++r) {
      const Q8Block32& a = activations[r][b];
      const __m256i lanes = LaneSumsOf<Format::kSigned>(weights, Load256(a.q));
      const __m128 scales = ScalePair(a);
      const __m256 d = _mm256_broadcastss_ps(_mm_mul_ps(halves, scales));
      acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes), acc[r]);
      if (Format::kHasOffset) offset[r] = _mm_fmadd_ps(halves, scales, offset[r]);
    }
  }
  for (int r = 0; r < 4; ++r) out[r] = FoldLanes(acc[r]) + _mm_cvtss_f32(_mm_movehdup_ps(offset[r]));
}

__m256i ShiftBytesRight(__m256i v, int bits) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(bits)); }

int32_t MinSum(const int32_t mins[8], const int32_t sums32[8]) {
  int32_t sum = 0;
  for (int j = 0; j < 8; ++j) sum += mins[j] * sums32[j];
  return sum;
}

// Q4_K and Q5_K differ only in where the values come from.
template <int64_t kBlockBytes, bool kHasFifthBits>
float DotScaledMinK(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  const auto* activations = static_cast<const Q8KBlock*>(activation_row);
  const __m256i low_nibble = _mm256_set1_epi8(0x0f);
  const __m256i one_bit = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  float offset = 0.0f;
  for (int64_t b = 0; b < cols / 256; ++b) {
    const uint8_t* block = weight_row + b * kBlockBytes;
    const Q8KBlock& a = activations[b];
    int32_t scales[8], mins[8];
    UnpackKScalesAndMins(block + 4, scales, mins);
    const uint8_t* qs = block + (kHasFifthBits ? 48 : 16);
    const __m256i fifth_bits = kHasFifthBits ? Load256(block + 16) : _mm256_setzero_si256();
    __m256i lanes = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i packed = Load256(qs + 32 * g);
      __m256i low = _mm256_and_si256(packed, low_nibble);
      __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
      if (kHasFifthBits) {
        const __m256i low_top = _mm256_and_si256(ShiftBytesRight(fifth_bits, 2 * g), one_bit);
        const __m256i high_top = _mm256_and_si256(ShiftBytesRight(fifth_bits, 2 * g + 1), one_bit);
        low = _mm256_or_si256(low, _mm256_slli_epi16(low_top, 4));
        high = _mm256_or_si256(high, _mm256_slli_epi16(high_top, 4));
      }
      const __m256i low_products = _mm256_maddubs_epi16(low, Load256(a.q + 64 * g));
      const __m256i high_products = _mm256_maddubs_epi16(high, Load256(a.q + 64 * g + 32));
      lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(low_products, _mm256_set1_epi16(scales[2 * g])));
      lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(high_products, _mm256_set1_epi16(scales[2 * g + 1])));
    }
    const float d = LoadHalf(block) * a.scale;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
    const float dmin = LoadHalf(block + 2) * a.scale;
    offset = __builtin_fmaf(-dmin, static_cast<float>(MinSum(mins, a.sums32)), offset);
  }
  return FoldLanes(acc) + offset;
}

// Q6_K has no four-row kernel: single rows only.
float DotQ6_K(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  const auto* activations = static_cast<const Q8KBlock*>(activation_row);
  const __m256i low_nibble = _mm256_set1_epi8(0x0f);
  const __m256i two_bits = _mm256_set1_epi8(3);
  const __m256i bias = _mm256_set1_epi8(32);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < cols / 256; ++b) {
    const uint8_t* block = weight_row + b * 210;
    const Q8KBlock& a = activations[b];
    const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
    __m256i lanes = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql_first = Load256(block + 64 * h);
      const __m256i ql_second = Load256(block + 64 * h + 32);
      const __m256i qh = Load256(block + 128 + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i ql = (k & 1) ? ql_second : ql_first;
        const __m256i low = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), low_nibble);
        const __m256i top = _mm256_and_si256(ShiftBytesRight(qh, 2 * k), two_bits);
        const __m256i biased = _mm256_or_si256(low, _mm256_slli_epi16(top, 4));  // q + 32, in 0..63
        const __m256i q = Load256(a.q + 128 * h + 32 * k);
        const __m256i products = _mm256_sub_epi16(_mm256_maddubs_epi16(biased, q), _mm256_maddubs_epi16(bias, q));
        const __m256i lane_scales = _mm256_set_m128i(_mm_set1_epi16(scales[8 * h + 2 * k + 1]),
                                                     _mm_set1_epi16(scales[8 * h + 2 * k]));
        lanes = _mm256_add_epi32(lanes, _mm256_madd_epi16(products, lane_scales));
      }
    }
    const float d = LoadHalf(block + 208) * a.scale;
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), acc);
  }
  return FoldLanes(acc);
}

struct F32Elements {
  static constexpr int64_t kBytes = 4;
  static __m256 Load8(const uint8_t* row, int64_t i) { return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i); }
  static float Load1(const uint8_t* row, int64_t i) {
    float value;
    std::memcpy(&value, row + 4 * i, sizeof value);
    return value;
  }
};

struct F16Elements {
  static constexpr int64_t kBytes = 2;
  static __m256 Load8(const uint8_t* row, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
  static float Load1(const uint8_t* row, int64_t i) { return LoadHalf(row + 2 * i); }
};

struct BF16Elements {
  static constexpr int64_t kBytes = 2;
  static __m256 Load8(const uint8_t* row, int64_t i) {
    const __m256i widened = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(widened, 16));
  }
  static float Load1(const uint8_t* row, int64_t i) {
    uint16_t bits;
    std::memcpy(&bits, row + 2 * i, sizeof bits);
    return quant::BFloat16ToFloat(bits);
  }
};

template <class Elements>
float DotFloat(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  const auto* x = static_cast<const float*>(activation_row);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  __m256 acc2 = _mm256_setzero_ps(), acc3 = _mm256_setzero_ps();
  const int64_t vector_cols = cols / 32 * 32;
  for (int64_t c = 0; c < vector_cols; c += 32) {
    for (int64_t line = 0; line < 32 * Elements::kBytes; line += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(weight_row + c * Elements::kBytes + line) + kWeightPrefetchBytes,
                   _MM_HINT_T0);
    }
    acc0 = _mm256_fmadd_ps(Elements::Load8(weight_row, c), _mm256_loadu_ps(x + c), acc0);
    acc1 = _mm256_fmadd_ps(Elements::Load8(weight_row, c + 8), _mm256_loadu_ps(x + c + 8), acc1);
    acc2 = _mm256_fmadd_ps(Elements::Load8(weight_row, c + 16), _mm256_loadu_ps(x + c + 16), acc2);
    acc3 = _mm256_fmadd_ps(Elements::Load8(weight_row, c + 24), _mm256_loadu_ps(x + c + 24), acc3);
  }
  double sum = FoldLanes(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (int64_t i = vector_cols; i < cols; ++i) sum += static_cast<double>(Elements::Load1(weight_row, i) * x[i]);
  return static_cast<float>(sum);
}

// The magic-number rounding of MatMul.cpp's RoundToNearestEven, lane by
// lane: the same integers for every input.
__m256i RoundToNearestEven8(__m256 v) {
  const __m256i bits = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.0f)));
  return _mm256_sub_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
}

float RoundThroughHalf(float value) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(value), _MM_FROUND_TO_NEAREST_INT)));
}

}  // namespace

void Avx2QuantizeQ8Blocks32(const float* x, int64_t blocks, Q8Block32* out) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* block = x + 32 * b;
    __m256 v[4];
    for (int j = 0; j < 4; ++j) v[j] = _mm256_loadu_ps(block + 8 * j);
    // max_ps(a, b) keeps b where a is NaN, as std::max(amax, |x|) keeps amax.
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) amax = _mm256_max_ps(_mm256_andnot_ps(sign_bit, v[j]), amax);
    __m128 folded = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    folded = _mm_max_ps(folded, _mm_movehl_ps(folded, folded));
    folded = _mm_max_ss(folded, _mm_movehdup_ps(folded));
    const float block_amax = _mm_cvtss_f32(folded);
    const float d = block_amax / 127.0f;
    const __m256 inverse = _mm256_set1_ps(block_amax != 0.0f ? 127.0f / block_amax : 0.0f);
    __m256i q[4];
    for (int j = 0; j < 4; ++j) q[j] = RoundToNearestEven8(_mm256_mul_ps(v[j], inverse));
    // For finite inputs the integers are within int8 (|x| * 127 / amax is at
    // most 127), so the saturating packs keep them; packing interleaves
    // 128-bit halves, which the permute puts back in element order.
    const __m256i words = _mm256_packs_epi32(q[0], q[1]);
    const __m256i words_high = _mm256_packs_epi32(q[2], q[3]);
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(words, words_high),
                                                      _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[b].q), bytes);
    const __m256i sums = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(1, 0, 3, 2)));
    sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(2, 3, 0, 1)));
    out[b].scale = RoundThroughHalf(d);
    out[b].scaled_sum = RoundThroughHalf(d * static_cast<float>(_mm_cvtsi128_si32(sum)));
  }
}

void Avx2RoundThroughHalf(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT)));
  }
  for (; i < n; ++i) out[i] = RoundThroughHalf(x[i]);
}

void Avx2RoundThroughBFloat16(const float* x, int64_t n, float* out) {
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i infinity = _mm256_set1_epi32(0x7f800000);
  for (int64_t i = 0; i < n; i += 8) {
    // The tail goes through the same vector operations on a masked load.
    const int64_t count = n - i < 8 ? n - i : 8;
    const __m256i active = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i bits = _mm256_castps_si256(_mm256_maskload_ps(x + i, active));
    // Nearest, ties to even: add 0x7fff plus the kept part's lowest bit.
    const __m256i rounding = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(_mm256_srli_epi32(bits, 16), one));
    const __m256i rounded = _mm256_add_epi32(bits, rounding);
    // NaNs stay NaN, made quiet, as quant::FloatToBFloat16 keeps them.
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude_mask), infinity);
    const __m256i quiet_nan = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
    const __m256i kept = _mm256_blendv_epi8(rounded, quiet_nan, is_nan);
    const __m256i truncated = _mm256_and_si256(kept, _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
    _mm256_maskstore_ps(out + i, active, _mm256_castsi256_ps(truncated));
  }
}

void Avx2QuantizeQ8KBlocks(const float* x, int64_t blocks, Q8KBlock* out) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* block = x + 256 * b;
    Q8KBlock& q8 = out[b];
    // max_ps(a, b) keeps b where a is NaN, as the scalar loop skips NaNs.
    __m256 amax8 = _mm256_setzero_ps();
    for (int j = 0; j < 32; ++j) amax8 = _mm256_max_ps(_mm256_andnot_ps(sign_bit, _mm256_loadu_ps(block + 8 * j)), amax8);
    __m128 folded = _mm_max_ps(_mm256_castps256_ps128(amax8), _mm256_extractf128_ps(amax8, 1));
    folded = _mm_max_ps(folded, _mm_movehl_ps(folded, folded));
    folded = _mm_max_ss(folded, _mm_movehdup_ps(folded));
    const float amax = _mm_cvtss_f32(folded);
    if (amax == 0.0f) {
      std::memset(&q8, 0, sizeof q8);
      continue;
    }
    // The scale's sign follows the first element of largest magnitude.
    const __m256 amax_vector = _mm256_set1_ps(amax);
    float extreme = 0.0f;
    for (int j = 0; j < 32; ++j) {
      const __m256 v = _mm256_loadu_ps(block + 8 * j);
      const int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign_bit, v), amax_vector, _CMP_EQ_OQ));
      if (hits != 0) {
        extreme = block[8 * j + __builtin_ctz(static_cast<unsigned>(hits))];
        break;
      }
    }
    const float inverse_scale = -127.0f / extreme;
    const __m256 inverse = _mm256_set1_ps(inverse_scale);
    const __m256i most = _mm256_set1_epi32(127);
    const __m256i low_byte = _mm256_set1_epi32(0xff);
    for (int c = 0; c < 8; ++c) {
      __m256i q[4];
      for (int j = 0; j < 4; ++j) {
        const __m256 v = _mm256_loadu_ps(block + 32 * c + 8 * j);
        // The scalar loop's int8 cast keeps the low byte: so do the packs,
        // given bytes 0..255.
        q[j] = _mm256_and_si256(_mm256_min_epi32(RoundToNearestEven8(_mm256_mul_ps(inverse, v)), most), low_byte);
      }
      const __m256i words = _mm256_packus_epi32(q[0], q[1]);
      const __m256i words_high = _mm256_packus_epi32(q[2], q[3]);
      const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(words, words_high),
                                                        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q8.q + 32 * c), bytes);
      const __m256i lane_sums = UnsignedLaneSums(_mm256_set1_epi8(1), bytes);
      __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(lane_sums), _mm256_extracti128_si256(lane_sums, 1));
      sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(1, 0, 3, 2)));
      sum = _mm_add_epi32(sum, _mm_shuffle_epi32(sum, _MM_SHUFFLE(2, 3, 0, 1)));
      q8.sums32[c] = _mm_cvtsi128_si32(sum);
    }
    q8.scale = 1.0f / inverse_scale;
  }
}

const DotKernels& Avx2DotKernels() {
  static constexpr DotKernels kKernels = {
      DotFloat<F32Elements>,
      DotFloat<F16Elements>,
      DotFloat<BF16Elements>,
      DotBlocks32<Q8_0Format>,
      DotBlocks32<Q4_0Format>,
      DotBlocks32<Q4_1Format>,
      DotBlocks32<Q5_0Format>,
      DotBlocks32<Q5_1Format>,
      DotScaledMinK<144, false>,
      DotScaledMinK<176, true>,
      DotQ6_K,
  };
  return kKernels;
}

const RowsDotKernels& Avx2RowsDotKernels() {
  static constexpr RowsDotKernels kKernels = {
      DotBlocks32Rows<Q8_0Format, 1, 4>, DotBlocks32Rows<Q4_0Format, 1, 4>, DotBlocks32Rows<Q4_1Format, 1, 4>,
      DotBlocks32Rows<Q5_0Format, 1, 4>, DotBlocks32Rows<Q5_1Format, 1, 4>,
  };
  return kKernels;
}

const DotKernels4& Avx2DotKernels4() {
  static constexpr DotKernels4 kKernels = {
      DotBlocks32x4<Q8_0Format>, DotBlocks32x4<Q4_0Format>, DotBlocks32x4<Q4_1Format>,
      DotBlocks32x4<Q5_0Format>, DotBlocks32x4<Q5_1Format>,
  };
  return kKernels;
}

const BlockDotKernels& Avx2Interleaved8DotKernels() {
  static constexpr BlockDotKernels kKernels = {
      DotBlocks32<Q8_0Format, 8>, DotBlocks32<Q4_0Format, 8>, DotBlocks32<Q4_1Format, 8>,
      DotBlocks32<Q5_0Format, 8>, DotBlocks32<Q5_1Format, 8>,
  };
  return kKernels;
}

// The interleaved layout's GEMV takes a group's rows four at a time: the
// four read the first half of each block column's 8 blocks, the next four
// the second half, from L1.
const RowsDotKernels& Avx2Interleaved8RowsDotKernels() {
  static constexpr RowsDotKernels kKernels = {
      DotBlocks32Rows<Q8_0Format, 8, 4>, DotBlocks32Rows<Q4_0Format, 8, 4>, DotBlocks32Rows<Q4_1Format, 8, 4>,
      DotBlocks32Rows<Q5_0Format, 8, 4>, DotBlocks32Rows<Q5_1Format, 8, 4>,
  };
  return kKernels;
}

const DotKernels4& Avx2Interleaved8DotKernels4() {
  static constexpr DotKernels4 kKernels = {
      DotBlocks32x4<Q8_0Format, 8>, DotBlocks32x4<Q4_0Format, 8>, DotBlocks32x4<Q4_1Format, 8>,
      DotBlocks32x4<Q5_0Format, 8>, DotBlocks32x4<Q5_1Format, 8>,
  };
  return kKernels;
}

}  // namespace kvjit::cpu::internal
