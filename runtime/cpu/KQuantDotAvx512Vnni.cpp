// The single-row kernels (a decode GEMV) for the K-quants (Q4_K, Q5_K, Q6_K)
// against Q8_K activations, in AVX-512 BW/VL/VNNI.
//
// DotKernels.h's contract fixes only the float steps: per 256-element
// super-block, eight exact integer lane sums L_m (lane m: elements 4m..4m+3
// of each 32-element chunk, weighted by the chunk's sub-block scales), then
// acc_m = fma(d_w * d_x, float(L_m), acc_m), and for Q4_K / Q5_K
// offset = fma(-(dmin * d_x), float(sum of min * bsum), offset). Integers are
// exact in any order, so the kernels form L_m their own way and follow
// DotKernelsAvx2.cpp's float steps one for one: the results are its bits.
//
// A 512-bit register holds two consecutive chunks, whose activations are one
// contiguous 64-byte load. vpmaddubsw forms the 16-bit pair products (at most
// 2 * 31 * 127 or 2 * 63 * 128 in magnitude: no saturation) and vpdpwssd
// multiplies them by a scale vector that holds the first chunk's scale in
// its low half and the second's in its high half, adding into int32 lanes.
// At the end of the super-block the two halves are added: L_m. The AVX2
// kernels need four instructions (two multiply-adds, one madd, one add) for
// what two do here on twice the width. A decode GEMV takes the rows two at a
// time (DotKRows).
//
// Same linkage rule as DotKernels.h: only the two entry points are external.

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "KQuantDotAvx512Vnni.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

#include <immintrin.h>

#include <array>
#include <cstring>

#include "runtime/cpu/Avx512LaneSums.h"
#include "runtime/cpu/DotKernels.h"
#include "runtime/cpu/GemvRowWalk.h"
#include "runtime/cpu/Prefetch.h"
#include "runtime/cpu/SimdLoads.h"

namespace kvjit::cpu::internal {
namespace {

uint32_t LoadWord(const uint8_t* p) {
  uint32_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}

__m512i Load512(const void* p) { return _mm512_loadu_si512(p); }

// 32 bytes in both halves of a 512-bit register.
__m512i Broadcast256(const uint8_t* p) { return _mm512_broadcast_i64x4(Load256(p)); }

// The fold order of DotKernels.h's LaneSum.
float FoldLanes(__m256 v) {
  const __m128 halves = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
  return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// The low half's int32 lanes plus the high half's: L_m of chunks held in
// pairs.
__m256i FoldChunkPairs(__m512i lanes) {
  return _mm256_add_epi32(_mm512_castsi512_si256(lanes), _mm512_extracti64x4_epi64(lanes, 1));
}

// Each int32 lane's value (within int16) in both int16 halves of the lane,
// the form vpdpwssd needs to multiply both pair products of a lane by it.
// The mask drops a negative value's sign extension.
__m512i InBothInt16Halves(__m512i int32_values) {
  return _mm512_or_si512(_mm512_and_si512(int32_values, _mm512_set1_epi32(0xffff)),
                         _mm512_slli_epi32(int32_values, 16));
}

// The four int32 lanes added (exact in any order).
int32_t Int32LaneSum(__m128i v) {
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = _mm_add_epi32(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(v);
}

// The sum over the 8 sub-blocks of min * bsum, exact: the mins (at most 63)
// and the sums (at most 32 * 128 in magnitude) fit the int16 factors of the
// pair multiply-add.
int32_t MinSum(uint64_t mins, const int32_t sums32[8]) {
  const __m128i mins16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mins)));
  const __m128i sums16 = _mm_packs_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sums32)),
                                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(sums32 + 4)));
  return Int32LaneSum(_mm_madd_epi16(mins16, sums16));
}

