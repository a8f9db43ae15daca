// The K-quant GEMM of CpuNumerics::kFast (BlockGemm.h): each weight
// sub-block's products against a token summed as one integer before its
// scale, in AVX-512 BW/VL/VNNI.
//
// The batch-invariant GEMM (KQuantGemmAvx512Vnni.cpp) keeps ggml's lanes: a
// lane holds elements 4m..4m+3 of every 32-element chunk, so each chunk's
// sub-block scale must be applied per pair of products (vpmaddubsw, then
// vpdpwssd with the scales: two instructions per 64 multiply-adds). Here a
// lane holds one whole sub-block (Q4_K / Q5_K: a 32-element chunk; Q6_K: a
// 16-element sub-block), so vpdpbusd sums its products in one instruction
// per 64 multiply-adds, and the scale is one vpmulld per lane and
// super-block. The weights and activations are laid out in "steps" for it:
// step s holds, in lane l, the four bytes of sub-block l that its s-th
// vpdpbusd takes.
//
// The float steps: per (row, token) and super-block, the scaled sub-block
// sums added as one integer (a transposing tree over the tile's lanes, exact
// in any order), then acc = fma(d * d_x, float(total), acc), the mins as the
// batch-invariant kernel takes them, and acc + offset at the end: one float
// multiply-add per super-block, as llama.cpp's repacked Q4_K GEMV takes it
// (its GEMM takes one per 64 elements; docs/numerics.md, "The fast CPU
// numerics"). On Zen 4 the tree (21
// shuffles and adds per four rows and four tokens) costs about what eight
// lanes' float steps did (24 conversions, multiplies and fmas); the
// single-row kernels save more, one fma per row and super-block instead of
// eight lanes' and a fold.
//
// Same linkage rule as DotKernels.h: only the entry point is external.

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "KQuantGemmSubBlockSumsAvx512Vnni.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

#include <immintrin.h>

#include <array>
#include <cstring>

#include "runtime/cpu/Avx512LaneSums.h"
#include "runtime/cpu/BlockGemm.h"
#include "runtime/cpu/KQuantGemmParts.h"
#include "runtime/cpu/Prefetch.h"

namespace kvjit::cpu::internal {
namespace {

using namespace kquant_gemm;

constexpr int kSteps = 8;  // vpdpbusd steps per super-block, 32 bytes each

// Per tile (4 rows) and super-block: each row's steps (row r, step s at
// 32 * (8r + s)), its sub-block scales as int32 lanes per set of sub-blocks
// (row r, set k at 32 * (2r + k)), the rows' d (row r in lanes 4r..4r + 3,
// beside the panel's token scales), Q6_K's lane-sum starts (as the scales),
// then the mins and dmin as KQuantGemmParts.h lays them out.
constexpr int64_t kTileValues = 0;
constexpr int64_t kTileScales = kTileValues + kTileRows * kSteps * 32;
constexpr int64_t kTileD = kTileScales + kTileRows * 2 * 32;
constexpr int64_t kTileStarts = kTileD + 64;
constexpr int64_t kTileMins = kTileStarts + kTileRows * 2 * 32;
constexpr int64_t kTileDmin = kTileMins + kTileMinBytes;
constexpr int64_t kTileBlockBytes = kTileDmin + 64;
static_assert(kTileBlockBytes % 64 == 0, "blocks stay 64-byte aligned");

// Per-lane values for the eight steps, two steps to a zmm: entry 16p + j is
// lane j % 8 of step 2p + j / 8.
template <class LaneValue>
constexpr std::array<int32_t, 64> StepLanes(LaneValue value) {
  std::array<int32_t, 64> lanes{};
  for (int j = 0; j < 64; ++j) lanes[j] = value(2 * (j / 16) + (j % 16) / 8, j % 8);
  return lanes;
}

// Steps s and s + 1 of a StepLanes table.
__m512i LoadStepPair(const std::array<int32_t, 64>& lanes, int s) { return _mm512_loadu_si512(lanes.data() + 8 * s); }

void Store512(uint8_t* p, __m512i v) { _mm512_store_si512(reinterpret_cast<__m512i*>(p), v); }

void StoreTileD(float d, int64_t r, uint8_t* out) {
  _mm_store_ps(reinterpret_cast<float*>(out + kTileD) + 4 * r, _mm_set1_ps(d));
}

// Q4_K and Q5_K: lane l is 32-element chunk l (one sub-block). Step s, lane
// l: the chunk's dword s. The nibbles of chunk 2g + h are nibble h of qs'
// bytes 32g.., and Q5_K's fifth bits of chunk l are bit l of qh's bytes.
template <int64_t kBlockBytesOf, bool kHasFifthBits>
struct ScaledMinFormat {
  static constexpr int64_t kBlockBytes = kBlockBytesOf;
  static constexpr bool kSignedWeights = false;
  static constexpr int kSets = 1;  // one set of 8 sub-blocks, 8 steps each
  // The activation dword step s of lane l takes (Q8_K's q as 64 dwords).
  static constexpr int ActivationDword(int s, int l) { return 8 * l + s; }

