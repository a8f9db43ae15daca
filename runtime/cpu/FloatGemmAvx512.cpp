// The register-blocked GEMM of BlockGemm.h for float weights (f32, f16,
// bf16) in AVX-512, and their decode GEMV (DotRows, the same contract).
//
// DotKernels.h's contract gives every (weight row, token) pair four 8-lane
// accumulators fed by FMA, chunk by chunk of 32 columns: accumulators 0 and 1
// take the chunk's first 16 columns, 2 and 3 its last 16, so one 512-bit
// register holds a pair's first two accumulators and another its last two,
// each taking one FMA per chunk -- the contract's own operations in its own
// order. The two halves never meet until the end, so the micro-kernel runs
// the columns twice, once per half, with 4 rows x 4 tokens = 16 accumulators
// in flight: per chunk 4 weight and 4 activation loads feed 16 FMAs.
//
// The weights are converted to f32 once per group of 8 rows into the tile
// (f16 by vcvtph2ps, bf16 by a shift: both exact), which every token group
// then reads from L1 or L2; the activations (already rounded by MatMul.cpp)
// are laid out once per call. Both put the chunks where aligned loads find
// them, and the cols % 32 tail columns apart, after all the chunks: the
// tail's products are added in double, as the single-row kernels add them.

#if !defined(__AVX512F__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "FloatGemmAvx512.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl"
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

#include <immintrin.h>

#include <cstring>

#include "runtime/cpu/BlockGemm.h"
#include "runtime/cpu/GemvRowWalk.h"
#include "runtime/cpu/Prefetch.h"
#include "runtime/quant/Half.h"

namespace kvjit::cpu::internal {
namespace {

constexpr int64_t kChunk = 32;  // columns per chunk of the contract's 4 x 8 accumulators
constexpr int64_t kHalf = 16;   // columns of one 512-bit register

// Panel: per token group, the first halves of every chunk, chunk by chunk,
// the group's four tokens' 16 activations each (256 bytes per chunk), then
// the second halves likewise; after every group's chunks, each group's four
// tokens' tail columns. Tile: the first halves of every chunk, the eight
// rows' 16 weights each (512 bytes per chunk), then the second halves; then
// the eight rows' tail columns. A half's pass of the micro-kernel so reads
// consecutive lines (interleaving the halves line by line would leave half
// of L1's sets unused). Both come to 16 (panel, per group) and 32 (tile)
// bytes per column, the sizes BlockGemm.h's formulas give for one-column
// blocks.
constexpr int64_t kPanelColumnBytes = kGemmTokenGroup * sizeof(float);
constexpr int64_t kTileColumnBytes = kGemmRowGroup * sizeof(float);
constexpr int64_t kPanelHalfChunkFloats = kGemmTokenGroup * kHalf;
constexpr int64_t kTileHalfChunkFloats = kGemmRowGroup * kHalf;

// The micro-kernel's rows: the row group in two quads.
constexpr int64_t kQuad = 4;

// Each format: 16 elements of a row from column i as f32 (exactly), and one.
struct F32Elements {
  static constexpr int kBytes = 4;
  static __m512 Load16(const uint8_t* row, int64_t i) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
  static float Load1(const uint8_t* row, int64_t i) {
    float value;
    std::memcpy(&value, row + 4 * i, sizeof value);
    return value;
  }
};

struct F16Elements {
  static constexpr int kBytes = 2;
  static __m512 Load16(const uint8_t* row, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
  }
  static float Load1(const uint8_t* row, int64_t i) {
    uint16_t bits;
    std::memcpy(&bits, row + 2 * i, sizeof bits);
    return _cvtsh_ss(bits);
  }
};

struct BF16Elements {
  static constexpr int kBytes = 2;
  static __m512 Load16(const uint8_t* row, int64_t i) {
    const __m512i widened = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(widened, 16));
  }
  static float Load1(const uint8_t* row, int64_t i) {
    uint16_t bits;
    std::memcpy(&bits, row + 2 * i, sizeof bits);
    return quant::BFloat16ToFloat(bits);
  }
};

// Where the panel's tail columns start: after every token group's chunks.
float* PanelTails(uint8_t* panel, int64_t tokens, int64_t vector_cols) {
  return reinterpret_cast<float*>(panel) + GemmTokenGroups(tokens) * kGemmTokenGroup * vector_cols;
}
const float* PanelTails(const uint8_t* panel, int64_t tokens, int64_t vector_cols) {
  return reinterpret_cast<const float*>(panel) + GemmTokenGroups(tokens) * kGemmTokenGroup * vector_cols;
}

void PackActivations(const void* activation_rows, int64_t tokens, int64_t cols, int64_t group_begin,
                     int64_t group_end, uint8_t* panel) {
  const auto* activations = static_cast<const float*>(activation_rows);
  const int64_t chunks = cols / kChunk;
  const int64_t vector_cols = chunks * kChunk;
  const int64_t tail = cols - vector_cols;
  float* tails = PanelTails(panel, tokens, vector_cols);
  for (int64_t group = group_begin; group < group_end; ++group) {
    auto* chunk_out = reinterpret_cast<float*>(panel) + group * kGemmTokenGroup * vector_cols;
    float* tail_out = tails + group * kGemmTokenGroup * tail;
    for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
      const int64_t t = group * kGemmTokenGroup + i;
      const float* x = activations + (t < tokens ? t : 0) * cols;  // read only where t < tokens
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t c = 0; c < chunks; ++c) {
          float* out = chunk_out + (h * chunks + c) * kPanelHalfChunkFloats + i * kHalf;
          _mm512_store_ps(out, t < tokens ? _mm512_loadu_ps(x + c * kChunk + h * kHalf) : _mm512_setzero_ps());
        }
      }
      for (int64_t k = 0; k < tail; ++k) tail_out[i * tail + k] = t < tokens ? x[vector_cols + k] : 0.0f;
    }
  }
}