// Q4_K and Q5_K: f16 d, f16 dmin, 12 bytes of scales and mins, Q5_K's 32
// bytes of fifth bits, 128 bytes of nibbles: chunk 2g the low nibbles of
// bytes 32g..32g + 31, chunk 2g + 1 their high nibbles; Q5_K's chunk c takes
// bit c of each fifth-bit byte as its value's bit 4.
template <int64_t kBlockBytesOf, bool kHasFifthBits>
struct ScaledMinFormat {
  static constexpr int64_t kBlockBytes = kBlockBytesOf;
  static constexpr bool kHasMins = true;
  static constexpr bool kOneTotalPerSuperBlock = false;
  static constexpr int64_t kDOffset = 0;

  // L_m of the super-block at `block` against `a`; `scale_bytes`' low eight
  // bytes are its sub-blocks' scales (KScalesAndMinsBytes::scales).
  // The activations as LaneSums takes them: Q8_K's blocks as they are.
  [[gnu::always_inline]] static const Q8KBlock& Prepare(const Q8KBlock& a) { return a; }

  [[gnu::always_inline]] static __m256i LaneSums(const uint8_t* block, const Q8KBlock& a, __m128i scale_bytes) {
    const __m512i low_nibble = _mm512_set1_epi8(0x0f);
    // Low half: the low nibbles, as they are; high half: the high nibbles.
    const __m512i nibble_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    const __m512i scales = InBothInt16Halves(_mm512_castsi256_si512(_mm256_cvtepu8_epi32(scale_bytes)));
    const uint8_t* qs = block + (kHasFifthBits ? 48 : 16);
    const __m512i fifth_bits = kHasFifthBits ? Broadcast256(block + 16) : _mm512_setzero_si512();
    // Two sums, groups 0 and 2, 1 and 3: half the chain of dependent vpdpwssd.
    __m512i lanes[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    for (int g = 0; g < 4; ++g) {
      __m512i values = _mm512_and_si512(_mm512_srlv_epi16(Broadcast256(qs + 32 * g), nibble_shift), low_nibble);
      if (kHasFifthBits) {
        const __m512i bit_of_chunks = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * g))),
                                                         _mm256_set1_epi8(static_cast<char>(1 << (2 * g + 1))), 1);
        const __mmask64 top = _mm512_test_epi8_mask(fifth_bits, bit_of_chunks);
        values = _mm512_mask_add_epi8(values, top, values, _mm512_set1_epi8(0x10));
      }
      const __m512i chunk_scales = _mm512_permutexvar_epi32(
          _mm512_inserti64x4(_mm512_set1_epi32(2 * g), _mm256_set1_epi32(2 * g + 1), 1), scales);
      const __m512i products = _mm512_maddubs_epi16(values, Load512(a.q + 64 * g));
      lanes[g % 2] = _mm512_dpwssd_epi32(lanes[g % 2], products, chunk_scales);
    }
    return FoldChunkPairs(_mm512_add_epi32(lanes[0], lanes[1]));
  }
};
using Q4_KFormat = ScaledMinFormat<144, false>;
using Q5_KFormat = ScaledMinFormat<176, true>;

// Q6_K: ql[128], qh[64], int8 scales[16] (one per 16 elements), f16 d.
// Chunk 4h + k takes its low 4 bits from ql[64h + 32(k & 1)..] (low nibbles
// for k < 2, high otherwise) and its top 2 bits from bits 2k, 2k + 1 of
// qh[32h..]; value q - 32. Chunks 4h and 4h + 1 are thus the low nibbles of
// the 64 bytes ql[64h..], chunks 4h + 2 and 4h + 3 their high nibbles.
struct Q6_KFormat {
  static constexpr int64_t kBlockBytes = 210;
  static constexpr bool kHasMins = false;
  static constexpr bool kOneTotalPerSuperBlock = false;
  static constexpr int64_t kDOffset = 208;

  // The activations as LaneSums takes them: Q8_K's blocks as they are.
  [[gnu::always_inline]] static const Q8KBlock& Prepare(const Q8KBlock& a) { return a; }

