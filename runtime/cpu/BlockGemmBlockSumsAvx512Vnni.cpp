// The 32-element block types' GEMM of CpuNumerics::kFast (BlockGemm.h):
// each block's 32 products against a token summed as one integer before its
// scale, in AVX-512 BW/VL/VNNI.
//
// The batch-invariant GEMM (BlockGemmAvx512Vnni.cpp) keeps ggml's lanes: a
// lane holds elements 4m..4m+3 of a block, so every block costs a
// conversion, a scale product and an fma per eight lanes of each (row,
// token) pair: three float instructions beside each vpdpbusd. Here a lane
// holds one whole block: the blocks go in octets of eight (256 columns),
// lane l of an octet is its block l, and the weights and activations are
// laid out in "steps" for it (step s holds, in lane l, the four bytes of
// block l that its s-th vpdpbusd takes), so eight vpdpbusd sum a block and
// the float steps come once per octet: a conversion, d = d_w * d_x and
// acc_l = fma(d, float(sum), acc_l). A row's last octet may be short: its
// missing blocks are zeros with zero scales, which leave the lanes as they
// are. The offset formats add m * s to the block's lane by a second fma,
// acc_l = fma(m, s, acc_l), and the result is LaneSum(acc): the arithmetic of
// BlockDotBlockSumsAvx512Vnni.cpp's single rows, so a token's result does not
// depend on its step (docs/numerics.md, "The fast CPU numerics").
//
// Same linkage rule as DotKernels.h: only the entry points are external.

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "BlockGemmBlockSumsAvx512Vnni.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

#include <immintrin.h>

#include <cstring>

#include "runtime/cpu/Avx512LaneSums.h"
#include "runtime/cpu/BlockFormatsAvx512.h"
#include "runtime/cpu/BlockGemm.h"
#include "runtime/cpu/Prefetch.h"
#include "runtime/cpu/TiledGemmPasses.h"

