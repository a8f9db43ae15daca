#ifndef KVJIT_RUNTIME_CPU_KQUANTGEMMPARTS_H_
#define KVJIT_RUNTIME_CPU_KQUANTGEMMPARTS_H_
// What the two K-quant GEMMs share (KQuantGemmAvx512Vnni.cpp, ggml's lanes;
// KQuantGemmSubBlockSumsAvx512Vnni.cpp, a sub-block per lane): the panel of
// Q8_K activations, the mins, the float steps per super-block, the final
// fold and the passes over a thread's rows. Each kernel brings its tile
// layout, its unpacking and its integer lane sums.
//
// Included only by translation units compiled for AVX-512 BW/VL/VNNI; every
// definition is in an anonymous namespace, so that none of this code can be
// chosen by the linker for a caller built for another ISA (DotKernels.h's
// linkage rule).

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "KQuantGemmParts.h is for translation units compiled with AVX-512 BW/VL/VNNI"
#endif

#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "runtime/cpu/Avx512LaneSums.h"
#include "runtime/cpu/BlockGemm.h"
#include "runtime/cpu/DotKernels.h"
#include "runtime/cpu/Prefetch.h"
#include "runtime/cpu/SimdLoads.h"
#include "runtime/cpu/TiledGemmPasses.h"

namespace kvjit::cpu::internal::kquant_gemm {
namespace {

constexpr int64_t kSuperBlock = 256;

// Per token group and super-block: the activations in eight steps of 128
// bytes (tokens 0 and 1, then 2 and 3, 32 bytes each; Q6_K's as a + 128; a
// kernel chooses which of a token's 64 dwords each step's lanes take), the
// tokens' scales repeated over their half's eight lanes (tokens 0 and 1,
// then 2 and 3), the 32-element sums of q as int16 pairs for the mins
// (vector k: sub-blocks 2k and 2k + 1, token t in lanes t, 4 + t, 8 + t and
// 12 + t), and the scales again in that lane order (token t in lane 4r + t
// beside row r's factors).
constexpr int64_t kPanelActivations = 0;
constexpr int64_t kPanelScales = kPanelActivations + 8 * 2 * 64;
constexpr int64_t kPanelMinSums = kPanelScales + 2 * 64;
constexpr int64_t kPanelTokenScales = kPanelMinSums + 4 * 64;
constexpr int64_t kPanelBlockBytes = kPanelTokenScales + 64;
static_assert(kPanelBlockBytes % 64 == 0, "blocks stay 64-byte aligned");

// A tile's mins per super-block: int16 pairs (vector k: sub-blocks 2k and
// 2k + 1, row r in lanes 4r..4r + 3), then the rows' dmin in those lanes.
constexpr int64_t kTileMinBytes = 4 * 64;

int32_t Int16Pair(int32_t low, int32_t high) {
  return static_cast<int32_t>((static_cast<uint32_t>(low) & 0xffffu) | (static_cast<uint32_t>(high) << 16));
}

// Row r's mins as int16 pairs (`pairs`' dword k: sub-blocks 2k and 2k + 1)
// into lanes 4r..4r + 3 of each vector k, and its dmin into lanes 4r..4r + 3.
__attribute__((always_inline)) inline void StoreTileMinPairs(__m128i pairs, float dmin_of_row, int64_t r,
                                                             uint8_t* tile_mins, uint8_t* tile_dmin) {
  auto* row_pairs = reinterpret_cast<__m128i*>(tile_mins + 16 * r);
  _mm_store_si128(row_pairs, _mm_shuffle_epi32(pairs, 0x00));
  _mm_store_si128(row_pairs + 4, _mm_shuffle_epi32(pairs, 0x55));
  _mm_store_si128(row_pairs + 8, _mm_shuffle_epi32(pairs, 0xaa));
  _mm_store_si128(row_pairs + 12, _mm_shuffle_epi32(pairs, 0xff));
  _mm_store_ps(reinterpret_cast<float*>(tile_dmin) + 4 * r, _mm_set1_ps(dmin_of_row));
}

void StoreTileMins(const int32_t mins[8], float dmin_of_row, int64_t r, uint8_t* tile_mins, uint8_t* tile_dmin) {
  // The mins are 6-bit: packing to int16 keeps them.
  const __m128i pairs = _mm_packs_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(mins)),
                                        _mm_loadu_si128(reinterpret_cast<const __m128i*>(mins + 4)));
  StoreTileMinPairs(pairs, dmin_of_row, r, tile_mins, tile_dmin);
}