  __attribute__((always_inline)) static void Unpack(const uint8_t* block, int64_t r, uint8_t* out) {
    const KScalesAndMinsBytes scales_and_mins = UnpackKScalesAndMinsBytes(block + 4);
    StoreTileMinPairs(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(scales_and_mins.mins))),
                      LoadHalf(block + 2), r, out + kTileMins, out + kTileDmin);
    StoreTileD(LoadHalf(block), r, out);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + kTileScales + 64 * r),
                       _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<int64_t>(scales_and_mins.scales))));
    const uint8_t* qs = block + (kHasFifthBits ? 48 : 16);
    const __m512i packed_low = _mm512_loadu_si512(qs);
    const __m512i packed_high = _mm512_loadu_si512(qs + 64);
    static constexpr std::array<int32_t, 64> kPackedDwords =
        StepLanes([](int s, int l) { return 8 * (l / 2) + s; });
    static constexpr std::array<int32_t, 64> kNibbleShifts = StepLanes([](int, int l) { return 4 * (l % 2); });
    static constexpr std::array<int32_t, 64> kFifthBitDwords = StepLanes([](int s, int) { return s; });
    static constexpr std::array<int32_t, 64> kFifthBitShifts = StepLanes([](int, int l) { return l; });
    const __m512i nibble_shifts = LoadStepPair(kNibbleShifts, 0);
    const __m512i fifth_shifts = LoadStepPair(kFifthBitShifts, 0);
    const __m512i fifth_bits = kHasFifthBits ? _mm512_broadcast_i64x4(Load256(block + 16)) : _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int s = 0; s < kSteps; s += 2) {
      const __m512i packed = _mm512_permutex2var_epi32(packed_low, LoadStepPair(kPackedDwords, s), packed_high);
      __m512i values = _mm512_and_si512(_mm512_srlv_epi32(packed, nibble_shifts), _mm512_set1_epi8(0x0f));
      if (kHasFifthBits) {
        const __m512i bits = _mm512_permutexvar_epi32(LoadStepPair(kFifthBitDwords, s), fifth_bits);
        const __m512i fifth = _mm512_and_si512(_mm512_srlv_epi32(bits, fifth_shifts), _mm512_set1_epi8(1));
        values = _mm512_or_si512(values, _mm512_slli_epi32(fifth, 4));
      }
      Store512(out + kTileValues + 32 * (kSteps * r + s), values);
    }
  }
};
using Q4_KFormat = ScaledMinFormat<144, false>;
using Q5_KFormat = ScaledMinFormat<176, true>;