// Converts `count` (at most 8) rows from `rows` (row r at rows + r *
// row_bytes) into the tile; the rest of the group's eight are zeros.
template <class Elements>
void UnpackTile(const uint8_t* rows, int64_t row_bytes, int64_t count, int64_t cols, float* tile) {
  const int64_t chunks = cols / kChunk;
  const int64_t vector_cols = chunks * kChunk;
  const int64_t tail = cols - vector_cols;
  float* tails = tile + kGemmRowGroup * vector_cols;
  for (int64_t r = 0; r < kGemmRowGroup; ++r) {
    const uint8_t* row = rows + (r < count ? r : 0) * row_bytes;  // read only where r < count
    for (int64_t c = 0; c < chunks; ++c) {
      for (int64_t h = 0; h < 2; ++h) {
        float* out = tile + (h * chunks + c) * kTileHalfChunkFloats + r * kHalf;
        _mm512_store_ps(out, r < count ? Elements::Load16(row, c * kChunk + h * kHalf) : _mm512_setzero_ps());
      }
    }
    for (int64_t k = 0; k < tail; ++k) tails[r * tail + k] = r < count ? Elements::Load1(row, vector_cols + k) : 0.0f;
  }
}

// One half (`half` 0: accumulators 0 and 1, 1: 2 and 3) of the chunks for
// four rows of the tile from row `quad` against one token group's panel
// chunks: acc[r][t] for row quad + r and token t of the group.
void MicroKernel(const float* tile, int64_t quad, const float* panel, int64_t chunks, int64_t half,
                 __m512 acc[kQuad][kGemmTokenGroup]) {
  __m512 a[kQuad][kGemmTokenGroup];
#pragma GCC unroll 4
  for (int r = 0; r < kQuad; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < kGemmTokenGroup; ++t) a[r][t] = _mm512_setzero_ps();
  }
  const float* w = tile + half * chunks * kTileHalfChunkFloats + quad * kHalf;
  const float* x = panel + half * chunks * kPanelHalfChunkFloats;
  for (int64_t c = 0; c < chunks; ++c) {
    __m512 activations[kGemmTokenGroup];
#pragma GCC unroll 4
    for (int t = 0; t < kGemmTokenGroup; ++t) activations[t] = _mm512_load_ps(x + t * kHalf);
#pragma GCC unroll 4
    for (int r = 0; r < kQuad; ++r) {
      const __m512 weights = _mm512_load_ps(w + r * kHalf);
#pragma GCC unroll 4
      for (int t = 0; t < kGemmTokenGroup; ++t) a[r][t] = _mm512_fmadd_ps(weights, activations[t], a[r][t]);
    }
    w += kTileHalfChunkFloats;
    x += kPanelHalfChunkFloats;
  }
