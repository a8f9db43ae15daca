// The register-blocked GEMM of BlockGemm.h in AVX-512 VNNI.
//
// DotKernels.h's contract gives every (weight row, token) pair eight float
// accumulators, one per lane of a block's 32 products, each taking
// fma(d, float(integer lane sum), acc) per block. A 512-bit register holds
// two such pairs: one weight row's block (broadcast to both halves) against
// two tokens' blocks. Per pair and block that is four instructions --
// vpdpbusd for the lane sums, a conversion, the scale product d and the FMA
// -- the contract's own operations, so the results equal the single-row
// kernels' bit for bit. The micro-kernel keeps 8 rows x 4 tokens (16
// registers of pairs) in flight, the weights unpacked once per 8 rows for
// every token group, and the activations' bytes, scales and corrections
// laid out once per call.
//
// vpdpbusd multiplies unsigned bytes by signed ones, so every weight format
// is stored unsigned, value + bias (Q8_0: 128, Q4_0: 8, Q5_0: 16, the
// offset formats: 0), and each lane's integer sum starts from -bias times
// the sum of its four activations, which the panel carries: exact in int32.

#if !defined(__AVX512VNNI__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "BlockGemmAvx512Vnni.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni"
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "runtime/cpu/Avx512LaneSums.h"
#include "runtime/cpu/BlockFormatsAvx512.h"
#include "runtime/cpu/BlockGemm.h"
#include "runtime/cpu/Prefetch.h"

namespace kvjit::cpu::internal {
namespace {

// Per token group and block, seven 64-byte vectors: the activation blocks
// of tokens 0 and 1, then of 2 and 3; their scales, each repeated over its
// block's eight lanes; the integer corrections of the unsigned weight
// encoding (-bias * the sum of each lane's four activations), likewise; and
// the four tokens' scaled sums, repeated four times (for the offset formats).
constexpr int64_t kPanelBlockBytes = 7 * 64;
// Per row group and block: the eight rows' blocks unpacked to 32 unsigned
// bytes each (256 bytes), their offsets m with row r's in lanes 4r..4r+3 (two
// 64-byte vectors, for the offset formats), their eight scales, and padding
// that keeps every block 64-byte aligned.
constexpr int64_t kTileBlockBytes = 7 * 64;

// Offsets of the vectors inside a panel block and a tile block.
constexpr int64_t kPanelActivations = 0;    // tokens (0, 1), then (2, 3)
constexpr int64_t kPanelScales = 128;       // likewise
constexpr int64_t kPanelCorrections = 256;  // likewise
constexpr int64_t kPanelScaledSums = 384;
constexpr int64_t kTileValues = 0;
constexpr int64_t kTileOffsets = 256;
constexpr int64_t kTileScales = 384;

template <int32_t kBias>
void PackActivations(const void* activation_rows, int64_t tokens, int64_t cols, int64_t group_begin,
                     int64_t group_end, uint8_t* panel) {
  const auto* activations = static_cast<const Q8Block32*>(activation_rows);
  const int64_t blocks = cols / 32;
  const __m256i ones = _mm256_set1_epi8(1);
  const __m256i minus_bias = _mm256_set1_epi32(-kBias);
  for (int64_t group = group_begin; group < group_end; ++group) {
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* out = panel + (group * blocks + b) * kPanelBlockBytes;
      auto* scaled_sums = reinterpret_cast<float*>(out + kPanelScaledSums);
      for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
        const int64_t t = group * kGemmTokenGroup + i;
        const int64_t half = 32 * i;  // i / 2 picks the pair's vector, i % 2 its half
        if (t >= tokens) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kPanelActivations + half), _mm256_setzero_si256());
          _mm256_storeu_ps(reinterpret_cast<float*>(out + kPanelScales + half), _mm256_setzero_ps());
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kPanelCorrections + half), _mm256_setzero_si256());
          for (int j = 0; j < 4; ++j) scaled_sums[4 * j + i] = 0.0f;
          continue;
        }
        const Q8Block32& a = activations[t * blocks + b];
        const __m256i q = Load256(a.q);
        const __m256i lane_sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, q);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kPanelActivations + half), q);
        _mm256_storeu_ps(reinterpret_cast<float*>(out + kPanelScales + half), _mm256_set1_ps(a.scale));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + kPanelCorrections + half),
                            _mm256_mullo_epi32(lane_sums, minus_bias));
        for (int j = 0; j < 4; ++j) scaled_sums[4 * j + i] = a.scaled_sum;
      }
    }
  }
}

