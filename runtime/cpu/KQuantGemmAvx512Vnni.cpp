// The register-blocked GEMM of BlockGemm.h for the K-quants (Q4_K, Q5_K,
// Q6_K) against Q8_K activations, in AVX-512 BW/VL/VNNI.
//
// DotKernels.h's contract gives every (weight row, token) pair, per 256-element
// super-block, eight exact integer lane sums L_m (lane m: elements 4m..4m+3
// of each 32-element chunk, weighted by the chunk's sub-block scales), then
// acc_m = fma(d, float(L_m), acc_m); the Q4_K / Q5_K mins go to a scalar
// accumulator by fma(-dmin, float(sum of min * bsum), offset). Integers are
// exact in any order, so the kernel forms each L_m its own way and only the
// float steps follow the single-row kernels: the results are theirs bit for
// bit.
//
// A 512-bit register holds two (row, token) pairs: one row's chunk broadcast
// to both halves against two tokens' chunks. Per chunk and pair, vpmaddubsw
// forms 16-bit pair products (at most 2 * 31 * 127 or 2 * 255 * 32 in
// magnitude: no saturation) and vpdpwssd multiplies them by the sub-block
// scales into the int32 lane sums: two instructions for 64 multiply-adds.
// The micro-kernel keeps 4 rows x 4 tokens in flight: eight float
// accumulators and eight integer lane sums.
//
// vpmaddubsw multiplies unsigned bytes by signed ones. Q4_K / Q5_K values are
// unsigned already. Q6_K's are signed (q - 32), so for it the activations go
// unsigned instead, a + 128, and each lane sum starts from -128 * the sum of
// its scaled weights, a per-row term the tile carries.
//
// Same linkage rule as DotKernels.h: only the entry point is external.

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "KQuantGemmAvx512Vnni.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

#include <immintrin.h>

#include <cstring>

#include "runtime/cpu/BlockGemm.h"
#include "runtime/cpu/Prefetch.h"

namespace kvjit::cpu::internal {
namespace {

constexpr int64_t kSuperBlock = 256;
constexpr int kChunks = 8;  // 32-element chunks per super-block

// The micro-kernel's rows: a tile unpacks this many weight rows at a time.
constexpr int64_t kTileRows = 4;
static_assert(kGemmRowGroup % kTileRows == 0, "a thread's row range is whole tiles");

// Per token group and super-block: each chunk's activations (tokens 0 and 1,
// then 2 and 3; Q6_K's as a + 128), the tokens' scales repeated over their
// half's eight lanes (tokens 0 and 1, then 2 and 3), the 32-element sums of
// q as int16 pairs for the mins (vector k: sub-blocks 2k and 2k + 1, token t
// in lanes t, 4 + t, 8 + t and 12 + t), and the scales again in that lane
// order.
constexpr int64_t kPanelActivations = 0;
constexpr int64_t kPanelScales = kPanelActivations + kChunks * 2 * 64;
constexpr int64_t kPanelMinSums = kPanelScales + 2 * 64;
constexpr int64_t kPanelMinScales = kPanelMinSums + 4 * 64;
constexpr int64_t kPanelBlockBytes = kPanelMinScales + 64;

// Per tile (4 rows) and super-block: each row's chunks as bytes (row r, chunk
// c at 32 * (8r + c)), their sub-block scales as int16s by the lane pair
// they multiply (likewise), the rows' d, Q6_K's per-row lane-sum starts, the
// mins as int16 pairs (vector k: sub-blocks 2k and 2k + 1, row r in lanes
// 4r..4r + 3) and the rows' dmin in those lanes.
constexpr int64_t kTileValues = 0;
constexpr int64_t kTileScales = kTileValues + kTileRows * kChunks * 32;
constexpr int64_t kTileD = kTileScales + kTileRows * kChunks * 32;
constexpr int64_t kTileStarts = kTileD + 64;
constexpr int64_t kTileMins = kTileStarts + kTileRows * 32;
constexpr int64_t kTileDmin = kTileMins + 4 * 64;
constexpr int64_t kTileBlockBytes = kTileDmin + 64;
static_assert(kPanelBlockBytes % 64 == 0 && kTileBlockBytes % 64 == 0, "blocks stay 64-byte aligned");

float LoadHalf(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return _cvtsh_ss(bits);
}

__m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

int32_t Int16Pair(int32_t low, int32_t high) {
  return static_cast<int32_t>((static_cast<uint32_t>(low) & 0xffffu) | (static_cast<uint32_t>(high) << 16));
}

// A row's super-block as the tile holds it.
struct UnpackedSuperBlock {
  __m256i values[kChunks];
  __m256i scales[kChunks];  // int16 by the element of the pair products they multiply
  __m256i start;            // the lane sums' start (Q6_K's; zeros otherwise)
  float d = 0.0f;
  float dmin = 0.0f;
  int32_t mins[8] = {};
};

// Q4_K and Q5_K: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins, Q5_K's
// 32 bytes of fifth bits, 128 bytes of nibbles (chunk 2g the low nibbles of
// bytes 32g.., chunk 2g + 1 their high nibbles).
template <int64_t kBlockBytesOf, bool kHasFifthBits>
struct ScaledMinFormat {
  static constexpr int64_t kBlockBytes = kBlockBytesOf;
  static constexpr bool kSignedWeights = false;
  __attribute__((always_inline)) static void Unpack(const uint8_t* block, UnpackedSuperBlock& out) {
    int32_t scales[8];
    UnpackKScalesAndMins(block + 4, scales, out.mins);
    out.d = LoadHalf(block);
    out.dmin = LoadHalf(block + 2);
    const uint8_t* qs = block + (kHasFifthBits ? 48 : 16);
    const __m256i low_nibble = _mm256_set1_epi8(0x0f);
    const __m256i fifth_bits = kHasFifthBits ? Load256(block + 16) : _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i packed = Load256(qs + 32 * g);
      __m256i low = _mm256_and_si256(packed, low_nibble);
      __m256i high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibble);
      if (kHasFifthBits) {
        const __mmask32 low_top = _mm256_test_epi8_mask(fifth_bits, _mm256_set1_epi8(static_cast<char>(1 << (2 * g))));
        const __mmask32 high_top =
            _mm256_test_epi8_mask(fifth_bits, _mm256_set1_epi8(static_cast<char>(1 << (2 * g + 1))));
        low = _mm256_mask_add_epi8(low, low_top, low, _mm256_set1_epi8(0x10));
        high = _mm256_mask_add_epi8(high, high_top, high, _mm256_set1_epi8(0x10));
      }
      out.values[2 * g] = low;
      out.values[2 * g + 1] = high;
    }
    for (int c = 0; c < kChunks; ++c) out.scales[c] = _mm256_set1_epi16(static_cast<int16_t>(scales[c]));
    out.start = _mm256_setzero_si256();
  }
};
using Q4_KFormat = ScaledMinFormat<144, false>;
using Q5_KFormat = ScaledMinFormat<176, true>;