#pragma GCC unroll 4
  for (int r = 0; r < kQuad; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < kGemmTokenGroup; ++t) acc[r][t] = a[r][t];
  }
}

// The contract's end for one pair: (a0 + a1) + (a2 + a3) lane by lane, the
// fold of DotKernels.h's LaneSum, then the tail's products in double.
__m256 UpperEight(__m512 v) { return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)); }

float Finish(__m512 first_half, __m512 second_half, const float* weight_tail, const float* activation_tail,
             int64_t tail) {
  const __m256 a01 = _mm256_add_ps(_mm512_castps512_ps256(first_half), UpperEight(first_half));
  const __m256 a23 = _mm256_add_ps(_mm512_castps512_ps256(second_half), UpperEight(second_half));
  const __m256 lanes = _mm256_add_ps(a01, a23);
  const __m128 halves = _mm_add_ps(_mm256_castps256_ps128(lanes), _mm256_extractf128_ps(lanes, 1));
  const __m128 pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
  double sum = _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
  for (int64_t k = 0; k < tail; ++k) sum += static_cast<double>(weight_tail[k] * activation_tail[k]);
  return static_cast<float>(sum);
}

// Token groups per pass over a thread's rows: every row group reads their
// panel chunks again, which must stay in L2 (32 groups of 1536 columns take
// 768 KiB); a longer step converts each row group once per pass.
constexpr int64_t kGroupsPerPass = 32;

template <class Elements>
void Multiply(const uint8_t* weights, int64_t row_bytes, int64_t row_begin, int64_t row_end, const uint8_t* panel,
              int64_t tokens, int64_t cols, float* y, int64_t y_stride, uint8_t* tile_bytes) {
  const int64_t chunks = cols / kChunk;
  const int64_t vector_cols = chunks * kChunk;
  const int64_t tail = cols - vector_cols;
  auto* tile = reinterpret_cast<float*>(tile_bytes);
  const float* weight_tails = tile + kGemmRowGroup * vector_cols;
  const float* activation_tails = PanelTails(panel, tokens, vector_cols);
  const int64_t groups = GemmTokenGroups(tokens);
  for (int64_t pass = 0; pass < groups; pass += kGroupsPerPass) {
    const int64_t pass_end = groups - pass < kGroupsPerPass ? groups : pass + kGroupsPerPass;
    for (int64_t first = row_begin; first < row_end; first += kGemmRowGroup) {
      const int64_t count = row_end - first < kGemmRowGroup ? row_end - first : kGemmRowGroup;
      // The next group's rows come in while this one is unpacked and
      // multiplied (KQuantGemmAvx512Vnni.cpp's reason).
      if (first + kGemmRowGroup < row_end) {
        PrefetchLines(weights + (first + kGemmRowGroup) * row_bytes, count * row_bytes);
      }
      UnpackTile<Elements>(weights + first * row_bytes, row_bytes, count, cols, tile);
      for (int64_t group = pass; group < pass_end; ++group) {
        const float* group_panel = reinterpret_cast<const float*>(panel) + group * kGemmTokenGroup * vector_cols;
        const float* group_tails = activation_tails + group * kGemmTokenGroup * tail;
        for (int64_t quad = 0; quad < count; quad += kQuad) {
          __m512 first_halves[kQuad][kGemmTokenGroup];
          __m512 second_halves[kQuad][kGemmTokenGroup];
          MicroKernel(tile, quad, group_panel, chunks, 0, first_halves);
          MicroKernel(tile, quad, group_panel, chunks, 1, second_halves);
          for (int64_t r = 0; r < kQuad && quad + r < count; ++r) {
            for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
              const int64_t t = group * kGemmTokenGroup + i;
              if (t >= tokens) break;
              y[t * y_stride + first + quad + r] =
                  Finish(first_halves[r][i], second_halves[r][i], weight_tails + (quad + r) * tail,
                         group_tails + i * tail, tail);
            }
          }
        }
      }
    }
  }
}