// Q6_K: ql[128], qh[64], int8 scales[16] (one per 16 elements), f16 d.
// Set k holds sub-blocks 8k..8k + 7 (elements 128k..), lane l sub-block
// 8k + l; its step j (the set's steps are 4k..4k + 3) the sub-block's dword
// j. Sub-block 8k + l is half l % 2 of chunk 4k + l / 2, whose low 4 bits
// are in ql[64k + 32((l / 2) & 1)..] (low nibbles for l / 2 < 2, high
// otherwise) and top 2 bits in bits 2(l / 2), 2(l / 2) + 1 of qh[32k..].
struct Q6_KFormat {
  static constexpr int64_t kBlockBytes = 210;
  static constexpr bool kSignedWeights = true;
  static constexpr int kSets = 2;
  static constexpr int ActivationDword(int s, int l) { return 32 * (s / 4) + 4 * l + s % 4; }

  __attribute__((always_inline)) static void Unpack(const uint8_t* block, int64_t r, uint8_t* out) {
    StoreTileD(LoadHalf(block + 208), r, out);
    // Within a set, step j's tables are those of step j (the sets' bytes lie
    // alike at 64k and 128 + 32k).
    static constexpr std::array<int32_t, 64> kLowDwords =
        StepLanes([](int j, int l) { return 8 * ((l / 2) & 1) + 4 * (l % 2) + j; });
    static constexpr std::array<int32_t, 64> kLowShifts = StepLanes([](int, int l) { return l / 2 < 2 ? 0 : 4; });
    static constexpr std::array<int32_t, 64> kTopDwords = StepLanes([](int j, int l) { return 4 * (l % 2) + j; });
    static constexpr std::array<int32_t, 64> kTopShifts = StepLanes([](int, int l) { return 2 * (l / 2); });
    const __m512i low_shifts = LoadStepPair(kLowShifts, 0);
    const __m512i top_shifts = LoadStepPair(kTopShifts, 0);
    for (int k = 0; k < 2; ++k) {
      const __m256i scales = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 192 + 8 * k)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + kTileScales + 32 * (2 * r + k)), scales);
      const __m512i ql = _mm512_loadu_si512(block + 64 * k);
      const __m512i qh = _mm512_broadcast_i64x4(Load256(block + 128 + 32 * k));
      __m512i weight_sums = _mm512_setzero_si512();
#pragma GCC unroll 2
      for (int j = 0; j < 4; j += 2) {
        const __m512i low = _mm512_and_si512(
            _mm512_srlv_epi32(
                _mm512_permutexvar_epi32(LoadStepPair(kLowDwords, j), ql),
                low_shifts),
            _mm512_set1_epi8(0x0f));
        const __m512i top = _mm512_and_si512(
            _mm512_srlv_epi32(
                _mm512_permutexvar_epi32(LoadStepPair(kTopDwords, j), qh),
                top_shifts),
            _mm512_set1_epi8(3));
        const __m512i values =
            _mm512_sub_epi8(_mm512_or_si512(low, _mm512_slli_epi32(top, 4)), _mm512_set1_epi8(32));
        weight_sums = _mm512_dpbusd_epi32(weight_sums, _mm512_set1_epi8(1), values);
        Store512(out + kTileValues + 32 * (kSteps * r + 4 * k + j), values);
      }
      // The activations go in as a + 128, so each lane starts from -128
      // times its sub-block's weight sum (both steps' halves added).
      const __m256i sums = _mm256_add_epi32(_mm512_castsi512_si256(weight_sums), _mm512_extracti64x4_epi64(weight_sums, 1));
      _mm256_store_si256(reinterpret_cast<__m256i*>(out + kTileStarts + 32 * (2 * r + k)),
                         _mm256_mullo_epi32(sums, _mm256_set1_epi32(-128)));
    }
  }
};

template <class Format>
void ZeroTileRow(int64_t r, uint8_t* out) {
  std::memset(out + kTileValues + 32 * kSteps * r, 0, 32 * kSteps);
  std::memset(out + kTileScales + 64 * r, 0, 64);
  std::memset(out + kTileStarts + 64 * r, 0, 64);
  StoreTileD(0.0f, r, out);
  ZeroTileMins(r, out + kTileMins, out + kTileDmin);
}