namespace kvjit::cpu::internal {
namespace {

constexpr int64_t kOctet = 8;  // blocks per lane set
constexpr int64_t kOctetColumns = 32 * kOctet;
constexpr int64_t kSteps = 8;  // vpdpbusd per block

constexpr int64_t Octets(int64_t cols) { return (cols / 32 + kOctet - 1) / kOctet; }

// Per token group and octet: the activations in eight steps of 128 bytes
// (tokens 0 and 1, then 2 and 3, eight dwords each), the tokens' block
// scales (lane l: block l; tokens 0 and 1, then 2 and 3), the integer
// corrections of the unsigned weights (-bias times the block's sum of q),
// likewise, and the scaled sums s of the offset formats, likewise.
constexpr int64_t kPanelSteps = 0;
constexpr int64_t kPanelScales = kPanelSteps + kSteps * 128;
constexpr int64_t kPanelCorrections = kPanelScales + 128;
constexpr int64_t kPanelScaledSums = kPanelCorrections + 128;
constexpr int64_t kPanelOctetBytes = kPanelScaledSums + 128;

// Per tile (four rows) and octet: each row's steps (row r, step s at
// 32 * (8r + s)), each row's block scales d (row r at 32r), and its offset
// formats' m, likewise.
constexpr int64_t kTileSteps = 0;
constexpr int64_t kTileScales = kTileSteps + kTileRows * kSteps * 32;
constexpr int64_t kTileOffsets = kTileScales + kTileRows * 32;
constexpr int64_t kTileOctetBytes = kTileOffsets + kTileRows * 32;
static_assert(kPanelOctetBytes % 64 == 0 && kTileOctetBytes % 64 == 0, "octets stay 64-byte aligned");

void Store256(uint8_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

// blocks[l]'s dword s into lane l of steps[s].
void TransposeDwords(const __m256i blocks[kOctet], __m256i steps[kSteps]) {
  __m256i pairs[8];
  for (int k = 0; k < 4; ++k) {
    pairs[2 * k] = _mm256_unpacklo_epi32(blocks[2 * k], blocks[2 * k + 1]);
    pairs[2 * k + 1] = _mm256_unpackhi_epi32(blocks[2 * k], blocks[2 * k + 1]);
  }
  __m256i quads[8];  // blocks 4h..4h + 3, dwords j (low half) and j + 4 (high) in quads[4h + j]
  for (int h = 0; h < 2; ++h) {
    const __m256i* p = pairs + 4 * h;
    quads[4 * h + 0] = _mm256_unpacklo_epi64(p[0], p[2]);
    quads[4 * h + 1] = _mm256_unpackhi_epi64(p[0], p[2]);
    quads[4 * h + 2] = _mm256_unpacklo_epi64(p[1], p[3]);
    quads[4 * h + 3] = _mm256_unpackhi_epi64(p[1], p[3]);
  }
  for (int j = 0; j < 4; ++j) {
    steps[j] = _mm256_permute2x128_si256(quads[j], quads[4 + j], 0x20);
    steps[j + 4] = _mm256_permute2x128_si256(quads[j], quads[4 + j], 0x31);
  }
}

template <int32_t kBias>
void PackActivations(const void* activation_rows, int64_t tokens, int64_t cols, int64_t group_begin,
                     int64_t group_end, uint8_t* panel) {
  const auto* activations = static_cast<const Q8Block32*>(activation_rows);
  const int64_t blocks = cols / 32;
  const int64_t octets = Octets(cols);
  for (int64_t group = group_begin; group < group_end; ++group) {
    for (int64_t o = 0; o < octets; ++o) {
      uint8_t* out = panel + (group * octets + o) * kPanelOctetBytes;
      for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
        const int64_t t = group * kGemmTokenGroup + i;
        const int64_t half = 32 * i;  // i / 2 picks the pair's vector, i % 2 its half
        __m256i q[kOctet];
        alignas(32) float scales[kOctet] = {};
        alignas(32) int32_t corrections[kOctet] = {};
        alignas(32) float scaled_sums[kOctet] = {};
        for (int64_t l = 0; l < kOctet; ++l) {
          const int64_t b = kOctet * o + l;
          q[l] = _mm256_setzero_si256();
          if (t < tokens && b < blocks) {
            const Q8Block32& a = activations[t * blocks + b];
            q[l] = Load256(a.q);
            int32_t sum = 0;
            for (const int8_t value : a.q) sum += value;
            scales[l] = a.scale;
            corrections[l] = -kBias * sum;
            scaled_sums[l] = a.scaled_sum;
          }
        }
        __m256i steps[kSteps];
        TransposeDwords(q, steps);
        for (int s = 0; s < kSteps; ++s) Store256(out + kPanelSteps + 128 * s + half, steps[s]);
        std::memcpy(out + kPanelScales + half, scales, sizeof scales);
        std::memcpy(out + kPanelCorrections + half, corrections, sizeof corrections);
        std::memcpy(out + kPanelScaledSums + half, scaled_sums, sizeof scaled_sums);
      }
    }
  }
}

// Where row o of the weights starts and how far apart its blocks lie: GGUF's
// rows (kRowsInterleaved 1), or kvx's RowsInterleaved8, whose group of 8 rows
// is one stream of block columns (`row_bytes` is still one row's bytes).
template <class Format, int64_t kRowsInterleaved>
struct RowsOf {
  static_assert(kRowsInterleaved == 1 || kRowsInterleaved == kGemmRowGroup, "an interleaved group is a row group");
  static constexpr int64_t kBlockStride = kRowsInterleaved * Format::kBytes;
  static const uint8_t* Start(const uint8_t* weights, int64_t row_bytes, int64_t o) {
    return weights + (o - o % kRowsInterleaved) * row_bytes + (o % kRowsInterleaved) * Format::kBytes;
  }
};

// Unpacks rows first..first + count - 1 (count at most 4) into the tile; the
// rest of its four rows are zeros.
template <class Format, int64_t kRowsInterleaved>
void UnpackTile(const uint8_t* weights, int64_t row_bytes, int64_t first, int64_t count, int64_t cols,
                uint8_t* tile) {
  using Rows = RowsOf<Format, kRowsInterleaved>;
  const int64_t blocks = cols / 32;
  const int64_t octets = Octets(cols);
  for (int64_t r = 0; r < kTileRows; ++r) {
    const uint8_t* row = r < count ? Rows::Start(weights, row_bytes, first + r) : nullptr;
    for (int64_t o = 0; o < octets; ++o) {
      uint8_t* out = tile + o * kTileOctetBytes;
      __m256i values[kOctet];
      alignas(32) float scales[kOctet] = {};
      alignas(32) float offsets[kOctet] = {};
      for (int64_t l = 0; l < kOctet; ++l) {
        const int64_t b = kOctet * o + l;
        values[l] = _mm256_setzero_si256();
        if (row != nullptr && b < blocks) {
          const uint8_t* block = row + b * Rows::kBlockStride;
          values[l] = Format::Unsigned(block);
          scales[l] = LoadHalf(block);
          if (Format::kHasOffset) offsets[l] = LoadHalf(block + 2);
        }
      }
      __m256i steps[kSteps];
      TransposeDwords(values, steps);
      for (int s = 0; s < kSteps; ++s) Store256(out + kTileSteps + 32 * (kSteps * r + s), steps[s]);
      std::memcpy(out + kTileScales + 32 * r, scales, sizeof scales);
      if (Format::kHasOffset) std::memcpy(out + kTileOffsets + 32 * r, offsets, sizeof offsets);
    }
  }
}

__m512i BroadcastRow(const uint8_t* p) { return _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(p))); }

