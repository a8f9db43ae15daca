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
#include "runtime/cpu/KQuantGemmParts.h"

namespace kvjit::cpu::internal {
namespace {

using namespace kquant_gemm;

constexpr int kChunks = 8;  // 32-element chunks per super-block

// The panel's step c is chunk c: lane l takes its dword l.
struct ChunkSteps {
  static constexpr int ActivationDword(int s, int l) { return 8 * s + l; }
};

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
constexpr int64_t kTileDmin = kTileMins + kTileMinBytes;
constexpr int64_t kTileBlockBytes = kTileDmin + 64;
static_assert(kTileBlockBytes % 64 == 0, "blocks stay 64-byte aligned");

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
  if (unpacked == nullptr) {
    for (int c = 0; c < kChunks; ++c) {
      std::memset(out + kTileValues + 32 * (kChunks * r + c), 0, 32);
      std::memset(out + kTileScales + 32 * (kChunks * r + c), 0, 32);
    }
    d[r] = 0.0f;
    std::memset(starts, 0, 32);
    ZeroTileMins(r, out + kTileMins, out + kTileDmin);
    return;
  }
  for (int c = 0; c < kChunks; ++c) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + kTileValues + 32 * (kChunks * r + c)), unpacked->values[c]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + kTileScales + 32 * (kChunks * r + c)), unpacked->scales[c]);
  }
  d[r] = unpacked->d;
  _mm256_store_si256(reinterpret_cast<__m256i*>(starts), unpacked->start);
  StoreTileMins(unpacked->mins, unpacked->dmin, r, out + kTileMins, out + kTileDmin);
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
    AccumulateSuperBlock(p, reinterpret_cast<const float*>(w + kTileD), lanes, acc);
    if (kHasMins) AccumulateMins(w + kTileMins, w + kTileDmin, p, offsets);
  }
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) sums.acc[r][0] = acc[r][0], sums.acc[r][1] = acc[r][1];
  sums.offsets = offsets;
}

template <class Format>
constexpr BlockGemmKernel KernelFor() {
  return {kSuperBlock, kPanelBlockBytes, kTileBlockBytes, PackActivations<Format::kSignedWeights, ChunkSteps>,
          Multiply<Format, MicroSums, UnpackTile<Format>, MicroKernel<Format>>};
}

}  // namespace

const KQuantGemmKernels& Avx512VnniKQuantGemmKernels() {
  static constexpr KQuantGemmKernels kKernels = {KernelFor<Q4_KFormat>(), KernelFor<Q5_KFormat>(),
                                                 KernelFor<Q6_KFormat>()};
  return kKernels;
}

}  // namespace kvjit::cpu::internal