  [[gnu::always_inline]] static __m256i LaneSums(const uint8_t* block, const Q8KBlock& a, __m128i /*scale_bytes*/) {
    const __m512i low_nibble = _mm512_set1_epi8(0x0f);
    const __m512i top_bits = _mm512_set1_epi8(0x30);
    const __m512i bias = _mm512_set1_epi8(32);
    // Shifts that bring a chunk pair's two qh bits to bits 4 and 5: the
    // first pair shifts left by 4 and 2, the second right by 0 and 2.
    const __m512i first_pair_shift = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i second_pair_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    // Chunk pair p (chunks 2p, 2p + 1) covers scales 4p..4p + 3, one per
    // 128-bit quarter.
    const __m512i scales =
        InBothInt16Halves(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192))));
    __m512i lanes[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = Load512(block + 64 * h);
      const __m512i qh = Broadcast256(block + 128 + 32 * h);
      for (int pair = 0; pair < 2; ++pair) {
        const __m512i low = _mm512_and_si512(pair == 0 ? ql : _mm512_srli_epi16(ql, 4), low_nibble);
        const __m512i top = _mm512_and_si512(
            pair == 0 ? _mm512_sllv_epi16(qh, first_pair_shift) : _mm512_srlv_epi16(qh, second_pair_shift), top_bits);
        const __m512i biased = _mm512_or_si512(low, top);  // q + 32, in 0..63
        const __m512i q = Load512(a.q + 128 * h + 64 * pair);
        const __m512i products = _mm512_sub_epi16(_mm512_maddubs_epi16(biased, q), _mm512_maddubs_epi16(bias, q));
        const int p = 2 * h + pair;
        const __m512i quarter_scales = _mm512_permutexvar_epi32(
            _mm512_setr_epi32(4 * p, 4 * p, 4 * p, 4 * p, 4 * p + 1, 4 * p + 1, 4 * p + 1, 4 * p + 1, 4 * p + 2,
                              4 * p + 2, 4 * p + 2, 4 * p + 2, 4 * p + 3, 4 * p + 3, 4 * p + 3, 4 * p + 3),
            scales);
        lanes[pair] = _mm512_dpwssd_epi32(lanes[pair], products, quarter_scales);
      }
    }
    return FoldChunkPairs(_mm512_add_epi32(lanes[0], lanes[1]));
  }
};

// CpuNumerics::kFast's lane sums (KQuantGemmSubBlockSumsAvx512Vnni.cpp's):
// lane l holds sub-block l's products summed as one integer times its scale
// (Q6_K: sub-blocks l and 8 + l), and the eight lanes are then added as one
// integer per super-block (kOneTotalPerSuperBlock), so that one-token steps
// give the fast GEMM's bits. vpdpbusd sums each chunk pair's products in 16
// lanes of four; a transposing tree of adds then brings each sub-block's
// lanes together.

// Lanes 0..7 and 8..15 of v added.
__m256i AddHalves(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// Q5_K (and Q4_K, which StepQ4_KFormat computes by another route): z[g]
// holds chunk 2g in its low half and 2g + 1 in its high half, so quarter q
// of z[g] is half q % 2 of chunk 2g + q / 2. Q5_K keeps this route: its fifth
// bits would cost the steps' route more than the tree.
template <int64_t kBlockBytesOf, bool kHasFifthBits>
struct SubBlockScaledMinFormat {
  static constexpr int64_t kBlockBytes = kBlockBytesOf;
  static constexpr bool kHasMins = true;
  static constexpr bool kOneTotalPerSuperBlock = true;
  static constexpr int64_t kDOffset = 0;

  // The activations as LaneSums takes them: Q8_K's blocks as they are.
  [[gnu::always_inline]] static const Q8KBlock& Prepare(const Q8KBlock& a) { return a; }

  [[gnu::always_inline]] static __m256i LaneSums(const uint8_t* block, const Q8KBlock& a, __m128i scale_bytes) {
    const __m512i low_nibble = _mm512_set1_epi8(0x0f);
    const __m512i nibble_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    const uint8_t* qs = block + (kHasFifthBits ? 48 : 16);
    const __m512i fifth_bits = kHasFifthBits ? Broadcast256(block + 16) : _mm512_setzero_si512();
    __m512i z[4];
    for (int g = 0; g < 4; ++g) {
      __m512i values = _mm512_and_si512(_mm512_srlv_epi16(Broadcast256(qs + 32 * g), nibble_shift), low_nibble);
      if (kHasFifthBits) {
        const __m512i bit_of_chunks = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * g))),
                                                         _mm256_set1_epi8(static_cast<char>(1 << (2 * g + 1))), 1);
        const __mmask64 top = _mm512_test_epi8_mask(fifth_bits, bit_of_chunks);
        values = _mm512_mask_add_epi8(values, top, values, _mm512_set1_epi8(0x10));
      }
      z[g] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), values, Load512(a.q + 64 * g));
    }
    // Lane 4q + g of the quarter sums is half q % 2 of chunk 2g + q / 2;
    // chunk c = 2g + h is lanes 8h + g and 8h + 4 + g.
    const __m512i quarters = QuarterSums(z[0], z[1], z[2], z[3]);
    const __m512i halves = _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15), quarters);
    const __m256i chunk_sums = AddHalves(halves);
    return _mm256_mullo_epi32(chunk_sums, _mm256_cvtepu8_epi32(scale_bytes));
  }
};