// Unpacks block b of row r of the group (at rows + r * row_stride + b *
// block_stride) into the tile, for `count` (at most 8) rows; the rest of the
// group's eight are zeros.
template <class Format>
void UnpackBlock(const uint8_t* rows, int64_t row_stride, int64_t block_stride, int64_t count, int64_t r,
                 int64_t b, uint8_t* tile) {
  uint8_t* out = tile + b * kTileBlockBytes;
  auto* offsets = reinterpret_cast<float*>(out + kTileOffsets);
  auto* scales = reinterpret_cast<float*>(out + kTileScales);
  __m256i values = _mm256_setzero_si256();
  float scale = 0.0f, offset = 0.0f;
  if (r < count) {
    const uint8_t* block = rows + r * row_stride + b * block_stride;
    values = Format::Unsigned(block);
    scale = LoadHalf(block);
    if (Format::kHasOffset) offset = LoadHalf(block + 2);
  }
  _mm256_store_si256(reinterpret_cast<__m256i*>(out + kTileValues + 32 * r), values);
  scales[r] = scale;
  if (Format::kHasOffset) _mm_store_ps(offsets + 4 * r, _mm_set1_ps(offset));
}

// Unpacks a row group into the tile in the order its blocks lie in memory:
// row by row for GGUF's rows (kRowsInterleaved 1), block column by block
// column for the interleaved layout (8), whose group is one stream. The
// group starts at `rows` (its first row's bytes, or the interleaved group).
template <class Format, int64_t kRowsInterleaved>
void UnpackTile(const uint8_t* rows, int64_t row_bytes, int64_t count, int64_t blocks, uint8_t* tile) {
  if constexpr (kRowsInterleaved == 1) {
    for (int64_t r = 0; r < kGemmRowGroup; ++r) {
      for (int64_t b = 0; b < blocks; ++b) UnpackBlock<Format>(rows, row_bytes, Format::kBytes, count, r, b, tile);
    }
  } else {
    static_assert(kRowsInterleaved == kGemmRowGroup, "an interleaved group is the GEMM's row group");
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t r = 0; r < kGemmRowGroup; ++r) {
        UnpackBlock<Format>(rows, Format::kBytes, kRowsInterleaved * Format::kBytes, count, r, b, tile);
      }
    }
  }
}

// Eight rows (the tile) against one token group (its panel blocks):
// results[r][t] for row r and token t of the group.
template <class Format>
void MicroKernel(const uint8_t* tile, const uint8_t* panel, int64_t blocks, float results[8][4]) {
  __m512 acc[8][2];
#pragma GCC unroll 8
  for (int r = 0; r < 8; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  __m512 offsets[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* p = panel + b * kPanelBlockBytes;
    const uint8_t* w = tile + b * kTileBlockBytes;
    const __m512i activations[2] = {_mm512_load_si512(p + kPanelActivations),
                                    _mm512_load_si512(p + kPanelActivations + 64)};
    const __m512 activation_scales[2] = {_mm512_load_ps(p + kPanelScales), _mm512_load_ps(p + kPanelScales + 64)};
    const auto* weight_scales = reinterpret_cast<const float*>(w + kTileScales);
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      const __m512i values = _mm512_broadcast_i64x4(_mm256_load_si256(reinterpret_cast<const __m256i*>(w + 32 * r)));
      const __m512 weight_scale = _mm512_set1_ps(weight_scales[r]);
#pragma GCC unroll 2
      for (int pair = 0; pair < 2; ++pair) {
        // The corrections are zeros for the unsigned formats; loading them
        // anyway costs a load port where a zeroed register costs an ALU one.
        const __m512i start = _mm512_load_si512(p + kPanelCorrections + 64 * pair);
        const __m512i lanes = _mm512_dpbusd_epi32(start, values, activations[pair]);
        const __m512 d = _mm512_mul_ps(weight_scale, activation_scales[pair]);
        acc[r][pair] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[r][pair]);
      }
    }
    if (Format::kHasOffset) {
      const __m512 scaled_sums = _mm512_load_ps(p + kPanelScaledSums);
      offsets[0] = _mm512_fmadd_ps(_mm512_load_ps(w + kTileOffsets), scaled_sums, offsets[0]);
      offsets[1] = _mm512_fmadd_ps(_mm512_load_ps(w + kTileOffsets + 64), scaled_sums, offsets[1]);
    }
  }
  alignas(64) float offset_of[32];  // row r, token t at 4r + t
  _mm512_store_ps(offset_of, offsets[0]);
  _mm512_store_ps(offset_of + 16, offsets[1]);
  for (int r = 0; r < 8; ++r) {
    for (int pair = 0; pair < 2; ++pair) {
      alignas(64) float lanes[16];  // token 2 * pair in lane 0, 2 * pair + 1 in lane 8
      _mm512_store_ps(lanes, LaneSumOfEachHalf(acc[r][pair]));
      results[r][2 * pair] = lanes[0] + offset_of[4 * r + 2 * pair];
      results[r][2 * pair + 1] = lanes[8] + offset_of[4 * r + 2 * pair + 1];
    }
  }
}