// Q6_K: ql[128], qh[64], int8 scales[16] (one per 16 elements), f16 d.
// Chunk 4h + k takes its low 4 bits from ql[64h + 32(k & 1)..] (low nibbles
// for k < 2, high otherwise) and its top 2 bits from bits 2k, 2k + 1 of
// qh[32h..]; value q - 32.
struct Q6_KFormat {
  static constexpr int64_t kBlockBytes = 210;
  static constexpr bool kSignedWeights = true;
  __attribute__((always_inline)) static void Unpack(const uint8_t* block, UnpackedSuperBlock& out) {
    const auto* scales = reinterpret_cast<const int8_t*>(block + 192);
    out.d = LoadHalf(block + 208);
    const __m256i low_nibble = _mm256_set1_epi8(0x0f);
    const __m256i two_bits = _mm256_set1_epi8(3);
    // -128 * the sum over chunks of each lane's scaled weights, exact.
    __m256i scaled_weight_sums = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qh = Load256(block + 128 + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i ql = Load256(block + 64 * h + 32 * (k & 1));
        const __m256i low = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), low_nibble);
        const __m256i top = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * k)), two_bits);
        const __m256i biased = _mm256_or_si256(low, _mm256_slli_epi16(top, 4));
        const __m256i values = _mm256_sub_epi8(biased, _mm256_set1_epi8(32));
        // Elements 0..15 of a chunk (pair products 0..7) take the first
        // scale, 16..31 the second.
        const __m256i chunk_scales = _mm256_set_m128i(_mm_set1_epi16(scales[8 * h + 2 * k + 1]),
                                                      _mm_set1_epi16(scales[8 * h + 2 * k]));
        const __m256i pair_sums = _mm256_maddubs_epi16(_mm256_set1_epi8(1), values);
        scaled_weight_sums = _mm256_add_epi32(scaled_weight_sums, _mm256_madd_epi16(pair_sums, chunk_scales));
        out.values[4 * h + k] = values;
        out.scales[4 * h + k] = chunk_scales;
      }
    }
    out.start = _mm256_mullo_epi32(scaled_weight_sums, _mm256_set1_epi32(-128));
  }
};