// Per-lane values of the eight 32-byte steps of a super-block, two steps to
// a zmm (KQuantGemmSubBlockSumsAvx512Vnni.cpp's layout): entry 16p + j is
// lane j % 8 of step 2p + j / 8.
template <class LaneValue>
constexpr std::array<int32_t, 64> StepLanes(LaneValue value) {
  std::array<int32_t, 64> lanes{};
  for (int j = 0; j < 64; ++j) lanes[j] = value(2 * (j / 16) + (j % 16) / 8, j % 8);
  return lanes;
}

__m512i LoadStepPair(const std::array<int32_t, 64>& lanes, int pair) {
  return _mm512_loadu_si512(lanes.data() + 16 * pair);
}

// Q4_K with one token: SubBlockScaledMinFormat's integers by the GEMM's
// route. The token's activations go into steps once per super-block (step
// s, lane l: chunk l's dword s), shared by the rows DotKFourRows takes
// together; a row's nibbles go into the same steps by vpermt2d, so each
// vpdpbusd adds four products of one chunk to that chunk's lane, and no
// transposing tree is needed.
struct StepQ4_KFormat {
  static constexpr int64_t kBlockBytes = 144;
  static constexpr bool kHasMins = true;
  static constexpr bool kOneTotalPerSuperBlock = true;
  static constexpr int64_t kDOffset = 0;

  struct Steps {
    __m512i pairs[4];  // steps 2p and 2p + 1
  };

  // q's 64 dwords into steps: dword 8l + s to step s, lane l. Lanes from
  // dwords 0..31 come from the first two vectors, the others from the last
  // two, by the same indices modulo 32.
  [[gnu::always_inline]] static Steps Prepare(const Q8KBlock& a) {
    static constexpr std::array<int32_t, 64> kDwords = StepLanes([](int s, int l) { return (8 * l + s) & 31; });
    const __m512i q[4] = {Load512(a.q), Load512(a.q + 64), Load512(a.q + 128), Load512(a.q + 192)};
    Steps steps;
    for (int p = 0; p < 4; ++p) {
      const __m512i index = LoadStepPair(kDwords, p);
      // Lanes 4..7 of each step (chunks 4..7) lie in the upper dwords.
      steps.pairs[p] = _mm512_mask_blend_epi32(0xf0f0, _mm512_permutex2var_epi32(q[0], index, q[1]),
                                               _mm512_permutex2var_epi32(q[2], index, q[3]));
    }
    return steps;
  }