// Unpacks `count` (at most 4) rows from `rows` into the tile; the rest of its
// four are zeros.
template <class Format>
void UnpackTile(const uint8_t* rows, int64_t row_bytes, int64_t count, int64_t blocks, uint8_t* tile) {
  for (int64_t r = 0; r < kTileRows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* out = tile + b * kTileBlockBytes;
      if (r < count) {
        Format::Unpack(rows + r * row_bytes + b * Format::kBlockBytes, r, out);
      } else {
        ZeroTileRow<Format>(r, out);
      }
    }
  }
}

// The float sums of the tile's four rows against one token group: row r,
// token t in lane 4r + t of both.
struct TokenSums {
  __m512 acc;
  __m512 offsets;

  static TokenSums Zero() { return {_mm512_setzero_ps(), _mm512_setzero_ps()}; }

  template <bool kHasMins>
  void Fold(float results[4][4]) const {
    alignas(64) float sums[16];
    _mm512_store_ps(sums, kHasMins ? _mm512_add_ps(acc, offsets) : acc);
    for (int r = 0; r < 4; ++r) {
      for (int t = 0; t < 4; ++t) results[r][t] = sums[4 * r + t];
    }
  }
};

// Each (row, token)'s eight scaled sub-block lanes added: lanes[r][pair]
// holds tokens 2 * pair (low half) and 2 * pair + 1 (high half); the total of
// row r, token t comes out in lane 4r + t. Quarter q of lanes[r][pair] is
// token 2 * pair + q / 2, so the quarter sums of rows 2h and 2h + 1 (lane
// 4q + 2(r % 2) + pair of half h's vector) leave each total in two lanes,
// which the last step adds.
__attribute__((always_inline)) inline __m512i RowTokenTotals(const __m512i lanes[4][2]) {
  const __m512i rows01 = QuarterSums(lanes[0][0], lanes[0][1], lanes[1][0], lanes[1][1]);
  const __m512i rows23 = QuarterSums(lanes[2][0], lanes[2][1], lanes[3][0], lanes[3][1]);
  static constexpr auto kFirstQuarters = [] {
    std::array<int32_t, 16> index{};
    for (int r = 0; r < 4; ++r) {
      for (int t = 0; t < 4; ++t) index[4 * r + t] = 16 * (r / 2) + 8 * (t % 2) + 2 * (r % 2) + t / 2;
    }
    return index;
  }();
  static constexpr auto kSecondQuarters = [] {
    std::array<int32_t, 16> index = kFirstQuarters;
    for (int32_t& i : index) i += 4;
    return index;
  }();
  return _mm512_add_epi32(_mm512_permutex2var_epi32(rows01, _mm512_loadu_si512(kFirstQuarters.data()), rows23),
                          _mm512_permutex2var_epi32(rows01, _mm512_loadu_si512(kSecondQuarters.data()), rows23));
}

// One super-block's scaled lanes (tile block w, panel block p) into the
// float sums: acc += d * d_x * total, and the mins into the offsets.
template <class Format>
__attribute__((always_inline)) inline void AddSuperBlock(const __m512i lanes[4][2], const uint8_t* w, const uint8_t* p,
                                                         TokenSums& sums) {
  const __m512 scale = _mm512_mul_ps(_mm512_load_ps(w + kTileD), _mm512_load_ps(p + kPanelTokenScales));
  sums.acc = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(RowTokenTotals(lanes)), sums.acc);
  if (!Format::kSignedWeights) AccumulateMins(w + kTileMins, w + kTileDmin, p, sums.offsets);
}