// Writes row r of the tile's super-block b from `unpacked`, or zeros where
// the row is past the matrix's end (`unpacked` null). Inlined with Unpack
// into UnpackTile, so that the super-block goes from registers to the tile
// without passing through memory on the way (at 16 tokens a step, unpacking
// took as long as multiplying).
template <class Format>
__attribute__((always_inline)) inline void StoreTileRow(const UnpackedSuperBlock* unpacked, int64_t r, int64_t b, uint8_t* tile) {
  uint8_t* out = tile + b * kTileBlockBytes;
  auto* d = reinterpret_cast<float*>(out + kTileD);
  auto* starts = reinterpret_cast<int32_t*>(out + kTileStarts + 32 * r);
  auto* mins = reinterpret_cast<int32_t*>(out + kTileMins);
  auto* dmin = reinterpret_cast<float*>(out + kTileDmin);
  if (unpacked == nullptr) {
    for (int c = 0; c < kChunks; ++c) {
      std::memset(out + kTileValues + 32 * (kChunks * r + c), 0, 32);
      std::memset(out + kTileScales + 32 * (kChunks * r + c), 0, 32);
    }
    d[r] = 0.0f;
    std::memset(starts, 0, 32);
    for (int k = 0; k < 4; ++k) {
      for (int t = 0; t < 4; ++t) mins[16 * k + 4 * r + t] = 0;
    }
    for (int t = 0; t < 4; ++t) dmin[4 * r + t] = 0.0f;
    return;
  }
  for (int c = 0; c < kChunks; ++c) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + kTileValues + 32 * (kChunks * r + c)), unpacked->values[c]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + kTileScales + 32 * (kChunks * r + c)), unpacked->scales[c]);
  }
  d[r] = unpacked->d;
  _mm256_store_si256(reinterpret_cast<__m256i*>(starts), unpacked->start);
  for (int k = 0; k < 4; ++k) {
    const int32_t pair = Int16Pair(unpacked->mins[2 * k], unpacked->mins[2 * k + 1]);
    for (int t = 0; t < 4; ++t) mins[16 * k + 4 * r + t] = pair;
  }
  for (int t = 0; t < 4; ++t) dmin[4 * r + t] = unpacked->dmin;
}

// Unpacks `count` (at most 4) rows from `rows` (row r at rows + r * row_bytes)
// into the tile; the rest of its four are zeros.
template <class Format>
void UnpackTile(const uint8_t* rows, int64_t row_bytes, int64_t count, int64_t blocks, uint8_t* tile) {
  UnpackedSuperBlock unpacked;
  for (int64_t r = 0; r < kTileRows; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      if (r < count) {
        Format::Unpack(rows + r * row_bytes + b * Format::kBlockBytes, unpacked);
        StoreTileRow<Format>(&unpacked, r, b, tile);
      } else {
        StoreTileRow<Format>(nullptr, r, b, tile);
      }
    }
  }
}

template <bool kUnsignedActivations>
void PackActivations(const void* activation_rows, int64_t tokens, int64_t cols, int64_t group_begin,
                     int64_t group_end, uint8_t* panel) {
  const auto* activations = static_cast<const Q8KBlock*>(activation_rows);
  const int64_t blocks = cols / kSuperBlock;
  for (int64_t group = group_begin; group < group_end; ++group) {
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* out = panel + (group * blocks + b) * kPanelBlockBytes;
      auto* min_sums = reinterpret_cast<int32_t*>(out + kPanelMinSums);
      auto* min_scales = reinterpret_cast<float*>(out + kPanelMinScales);
      for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
        const int64_t t = group * kGemmTokenGroup + i;
        const int64_t half = 32 * i;  // i / 2 picks the pair's vector, i % 2 its half
        float* scales = reinterpret_cast<float*>(out + kPanelScales + half);
        if (t >= tokens) {
          for (int c = 0; c < kChunks; ++c) std::memset(out + kPanelActivations + 128 * c + half, 0, 32);
          for (int l = 0; l < 8; ++l) scales[l] = 0.0f;
          for (int k = 0; k < 4; ++k) {
            for (int r = 0; r < 4; ++r) min_sums[16 * k + 4 * r + i] = 0;
          }
          for (int r = 0; r < 4; ++r) min_scales[4 * r + i] = 0.0f;
          continue;
        }
        const Q8KBlock& a = activations[t * blocks + b];
        for (int c = 0; c < kChunks; ++c) {
          __m256i q = Load256(a.q + 32 * c);
          if (kUnsignedActivations) q = _mm256_xor_si256(q, _mm256_set1_epi8(static_cast<char>(0x80)));
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kPanelActivations + 128 * c + half), q);
        }
        for (int l = 0; l < 8; ++l) scales[l] = a.scale;
        for (int k = 0; k < 4; ++k) {
          const int32_t pair = Int16Pair(a.sums32[2 * k], a.sums32[2 * k + 1]);
          for (int r = 0; r < 4; ++r) min_sums[16 * k + 4 * r + i] = pair;
        }
        for (int r = 0; r < 4; ++r) min_scales[4 * r + i] = a.scale;
      }
    }
  }
}