  [[gnu::always_inline]] static __m256i LaneSums(const uint8_t* block, const Steps& a, __m128i scale_bytes) {
    // Step s, lane l: chunk l's dword s, nibble l % 2 of qs' dword 8(l / 2) + s.
    static constexpr std::array<int32_t, 64> kPackedDwords = StepLanes([](int s, int l) { return 8 * (l / 2) + s; });
    static constexpr std::array<int32_t, 64> kNibbleShifts = StepLanes([](int, int l) { return 4 * (l % 2); });
    const __m512i packed_low = Load512(block + 16);
    const __m512i packed_high = Load512(block + 80);
    const __m512i nibble_shifts = LoadStepPair(kNibbleShifts, 0);
    __m512i sums = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      const __m512i packed = _mm512_permutex2var_epi32(packed_low, LoadStepPair(kPackedDwords, p), packed_high);
      const __m512i values = _mm512_and_si512(_mm512_srlv_epi32(packed, nibble_shifts), _mm512_set1_epi8(0x0f));
      sums = _mm512_dpbusd_epi32(sums, values, a.pairs[p]);
    }
    return _mm256_mullo_epi32(AddHalves(sums), _mm256_cvtepu8_epi32(scale_bytes));
  }
};

// Q6_K: z[p] holds chunks 2p and 2p + 1 (Q6_KFormat's pairs), so quarter q
// of z[p] is the 16-element sub-block 4p + q. The values go in as q + 32
// (unsigned) and 32 times the activations' sums come off.
struct SubBlockQ6_KFormat {
  static constexpr int64_t kBlockBytes = 210;
  static constexpr bool kHasMins = false;
  static constexpr bool kOneTotalPerSuperBlock = true;
  static constexpr int64_t kDOffset = 208;

  // The activations as LaneSums takes them: Q8_K's blocks as they are.
  [[gnu::always_inline]] static const Q8KBlock& Prepare(const Q8KBlock& a) { return a; }

  [[gnu::always_inline]] static __m256i LaneSums(const uint8_t* block, const Q8KBlock& a, __m128i /*scale_bytes*/) {
    const __m512i low_nibble = _mm512_set1_epi8(0x0f);
    const __m512i top_bits = _mm512_set1_epi8(0x30);
    const __m512i bias = _mm512_set1_epi8(32);
    const __m512i first_pair_shift = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i second_pair_shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    __m512i z[4];
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = Load512(block + 64 * h);
      const __m512i qh = Broadcast256(block + 128 + 32 * h);
      for (int pair = 0; pair < 2; ++pair) {
        const __m512i low = _mm512_and_si512(pair == 0 ? ql : _mm512_srli_epi16(ql, 4), low_nibble);
        const __m512i top = _mm512_and_si512(
            pair == 0 ? _mm512_sllv_epi16(qh, first_pair_shift) : _mm512_srlv_epi16(qh, second_pair_shift), top_bits);
        const __m512i biased = _mm512_or_si512(low, top);  // q + 32, in 0..63
        const __m512i q = Load512(a.q + 128 * h + 64 * pair);
        z[2 * h + pair] = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), biased, q),
                                           _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, q));
      }
    }
    // Lane 4q + p of the quarter sums is sub-block 4p + q: scale them there,
    // then lane l takes sub-blocks l and 8 + l.
    const __m512i sub_block_sums = QuarterSums(z[0], z[1], z[2], z[3]);
    const __m512i scales = _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 192))));
    const __m512i scaled = _mm512_mullo_epi32(sub_block_sums, scales);
    // Sub-block s = 4p + q sits in lane 4(s % 4) + s / 4.
    const __m512i by_lane = _mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), scaled);
    return AddHalves(by_lane);
  }
};

// One row's running sums: DotKernelsAvx2.cpp's float steps, one for one, or
// under kOneTotalPerSuperBlock one float sum of the super-blocks' totals.
struct RowSums {
  __m256 acc = _mm256_setzero_ps();
  float total = 0.0f;
  float offset = 0.0f;
};

// The eight int32 lanes added (exact in any order).
int32_t LaneTotal(__m256i lanes) {
  return Int32LaneSum(_mm_add_epi32(_mm256_castsi256_si128(lanes), _mm256_extracti128_si256(lanes, 1)));
}