// The tile's four rows against one token group over super-blocks
// block_begin..block_end - 1, continuing `sums` in block order.
//
// A super-block's float steps wait for its last vpdpbusd; placed after them
// they stall the steps of the next, whose instructions queue behind them.
// So each super-block's scaled lanes are held ("pending") and added after the
// next super-block's vpdpbusd steps have been issued: 4 rows x 4 tokens of
// Q4_K took 102 cycles per super-block in order and 93 so (Q5_K 109 -> 95,
// Q6_K 120 -> 115), against 64 for its vpdpbusd alone. The order of the
// float sums is unchanged.
template <class Format>
void MicroKernel(const uint8_t* tile, const uint8_t* panel, int64_t block_begin, int64_t block_end, TokenSums& sums) {
  constexpr int kStepsPerSet = kSteps / Format::kSets;
  TokenSums running = sums;
  __m512i pending[4][2];
  const uint8_t* pending_w = nullptr;
  const uint8_t* pending_p = nullptr;
  for (int64_t b = block_begin; b < block_end; ++b) {
    const uint8_t* p = panel + b * kPanelBlockBytes;
    const uint8_t* w = tile + b * kTileBlockBytes;
    __m512i lanes[4][2];
#pragma GCC unroll 2
    for (int k = 0; k < Format::kSets; ++k) {
      __m512i sub_block_sums[4][2];
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        sub_block_sums[r][0] = sub_block_sums[r][1] =
            Format::kSignedWeights ? _mm512_broadcast_i64x4(_mm256_load_si256(
                                         reinterpret_cast<const __m256i*>(w + kTileStarts + 32 * (2 * r + k))))
                                   : _mm512_setzero_si512();
      }
#pragma GCC unroll 8
      for (int j = 0; j < kStepsPerSet; ++j) {
        const int s = kStepsPerSet * k + j;
        const __m512i activations[2] = {_mm512_load_si512(p + kPanelActivations + 128 * s),
                                        _mm512_load_si512(p + kPanelActivations + 128 * s + 64)};
#pragma GCC unroll 4
        for (int r = 0; r < 4; ++r) {
          const __m512i values = _mm512_broadcast_i64x4(
              _mm256_load_si256(reinterpret_cast<const __m256i*>(w + kTileValues + 32 * (kSteps * r + s))));
#pragma GCC unroll 2
          for (int pair = 0; pair < 2; ++pair) {
            sub_block_sums[r][pair] = Format::kSignedWeights
                                          ? _mm512_dpbusd_epi32(sub_block_sums[r][pair], activations[pair], values)
                                          : _mm512_dpbusd_epi32(sub_block_sums[r][pair], values, activations[pair]);
          }
        }
      }
      if (k == Format::kSets - 1 && pending_w != nullptr) AddSuperBlock<Format>(pending, pending_w, pending_p, running);
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m512i scales = _mm512_broadcast_i64x4(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(w + kTileScales + 32 * (2 * r + k))));
#pragma GCC unroll 2
        for (int pair = 0; pair < 2; ++pair) {
          const __m512i scaled = _mm512_mullo_epi32(sub_block_sums[r][pair], scales);
          lanes[r][pair] = k == 0 ? scaled : _mm512_add_epi32(lanes[r][pair], scaled);
        }
      }
    }
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) pending[r][0] = lanes[r][0], pending[r][1] = lanes[r][1];
    pending_w = w;
    pending_p = p;
  }
  if (pending_w != nullptr) AddSuperBlock<Format>(pending, pending_w, pending_p, running);
  sums = running;
}

template <class Format>
constexpr BlockGemmKernel KernelFor() {
  return {kSuperBlock, kPanelBlockBytes, kTileBlockBytes,
          PackActivations<Format::kSignedWeights, Format>,
          Multiply<Format, TokenSums, UnpackTile<Format>, MicroKernel<Format>>};
}

}  // namespace

const KQuantGemmKernels& Avx512VnniKQuantSubBlockSumGemmKernels() {
  static constexpr KQuantGemmKernels kKernels = {KernelFor<Q4_KFormat>(), KernelFor<Q5_KFormat>(),
                                                 KernelFor<Q6_KFormat>()};
  return kKernels;
}

}  // namespace kvjit::cpu::internal