// The float sums of the tile's four rows against one token group, between
// the runs of super-blocks that MicroKernel takes them through.
struct MicroSums {
  __m512 acc[4][2];  // row r, tokens 2 * pair and 2 * pair + 1 in the halves
  __m512 offsets;    // row r, token t in lane 4r + t
};

MicroSums ZeroSums() {
  MicroSums sums;
  for (int r = 0; r < 4; ++r) sums.acc[r][0] = sums.acc[r][1] = _mm512_setzero_ps();
  sums.offsets = _mm512_setzero_ps();
  return sums;
}

// The tile's four rows against one token group over super-blocks
// block_begin..block_end - 1, continuing `sums` in block order.
template <class Format>
void MicroKernel(const uint8_t* tile, const uint8_t* panel, int64_t block_begin, int64_t block_end, MicroSums& sums) {
  constexpr bool kHasMins = !Format::kSignedWeights;
  __m512 acc[4][2];
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) acc[r][0] = sums.acc[r][0], acc[r][1] = sums.acc[r][1];
  __m512 offsets = sums.offsets;
  for (int64_t b = block_begin; b < block_end; ++b) {
    const uint8_t* p = panel + b * kPanelBlockBytes;
    const uint8_t* w = tile + b * kTileBlockBytes;
    __m512i lanes[4][2];
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      lanes[r][0] = lanes[r][1] =
          Format::kSignedWeights
              ? _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(w + kTileStarts + 32 * r)))
              : _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int c = 0; c < kChunks; ++c) {
      const __m512i activations[2] = {_mm512_load_si512(p + kPanelActivations + 128 * c),
                                      _mm512_load_si512(p + kPanelActivations + 128 * c + 64)};
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const int64_t at = 32 * (kChunks * r + c);
        const __m512i values =
            _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(w + kTileValues + at)));
        const __m512i scales =
            _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(w + kTileScales + at)));
#pragma GCC unroll 2
        for (int pair = 0; pair < 2; ++pair) {
          const __m512i products = Format::kSignedWeights ? _mm512_maddubs_epi16(activations[pair], values)
                                                          : _mm512_maddubs_epi16(values, activations[pair]);
          lanes[r][pair] = _mm512_dpwssd_epi32(lanes[r][pair], products, scales);
        }
      }
    }
    const __m512 activation_scales[2] = {_mm512_load_ps(p + kPanelScales), _mm512_load_ps(p + kPanelScales + 64)};
    const auto* d = reinterpret_cast<const float*>(w + kTileD);
#pragma GCC unroll 4
    for (int r = 0; r < 4; ++r) {
      const __m512 weight_d = _mm512_set1_ps(d[r]);
#pragma GCC unroll 2
      for (int pair = 0; pair < 2; ++pair) {
        const __m512 scale = _mm512_mul_ps(weight_d, activation_scales[pair]);
        acc[r][pair] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(lanes[r][pair]), acc[r][pair]);
      }
    }
    if (kHasMins) {
      __m512i min_sum = _mm512_setzero_si512();
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        min_sum = _mm512_dpwssd_epi32(min_sum, _mm512_load_si512(w + kTileMins + 64 * k),
                                      _mm512_load_si512(p + kPanelMinSums + 64 * k));
      }
      const __m512 dmin = _mm512_mul_ps(_mm512_load_ps(w + kTileDmin), _mm512_load_ps(p + kPanelMinScales));
      // -(a * b) + c in one rounding: the single-row kernels' fma(-dmin, ...).
      offsets = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(min_sum), offsets);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) sums.acc[r][0] = acc[r][0], sums.acc[r][1] = acc[r][1];
  sums.offsets = offsets;
}