// Four rows' lanes added row by row: row r's total in lane r.
__m128i LaneTotals(const __m256i lanes[4]) {
  const __m256i pairs = _mm256_hadd_epi32(_mm256_hadd_epi32(lanes[0], lanes[1]), _mm256_hadd_epi32(lanes[2], lanes[3]));
  return _mm_add_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
}

// Inlined by force: GCC otherwise calls it per super-block, passing the
// sums through memory, which costs as much as the arithmetic.
template <class Format>
[[gnu::always_inline]] inline void AddSuperBlock(const uint8_t* block, const Q8KBlock& a, RowSums& sums) {
  __m128i scale_bytes = _mm_setzero_si128();
  int32_t min_sum = 0;
  if (Format::kHasMins) {
    const KScalesAndMinsBytes unpacked = UnpackKScalesAndMinsBytes(block + 4);
    scale_bytes = _mm_cvtsi64_si128(static_cast<int64_t>(unpacked.scales));
    min_sum = MinSum(unpacked.mins, a.sums32);
  }
  const __m256i lanes = Format::LaneSums(block, Format::Prepare(a), scale_bytes);
  const float d = LoadHalf(block + Format::kDOffset) * a.scale;
  if constexpr (Format::kOneTotalPerSuperBlock) {
    sums.total = __builtin_fmaf(d, static_cast<float>(LaneTotal(lanes)), sums.total);
  } else {
    sums.acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(lanes), sums.acc);
  }
  if (Format::kHasMins) {
    const float dmin = LoadHalf(block + 2) * a.scale;
    sums.offset = __builtin_fmaf(-dmin, static_cast<float>(min_sum), sums.offset);
  }
}

template <class Format>
float Result(const RowSums& sums) {
  const float sum = Format::kOneTotalPerSuperBlock ? sums.total : FoldLanes(sums.acc);
  return Format::kHasMins ? sum + sums.offset : sum;
}

template <class Format>
float DotK(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  const auto* activations = static_cast<const Q8KBlock*>(activation_row);
  RowSums sums;
  for (int64_t b = 0; b < cols / 256; ++b) {
    AddSuperBlock<Format>(weight_row + b * Format::kBlockBytes, activations[b], sums);
  }
  return Result<Format>(sums);
}

// What four rows' super-blocks need beside their values, unpacked together:
// the per-row scalar work of AddSuperBlock (the 6-bit scales and mins, the
// sum of min * bsum, the f16 factors) in the lanes of one vector.
struct FourRowFactors {
  __m128 d = _mm_setzero_ps();           // row r's d times the activations' scale
  __m128 dmin = _mm_setzero_ps();        // likewise dmin (Q4_K / Q5_K)
  __m128i min_sums = _mm_setzero_si128();  // row r's sum of min * bsum (Q4_K / Q5_K)
  __m128i scale_bytes[4] = {};           // row r's sub-block scales in the low 8 bytes (Q4_K / Q5_K)
};

// The 32-bit words at `offset` of the four blocks, block r in lane r.
__m128i GatherWords(const uint8_t* const blocks[4], int64_t offset) {
  return _mm_setr_epi32(static_cast<int32_t>(LoadWord(blocks[0] + offset)),
                        static_cast<int32_t>(LoadWord(blocks[1] + offset)),
                        static_cast<int32_t>(LoadWord(blocks[2] + offset)),
                        static_cast<int32_t>(LoadWord(blocks[3] + offset)));
}