void ZeroTileMins(int64_t r, uint8_t* tile_mins, uint8_t* tile_dmin) {
  constexpr int32_t kNoMins[8] = {};
  StoreTileMins(kNoMins, 0.0f, r, tile_mins, tile_dmin);
}

// Which of a token's 64 activation dwords lane l of step s takes: a
// kernel's Steps::ActivationDword(s, l).
template <class Steps>
constexpr std::array<int32_t, 64> StepDwords() {
  std::array<int32_t, 64> dwords{};
  for (int s = 0; s < 8; ++s) {
    for (int l = 0; l < 8; ++l) dwords[8 * s + l] = Steps::ActivationDword(s, l);
  }
  return dwords;
}

template <bool kUnsignedActivations, class Steps>
void PackActivations(const void* activation_rows, int64_t tokens, int64_t cols, int64_t group_begin,
                     int64_t group_end, uint8_t* panel) {
  static constexpr std::array<int32_t, 64> kStepDwords = StepDwords<Steps>();
  const auto* activations = static_cast<const Q8KBlock*>(activation_rows);
  const int64_t blocks = cols / kSuperBlock;
  for (int64_t group = group_begin; group < group_end; ++group) {
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* out = panel + (group * blocks + b) * kPanelBlockBytes;
      auto* min_sums = reinterpret_cast<int32_t*>(out + kPanelMinSums);
      auto* token_scales = reinterpret_cast<float*>(out + kPanelTokenScales);
      for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
        const int64_t t = group * kGemmTokenGroup + i;
        const int64_t half = 32 * i;  // i / 2 picks the pair's vector, i % 2 its half
        float* scales = reinterpret_cast<float*>(out + kPanelScales + half);
        if (t >= tokens) {
          for (int s = 0; s < 8; ++s) std::memset(out + kPanelActivations + 128 * s + half, 0, 32);
          for (int l = 0; l < 8; ++l) scales[l] = 0.0f;
          for (int k = 0; k < 4; ++k) {
            for (int r = 0; r < 4; ++r) min_sums[16 * k + 4 * r + i] = 0;
          }
          for (int r = 0; r < 4; ++r) token_scales[4 * r + i] = 0.0f;
          continue;
        }
        const Q8KBlock& a = activations[t * blocks + b];
        int32_t q[64];
        std::memcpy(q, a.q, sizeof q);
        if (kUnsignedActivations) {
          for (int32_t& four : q) four ^= static_cast<int32_t>(0x80808080u);
        }
        for (int s = 0; s < 8; ++s) {
          int32_t step[8];
          for (int l = 0; l < 8; ++l) step[l] = q[kStepDwords[8 * s + l]];
          std::memcpy(out + kPanelActivations + 128 * s + half, step, sizeof step);
        }
        for (int l = 0; l < 8; ++l) scales[l] = a.scale;
        for (int k = 0; k < 4; ++k) {
          const int32_t pair = Int16Pair(a.sums32[2 * k], a.sums32[2 * k + 1]);
          for (int r = 0; r < 4; ++r) min_sums[16 * k + 4 * r + i] = pair;
        }
        for (int r = 0; r < 4; ++r) token_scales[4 * r + i] = a.scale;
      }
    }
  }
}

// acc[r][pair] = fma(d_r * d_token, float(lanes[r][pair]), acc[r][pair]):
// one super-block's integer lane sums into the float accumulators.
__attribute__((always_inline)) inline void AccumulateSuperBlock(const uint8_t* panel_block, const float* d,
                                                                const __m512i lanes[4][2], __m512 acc[4][2]) {
  const __m512 activation_scales[2] = {_mm512_load_ps(panel_block + kPanelScales),
                                       _mm512_load_ps(panel_block + kPanelScales + 64)};
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    const __m512 weight_d = _mm512_set1_ps(d[r]);
#pragma GCC unroll 2
    for (int pair = 0; pair < 2; ++pair) {
      const __m512 scale = _mm512_mul_ps(weight_d, activation_scales[pair]);
      acc[r][pair] = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(lanes[r][pair]), acc[r][pair]);
    }
  }
}