// The tile's four rows against one token group once every super-block is
// in `sums`: results[r][t].
template <class Format>
void FoldSums(const MicroSums& sums, float results[4][4]) {
  constexpr bool kHasMins = !Format::kSignedWeights;
  alignas(64) float offset_of[16];
  _mm512_store_ps(offset_of, sums.offsets);
  for (int r = 0; r < 4; ++r) {
    for (int pair = 0; pair < 2; ++pair) {
      // LaneSum on both halves at once, as BlockGemmAvx512Vnni.cpp folds.
      const __m512 v = sums.acc[r][pair];
      const __m512 quads = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
      const __m512 pairs = _mm512_add_ps(quads, _mm512_permute_ps(quads, _MM_SHUFFLE(1, 0, 3, 2)));
      const __m512 sums = _mm512_add_ps(pairs, _mm512_permute_ps(pairs, _MM_SHUFFLE(2, 3, 0, 1)));
      alignas(64) float folded[16];
      _mm512_store_ps(folded, sums);
      for (int i = 0; i < 2; ++i) {
        const float sum = folded[8 * i];
        results[r][2 * pair + i] = kHasMins ? sum + offset_of[4 * r + 2 * pair + i] : sum;
      }
    }
  }
}

// Token groups per pass over a thread's rows, so that their panel blocks
// stay in L2 while every tile reads them (32 groups of 1536 columns take
// 276 KiB).
constexpr int64_t kGroupsPerPass = 32;

// Super-blocks the pass's token groups take, one group after another, before
// the next run: the tile's part (10 KiB) stays in L1 for all of them, where a
// whole tile of a long row (80 KiB at 8192 columns) came from L2 for each
// group. At 128 tokens and 2 threads, 2048 rows of 8192 columns in Q4_K ran
// at 477 GFLOP/s without runs and 625 with them (Q5_K 464 -> 634, Q6_K 503
// -> 608); runs of 2 and 8 super-blocks did no better.
constexpr int64_t kBlocksPerRun = 4;

template <class Format>
void Multiply(const uint8_t* weights, int64_t row_bytes, int64_t row_begin, int64_t row_end, const uint8_t* panel,
              int64_t tokens, int64_t cols, float* y, int64_t y_stride, uint8_t* tile) {
  const int64_t blocks = cols / kSuperBlock;
  const int64_t groups = GemmTokenGroups(tokens);
  for (int64_t pass = 0; pass < groups; pass += kGroupsPerPass) {
    const int64_t pass_end = groups - pass < kGroupsPerPass ? groups : pass + kGroupsPerPass;
    for (int64_t first = row_begin; first < row_end; first += kTileRows) {
      const int64_t count = row_end - first < kTileRows ? row_end - first : kTileRows;
      // The next tile's rows come in while this one is unpacked and
      // multiplied: 16 concurrent decodes of Llama-3.2-1B Q4_K_M spent 44%
      // of their Q6_K unpacking waiting on a block's first load.
      if (first + kTileRows < row_end) PrefetchLines(weights + (first + kTileRows) * row_bytes, count * row_bytes);
      UnpackTile<Format>(weights + first * row_bytes, row_bytes, count, blocks, tile);
      MicroSums sums[kGroupsPerPass];
      for (int64_t group = pass; group < pass_end; ++group) sums[group - pass] = ZeroSums();
      for (int64_t run = 0; run < blocks; run += kBlocksPerRun) {
        const int64_t run_end = blocks - run < kBlocksPerRun ? blocks : run + kBlocksPerRun;
        for (int64_t group = pass; group < pass_end; ++group) {
          MicroKernel<Format>(tile, panel + group * blocks * kPanelBlockBytes, run, run_end, sums[group - pass]);
        }
      }
      for (int64_t group = pass; group < pass_end; ++group) {
        float results[4][4];
        FoldSums<Format>(sums[group - pass], results);
        for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
          const int64_t t = group * kGemmTokenGroup + i;
          if (t >= tokens) break;
          for (int64_t r = 0; r < count; ++r) y[t * y_stride + first + r] = results[r][i];
        }
      }
    }
  }
}

template <class Format>
constexpr BlockGemmKernel KernelFor() {
  return {kSuperBlock, kPanelBlockBytes, kTileBlockBytes, PackActivations<Format::kSignedWeights>,
          Multiply<Format>};
}

}  // namespace

const KQuantGemmKernels& Avx512VnniKQuantGemmKernels() {
  static constexpr KQuantGemmKernels kKernels = {KernelFor<Q4_KFormat>(), KernelFor<Q5_KFormat>(),
                                                 KernelFor<Q6_KFormat>()};
  return kKernels;
}

}  // namespace kvjit::cpu::internal