template <class Format>
[[gnu::always_inline]] inline FourRowFactors FactorsOfFourRows(const uint8_t* const blocks[4], const Q8KBlock& a) {
  FourRowFactors f;
  const __m128 activation_scale = _mm_set1_ps(a.scale);
  if constexpr (!Format::kHasMins) {
    uint16_t d[4];
    for (int r = 0; r < 4; ++r) std::memcpy(&d[r], blocks[r] + Format::kDOffset, sizeof d[r]);
    f.d = _mm_mul_ps(_mm_cvtph_ps(_mm_setr_epi16(static_cast<int16_t>(d[0]), static_cast<int16_t>(d[1]),
                                                 static_cast<int16_t>(d[2]), static_cast<int16_t>(d[3]), 0, 0, 0, 0)),
                     activation_scale);
    return f;
  } else {
    // d, dmin of row r in halves 2r, 2r + 1.
    const __m256 factors = _mm256_permutexvar_ps(_mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7),
                                                 _mm256_cvtph_ps(GatherWords(blocks, 0)));
    f.d = _mm_mul_ps(_mm256_castps256_ps128(factors), activation_scale);
    f.dmin = _mm_mul_ps(_mm256_extractf128_ps(factors, 1), activation_scale);
    // UnpackKScalesAndMinsBytes (DotKernels.h), a row per lane.
    const __m128i w0 = GatherWords(blocks, 4), w1 = GatherWords(blocks, 8), w2 = GatherWords(blocks, 12);
    const __m128i six_bits = _mm_set1_epi32(0x3f3f3f3f), low_nibbles = _mm_set1_epi32(0x0f0f0f0f);
    const __m128i two_bits = _mm_set1_epi32(0x03030303);
    const __m128i scales_low = _mm_and_si128(w0, six_bits);
    const __m128i mins_low = _mm_and_si128(w1, six_bits);
    const __m128i scales_high = _mm_or_si128(_mm_and_si128(w2, low_nibbles),
                                             _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(w0, 6), two_bits), 4));
    const __m128i mins_high = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(w2, 4), low_nibbles),
                                           _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(w1, 6), two_bits), 4));
    // Rows 0 and 1's eight bytes, then rows 2 and 3's.
    const __m128i scales01 = _mm_unpacklo_epi32(scales_low, scales_high);
    const __m128i scales23 = _mm_unpackhi_epi32(scales_low, scales_high);
    f.scale_bytes[0] = scales01;
    f.scale_bytes[1] = _mm_unpackhi_epi64(scales01, scales01);
    f.scale_bytes[2] = scales23;
    f.scale_bytes[3] = _mm_unpackhi_epi64(scales23, scales23);
    // MinSum, two rows per 256 bits: row 2k's pair sums in the low half,
    // 2k + 1's in the high half; two horizontal adds leave row r's sum in
    // lane r of the halves' order, which the permute puts in order.
    const __m256i bsums = _mm256_broadcastsi128_si256(
        _mm_packs_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.sums32)),
                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.sums32 + 4))));
    const __m256i products01 = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi32(mins_low, mins_high)), bsums);
    const __m256i products23 = _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi32(mins_low, mins_high)), bsums);
    const __m256i pairs = _mm256_hadd_epi32(products01, products23);
    const __m256i totals = _mm256_hadd_epi32(pairs, pairs);
    f.min_sums = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(totals, _mm256_setr_epi32(0, 4, 1, 5, 0, 0, 0, 0)));
    return f;
  }
}

// DotK for four consecutive weight rows (row r at first + r * row_bytes):
// each row takes exactly DotK's operations in its order; the rows' scalar
// steps (scales, mins, factors, offsets) go four to a vector, and the
// activations are loaded once for the four. Each super-block asks for the
// same super-block of the four rows from `ahead` on.
template <class Format>
[[gnu::always_inline]] inline void DotKFourRows(const uint8_t* first, int64_t row_bytes, const Q8KBlock* activations,
                                                int64_t cols, float* out, const uint8_t* ahead) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  __m128 totals = _mm_setzero_ps();  // kOneTotalPerSuperBlock: row r in lane r
  __m128 offsets = _mm_setzero_ps();
  for (int64_t b = 0; b < cols / 256; ++b) {
    const uint8_t* blocks[4];
    for (int r = 0; r < 4; ++r) {
      blocks[r] = first + r * row_bytes + b * Format::kBlockBytes;
      PrefetchLinesToL2(ahead + r * row_bytes + b * Format::kBlockBytes, Format::kBlockBytes);
    }
    const FourRowFactors f = FactorsOfFourRows<Format>(blocks, activations[b]);
    decltype(auto) prepared = Format::Prepare(activations[b]);
    if constexpr (Format::kOneTotalPerSuperBlock) {
      __m256i lanes[4];
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) lanes[r] = Format::LaneSums(blocks[r], prepared, f.scale_bytes[r]);
      totals = _mm_fmadd_ps(f.d, _mm_cvtepi32_ps(LaneTotals(lanes)), totals);
    } else {
      alignas(16) float d[4];
      _mm_store_ps(d, f.d);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m256i lanes = Format::LaneSums(blocks[r], prepared, f.scale_bytes[r]);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d[r]), _mm256_cvtepi32_ps(lanes), acc[r]);
      }
    }
    // -(dmin * x) + offset in one rounding: AddSuperBlock's fma(-dmin, ...).
    if (Format::kHasMins) offsets = _mm_fnmadd_ps(f.dmin, _mm_cvtepi32_ps(f.min_sums), offsets);
  }
  alignas(16) float offset_of[4];
  alignas(16) float total_of[4];
  _mm_store_ps(offset_of, offsets);
  _mm_store_ps(total_of, totals);
  for (int r = 0; r < 4; ++r) {
    const float sum = Format::kOneTotalPerSuperBlock ? total_of[r] : FoldLanes(acc[r]);
    out[r] = Format::kHasMins ? sum + offset_of[r] : sum;
  }
}