// One unpacked row group (`count` rows from row `first`) against token
// groups [group_begin, group_end), a step of `next_rows` before each.
template <class Format>
void MultiplyTile(const uint8_t* tile, int64_t count, int64_t first, const uint8_t* panel, int64_t group_begin,
                  int64_t group_end, int64_t tokens, int64_t blocks, float* y, int64_t y_stride,
                  SpreadPrefetch& next_rows) {
  for (int64_t group = group_begin; group < group_end; ++group) {
    next_rows.Step();
    float results[8][4];
    MicroKernel<Format>(tile, panel + group * blocks * kPanelBlockBytes, blocks, results);
    for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
      const int64_t t = group * kGemmTokenGroup + i;
      if (t >= tokens) break;
      for (int64_t r = 0; r < count; ++r) y[t * y_stride + first + r] = results[r][i];
    }
  }
}

// Token groups per pass over a thread's rows: every row group reads their
// panel blocks again, which must stay in L2 (128 tokens of 1536 columns take
// 688 KiB); a longer step unpacks each row group once per pass.
constexpr int64_t kGroupsPerPass = 32;

// Row groups start at multiples of 8 rows from row_begin, which an
// interleaved layout's caller keeps a multiple of 8.
template <class Format, int64_t kRowsInterleaved>
void Multiply(const uint8_t* weights, int64_t row_bytes, int64_t row_begin, int64_t row_end, const uint8_t* panel,
              int64_t tokens, int64_t cols, float* y, int64_t y_stride, uint8_t* tile) {
  const int64_t blocks = cols / 32;
  const int64_t groups = GemmTokenGroups(tokens);
  for (int64_t pass = 0; pass < groups; pass += kGroupsPerPass) {
    const int64_t pass_end = groups - pass < kGroupsPerPass ? groups : pass + kGroupsPerPass;
    for (int64_t first = row_begin; first < row_end; first += kGemmRowGroup) {
      const int64_t count = row_end - first < kGemmRowGroup ? row_end - first : kGemmRowGroup;
      UnpackTile<Format, kRowsInterleaved>(weights + first * row_bytes, row_bytes, count, blocks, tile);
      // The next group's rows come in while this one is multiplied
      // (KQuantGemmParts.h's reason), spread over its token groups.
      SpreadPrefetch next_rows =
          SpreadPrefetchOfRows(weights, row_bytes, first + kGemmRowGroup, kGemmRowGroup, row_end, pass_end - pass);
      MultiplyTile<Format>(tile, count, first, panel, pass, pass_end, tokens, blocks, y, y_stride, next_rows);
    }
  }
}

template <class Format, int64_t kRowsInterleaved = 1>
constexpr BlockGemmKernel KernelFor() {
  return {32, kPanelBlockBytes, kTileBlockBytes, PackActivations<Format::kBias>, Multiply<Format, kRowsInterleaved>};
}

}  // namespace

const BlockGemmKernels& Avx512VnniBlockGemmKernels() {
  static constexpr BlockGemmKernels kKernels = {
      KernelFor<Q8_0Format>(), KernelFor<Q4_0Format>(), KernelFor<Q4_1Format>(),
      KernelFor<Q5_0Format>(), KernelFor<Q5_1Format>(),
  };
  return kKernels;
}

const BlockGemmKernels& Avx512VnniInterleaved8BlockGemmKernels() {
  static constexpr BlockGemmKernels kKernels = {
      KernelFor<Q8_0Format, 8>(), KernelFor<Q4_0Format, 8>(), KernelFor<Q4_1Format, 8>(),
      KernelFor<Q5_0Format, 8>(), KernelFor<Q5_1Format, 8>(),
  };
  return kKernels;
}

}  // namespace kvjit::cpu::internal