// The tile's four rows against one token group over octets
// octet_begin..octet_end - 1, continuing `sums` in octet order.
template <class Format>
void MicroKernel(const uint8_t* tile, const uint8_t* panel, int64_t octet_begin, int64_t octet_end,
                 MicroSums& sums) {
  for (int64_t o = octet_begin; o < octet_end; ++o) {
    const uint8_t* p = panel + o * kPanelOctetBytes;
    const uint8_t* w = tile + o * kTileOctetBytes;
    const __m512i corrections[2] = {_mm512_load_si512(p + kPanelCorrections),
                                    _mm512_load_si512(p + kPanelCorrections + 64)};
    __m512i block_sums[kTileRows][2];
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) block_sums[r][0] = corrections[0], block_sums[r][1] = corrections[1];
#pragma GCC unroll 8
    for (int s = 0; s < kSteps; ++s) {
      const __m512i activations[2] = {_mm512_load_si512(p + kPanelSteps + 128 * s),
                                      _mm512_load_si512(p + kPanelSteps + 128 * s + 64)};
#pragma GCC unroll 4
      for (int r = 0; r < kTileRows; ++r) {
        const __m512i values = BroadcastRow(w + kTileSteps + 32 * (kSteps * r + s));
        block_sums[r][0] = _mm512_dpbusd_epi32(block_sums[r][0], values, activations[0]);
        block_sums[r][1] = _mm512_dpbusd_epi32(block_sums[r][1], values, activations[1]);
      }
    }
    const __m512 activation_scales[2] = {_mm512_load_ps(p + kPanelScales), _mm512_load_ps(p + kPanelScales + 64)};
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      const __m512 weight_scales = _mm512_castsi512_ps(BroadcastRow(w + kTileScales + 32 * r));
#pragma GCC unroll 2
      for (int pair = 0; pair < 2; ++pair) {
        const __m512 d = _mm512_mul_ps(weight_scales, activation_scales[pair]);
        sums.acc[r][pair] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(block_sums[r][pair]), sums.acc[r][pair]);
      }
      if (Format::kHasOffset) {
        const __m512 offsets = _mm512_castsi512_ps(BroadcastRow(w + kTileOffsets + 32 * r));
#pragma GCC unroll 2
        for (int pair = 0; pair < 2; ++pair) {
          sums.acc[r][pair] =
              _mm512_fmadd_ps(offsets, _mm512_load_ps(p + kPanelScaledSums + 64 * pair), sums.acc[r][pair]);
        }
      }
    }
  }
}

// Octets per run: a tile's run (13 KiB) stays in L1 while the pass's groups
// take it in turn, as KQuantGemmParts.h's runs of super-blocks.
constexpr int64_t kOctetsPerRun = 8;

template <class Format, int64_t kRowsInterleaved>
void Multiply(const uint8_t* weights, int64_t row_bytes, int64_t row_begin, int64_t row_end, const uint8_t* panel,
              int64_t tokens, int64_t cols, float* y, int64_t y_stride, uint8_t* tile) {
  const int64_t octets = Octets(cols);
  MultiplyTilesInPasses<MicroSums, kOctetsPerRun>(
      row_begin, row_end, tokens, octets,
      // The rows that come next are asked for while these are multiplied
      // (KQuantGemmParts.h's reason): the next tile's rows, or,
      // interleaved, half of the next group's stream during each of the
      // group's two tiles.
      [&](int64_t first, int64_t steps) {
        if (kRowsInterleaved == 1) return NextTileRows(weights, row_bytes, first, row_end, steps);
        static_assert(kRowsInterleaved == 1 || kRowsInterleaved == 2 * kTileRows, "a group is two tiles");
        const int64_t group_first = first - first % kRowsInterleaved;
        const int64_t next = group_first + kRowsInterleaved;
        return SpreadPrefetch(weights + (next + first - group_first) * row_bytes, 0, next < row_end ? 1 : 0,
                              kTileRows * row_bytes, steps);
      },
      [&](int64_t first, int64_t count) {
        UnpackTile<Format, kRowsInterleaved>(weights, row_bytes, first, count, cols, tile);
      },
      [&](int64_t group, int64_t run, int64_t run_end, MicroSums& sums) {
        MicroKernel<Format>(tile, panel + group * octets * kPanelOctetBytes, run, run_end, sums);
      },
      [&](const MicroSums& sums, int64_t group, int64_t first, int64_t count) {
        float results[kTileRows][kGemmTokenGroup];
        sums.Fold</*kHasOffsets=*/false>(results);
        StoreTileResults(results, group, first, count, tokens, y, y_stride);
      });
}

// BlockGemm.h's block is an octet; a short last one counts whole.
template <class Format, int64_t kRowsInterleaved = 1>
constexpr BlockGemmKernel KernelFor() {
  return {kOctetColumns, kPanelOctetBytes, kTileOctetBytes, PackActivations<Format::kBias>,
          Multiply<Format, kRowsInterleaved>};
}

}  // namespace

const BlockGemmKernels& Avx512VnniBlockSumGemmKernels() {
  static constexpr BlockGemmKernels kKernels = {
      KernelFor<Q8_0Format>(), KernelFor<Q4_0Format>(), KernelFor<Q4_1Format>(),
      KernelFor<Q5_0Format>(), KernelFor<Q5_1Format>(),
  };
  return kKernels;
}

const BlockGemmKernels& Avx512VnniInterleaved8BlockSumGemmKernels() {
  static constexpr BlockGemmKernels kKernels = {
      KernelFor<Q8_0Format, 8>(), KernelFor<Q4_0Format, 8>(), KernelFor<Q4_1Format, 8>(),
      KernelFor<Q5_0Format, 8>(), KernelFor<Q5_1Format, 8>(),
  };
  return kKernels;
}

}  // namespace kvjit::cpu::internal