// DotK for consecutive weight rows against one activation row (a decode
// GEMV), four rows at once (DotKFourRows), the last one to three alone.
//
// While four rows are computed, the four after the next four are asked for,
// a super-block at a time. A decode reads every weight once, from memory, and
// the hardware prefetchers alone keep too few lines in flight for it:
// Qwen2.5-1.5B Q4_K_M's decode read its weights at 19 GB/s without
// prefetching and at 48 GB/s (the machine's measured read bandwidth, 2
// threads, Zen 5) with the next rows asked for. On Zen 4 the four rows' lines
// asked for all at once, into L1, held Q4_K GEMVs to 17-27 GB/s and Q6_K's to
// 17-19; a super-block at a time, into L2, they read at 33-46 GB/s
// (`kvjit_cpu_kernel_bench stream`, docs/benchmarks.md, "Prefetching into L2").
template <class Format>
void DotKRows(const uint8_t* weights, int64_t row_bytes, int64_t rows, const void* activation_row, int64_t cols,
              float* out) {
  const auto* activations = static_cast<const Q8KBlock*>(activation_row);
  WalkRowsByFours(
      weights, row_bytes, rows,
      [&](const uint8_t* first, const uint8_t* ahead, int64_t r) {
        DotKFourRows<Format>(first, row_bytes, activations, cols, out + r, ahead);
      },
      [&](const uint8_t* row, int64_t r) { out[r] = DotK<Format>(row, activation_row, cols); });
}

}  // namespace

const KQuantDotKernels& Avx512VnniKQuantDotKernels() {
  static constexpr KQuantDotKernels kKernels = {DotK<Q4_KFormat>, DotK<Q5_KFormat>, DotK<Q6_KFormat>};
  return kKernels;
}

const KQuantRowsDotKernels& Avx512VnniKQuantRowsDotKernels() {
  static constexpr KQuantRowsDotKernels kKernels = {DotKRows<Q4_KFormat>, DotKRows<Q5_KFormat>, DotKRows<Q6_KFormat>};
  return kKernels;
}

const KQuantDotKernels& Avx512VnniKQuantSubBlockSumDotKernels() {
  static constexpr KQuantDotKernels kKernels = {DotK<StepQ4_KFormat>,
                                                DotK<SubBlockScaledMinFormat<176, true>>, DotK<SubBlockQ6_KFormat>};
  return kKernels;
}

const KQuantRowsDotKernels& Avx512VnniKQuantSubBlockSumRowsDotKernels() {
  static constexpr KQuantRowsDotKernels kKernels = {DotKRows<StepQ4_KFormat>,
                                                    DotKRows<SubBlockScaledMinFormat<176, true>>,
                                                    DotKRows<SubBlockQ6_KFormat>};
  return kKernels;
}

}  // namespace kvjit::cpu::internal