// A decode GEMV in the contract's bits: kRows rows at a time sharing each
// chunk's activation loads, a row's accumulators 0 and 1 in one 512-bit
// register and 2 and 3 in another (one FMA each per chunk: the AVX2 row's
// four). While they are read, the rows eight further on are asked for into
// L2, a chunk at a time (KQuantDotAvx512Vnni.cpp's DotKRows says why).
template <class Elements, int kRows>
void DotRowGroup(const uint8_t* first, int64_t row_bytes, const uint8_t* ahead, const float* x, int64_t cols,
                 float* out) {
  constexpr int64_t kChunkBytes = kChunk * static_cast<int64_t>(Elements::kBytes);
  const int64_t chunks = cols / kChunk;
  __m512 first_halves[kRows], second_halves[kRows];
#pragma GCC unroll 4
  for (int i = 0; i < kRows; ++i) first_halves[i] = second_halves[i] = _mm512_setzero_ps();
  for (int64_t c = 0; c < chunks; ++c) {
    const __m512 x_first = _mm512_loadu_ps(x + c * kChunk);
    const __m512 x_second = _mm512_loadu_ps(x + c * kChunk + kHalf);
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i) {
      const uint8_t* row = first + i * row_bytes;
      PrefetchLinesToL2(ahead + i * row_bytes + c * kChunkBytes, kChunkBytes);
      first_halves[i] = _mm512_fmadd_ps(Elements::Load16(row, c * kChunk), x_first, first_halves[i]);
      second_halves[i] = _mm512_fmadd_ps(Elements::Load16(row, c * kChunk + kHalf), x_second, second_halves[i]);
    }
  }
  const int64_t vector_cols = chunks * kChunk;
  const int64_t tail = cols - vector_cols;
  for (int i = 0; i < kRows; ++i) {
    float weight_tail[kChunk];
    for (int64_t k = 0; k < tail; ++k) weight_tail[k] = Elements::Load1(first + i * row_bytes, vector_cols + k);
    out[i] = Finish(first_halves[i], second_halves[i], weight_tail, x + vector_cols, tail);
  }
}

template <class Elements>
void DotRows(const uint8_t* weights, int64_t row_bytes, int64_t rows, const void* activation_row, int64_t cols,
             float* out) {
  const auto* x = static_cast<const float*>(activation_row);
  WalkRowsByFours(
      weights, row_bytes, rows,
      [&](const uint8_t* first, const uint8_t* ahead, int64_t r) {
        DotRowGroup<Elements, 4>(first, row_bytes, ahead, x, cols, out + r);
      },
      [&](const uint8_t* row, int64_t r) { DotRowGroup<Elements, 1>(row, row_bytes, row, x, cols, out + r); });
}

template <class Elements>
constexpr BlockGemmKernel KernelFor() {
  return {1, kPanelColumnBytes, kTileColumnBytes, PackActivations, Multiply<Elements>};
}

}  // namespace

const FloatGemmKernels& Avx512FloatGemmKernels() {
  static constexpr FloatGemmKernels kKernels = {
      KernelFor<F32Elements>(),
      KernelFor<F16Elements>(),
      KernelFor<BF16Elements>(),
  };
  return kKernels;
}

const FloatRowsDotKernels& Avx512FloatRowsDotKernels() {
  static constexpr FloatRowsDotKernels kKernels = {DotRows<F32Elements>, DotRows<F16Elements>,
                                                   DotRows<BF16Elements>};
  return kKernels;
}

}  // namespace kvjit::cpu::internal