// Q4_K / Q5_K: offsets -= dmin * d_token * sum over sub-blocks of min * bsum,
// in one rounding (the single-row kernels' fma(-dmin, ...)).
__attribute__((always_inline)) inline void AccumulateMins(const uint8_t* tile_mins, const uint8_t* tile_dmin,
                                                          const uint8_t* panel_block, __m512& offsets) {
  __m512i min_sum = _mm512_setzero_si512();
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    min_sum = _mm512_dpwssd_epi32(min_sum, _mm512_load_si512(tile_mins + 64 * k),
                                  _mm512_load_si512(panel_block + kPanelMinSums + 64 * k));
  }
  const __m512 dmin = _mm512_mul_ps(_mm512_load_ps(tile_dmin), _mm512_load_ps(panel_block + kPanelTokenScales));
  offsets = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(min_sum), offsets);
}

// Super-blocks the pass's token groups take, one group after another, before
// the next run: the tile's part (10 KiB) stays in L1 for all of them, where a
// whole tile of a long row (80 KiB at 8192 columns) came from L2 for each
// group. At 128 tokens and 2 threads, 2048 rows of 8192 columns in Q4_K ran
// at 477 GFLOP/s without runs and 625 with them (Q5_K 464 -> 634, Q6_K 503
// -> 608); runs of 2 and 8 super-blocks did no better.
constexpr int64_t kBlocksPerRun = 4;

using UnpackTileFn = void (*)(const uint8_t* rows, int64_t row_bytes, int64_t count, int64_t blocks, uint8_t* tile);
template <class Sums>
using MicroKernelFn = void (*)(const uint8_t* tile, const uint8_t* panel, int64_t block_begin, int64_t block_end,
                               Sums& sums);

// BlockGemm.h's multiply (TiledGemmPasses.h): tiles of four rows, each
// unpacked once and taken through the pass's token groups in runs of
// super-blocks. `Sums` is the micro-kernel's float sums (MicroSums or a
// kernel's own): Sums::Zero() and sums.Fold<has mins>(results).
template <class Format, class Sums, UnpackTileFn kUnpackTile, MicroKernelFn<Sums> kMicroKernel>
void Multiply(const uint8_t* weights, int64_t row_bytes, int64_t row_begin, int64_t row_end, const uint8_t* panel,
              int64_t tokens, int64_t cols, float* y, int64_t y_stride, uint8_t* tile) {
  const int64_t blocks = cols / kSuperBlock;
  MultiplyTilesInPasses<Sums, kBlocksPerRun>(
      row_begin, row_end, tokens, blocks,
      // The next tile's rows come in while this one is multiplied: 16
      // concurrent decodes of Llama-3.2-1B Q4_K_M spent 44% of their Q6_K
      // unpacking waiting on a block's first load when they did not, and
      // asked for all at once they stalled (Prefetch.h).
      [&](int64_t first, int64_t steps) { return NextTileRows(weights, row_bytes, first, row_end, steps); },
      [&](int64_t first, int64_t count) { kUnpackTile(weights + first * row_bytes, row_bytes, count, blocks, tile); },
      [&](int64_t group, int64_t run, int64_t run_end, Sums& sums) {
        kMicroKernel(tile, panel + group * blocks * kPanelBlockBytes, run, run_end, sums);
      },
      [&](const Sums& sums, int64_t group, int64_t first, int64_t count) {
        float results[kTileRows][kGemmTokenGroup];
        sums.template Fold<!Format::kSignedWeights>(results);
        StoreTileResults(results, group, first, count, tokens, y, y_stride);
      });
}

}  // namespace
}  // namespace kvjit::cpu::internal::kquant_gemm

#endif  // KVJIT_RUNTIME_CPU_KQUANTGEMMPARTS_H_
