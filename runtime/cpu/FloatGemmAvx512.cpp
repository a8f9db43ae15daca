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
// The micro-kernel reads the weights from their rows, a quad of rows a run
// of chunks at a time, and converts them as it loads them (f16 by
// vcvtph2ps, bf16 by a shift: both exact); the run stays in L1 while every
// token group of the pass takes it. The activations (already rounded by
// MatMul.cpp) are laid out once per call, where aligned loads find them, the
// cols % 32 tail columns apart, after all the chunks: the tail's products are
// added in double, as the single-row kernels add them. A pair's accumulators
// wait in memory between runs: each takes its chunks in order, so the runs
// change no bit.

#if !defined(__AVX512F__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "FloatGemmAvx512.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl"
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

#include <immintrin.h>

#include <algorithm>
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
// tokens' tail columns: 16 bytes per column and group, BlockGemm.h's size
// for one-column blocks. The tile holds the row group's tail columns only
// (8 x cols % 32 floats, within its 32 bytes per column).
constexpr int64_t kPanelColumnBytes = kGemmTokenGroup * sizeof(float);
constexpr int64_t kTileColumnBytes = kGemmRowGroup * sizeof(float);
constexpr int64_t kPanelHalfChunkFloats = kGemmTokenGroup * kHalf;

// The micro-kernel's rows: the row group in two quads.
constexpr int64_t kQuad = 4;
constexpr int64_t kQuads = kGemmRowGroup / kQuad;

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

// Chunks per run: a quad's run (4 rows x 1024 columns: 8 KiB in f16) stays
// in L1 while every token group of the pass takes it, and the pass's panel
// for the run (32 groups: 512 KiB) in L2 while the quads and halves take it.
// Converting a row group's whole rows into a tile first (64 KiB at 2048
// columns, then read from L2 by every group) and asking for the next
// group's rows all at once ran 16-token steps 20-35% slower (2048 x 2048,
// 2048 -> 8192, 8192 -> 2048 in f16; 128 tokens level); runs of 512 and
// 2048 columns did less well than 1024.
constexpr int64_t kChunksPerRun = 32;

// The `tail` columns from `vector_cols` of `count` rows, row r's at tails +
// r * tail.
template <class Elements>
void UnpackTails(const uint8_t* rows, int64_t row_bytes, int64_t count, int64_t vector_cols, int64_t tail,
                 float* tails) {
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t k = 0; k < tail; ++k) tails[r * tail + k] = Elements::Load1(rows + r * row_bytes, vector_cols + k);
  }
}

// One half (`half` 0: DotKernels.h's accumulators 0 and 1, 1: 2 and 3) of
// `chunks` chunks from chunk `run` of four weight rows against one token
// group's panel from `x`: acc[r][t] for row r and token t of the group,
// continued chunk by chunk.
template <class Elements>
void MicroKernel(const uint8_t* const rows[kQuad], int64_t half, int64_t run, const float* x, int64_t chunks,
                 __m512 acc[kQuad][kGemmTokenGroup]) {
  __m512 a[kQuad][kGemmTokenGroup];
#pragma GCC unroll 4
  for (int r = 0; r < kQuad; ++r) {
#pragma GCC unroll 4
    for (int t = 0; t < kGemmTokenGroup; ++t) a[r][t] = acc[r][t];
  }
  for (int64_t c = 0; c < chunks; ++c) {
    __m512 activations[kGemmTokenGroup];
#pragma GCC unroll 4
    for (int t = 0; t < kGemmTokenGroup; ++t) activations[t] = _mm512_load_ps(x + t * kHalf);
#pragma GCC unroll 4
    for (int r = 0; r < kQuad; ++r) {
      const __m512 weights = Elements::Load16(rows[r], (run + c) * kChunk + half * kHalf);
#pragma GCC unroll 4
      for (int t = 0; t < kGemmTokenGroup; ++t) a[r][t] = _mm512_fmadd_ps(weights, activations[t], a[r][t]);
    }
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

// Token groups per pass over a thread's rows, which are read once per pass.
constexpr int64_t kGroupsPerPass = 32;

// A token group's accumulators for every quad and half of a row group.
struct GroupSums {
  __m512 acc[kQuads][2][kQuad][kGemmTokenGroup];
};

template <class Elements>
void Multiply(const uint8_t* weights, int64_t row_bytes, int64_t row_begin, int64_t row_end, const uint8_t* panel,
              int64_t tokens, int64_t cols, float* y, int64_t y_stride, uint8_t* tile_bytes) {
  const int64_t chunks = cols / kChunk;
  const int64_t vector_cols = chunks * kChunk;
  const int64_t tail = cols - vector_cols;
  auto* weight_tails = reinterpret_cast<float*>(tile_bytes);
  const auto* panel_floats = reinterpret_cast<const float*>(panel);
  const float* activation_tails = PanelTails(panel, tokens, vector_cols);
  const int64_t groups = GemmTokenGroups(tokens);
  GroupSums sums[kGroupsPerPass];
  for (int64_t pass = 0; pass < groups; pass += kGroupsPerPass) {
    const int64_t pass_end = groups - pass < kGroupsPerPass ? groups : pass + kGroupsPerPass;
    for (int64_t first = row_begin; first < row_end; first += kGemmRowGroup) {
      const int64_t count = row_end - first < kGemmRowGroup ? row_end - first : kGemmRowGroup;
      const int64_t quads = (count + kQuad - 1) / kQuad;
      UnpackTails<Elements>(weights + first * row_bytes, row_bytes, count, vector_cols, tail, weight_tails);
      for (int64_t group = pass; group < pass_end; ++group) {
        for (auto& half_sums : sums[group - pass].acc) {
          for (auto& rows : half_sums) {
            for (auto& row : rows) {
              for (__m512& sum : row) sum = _mm512_setzero_ps();
            }
          }
        }
      }
      for (int64_t run = 0; run < chunks; run += kChunksPerRun) {
        const int64_t run_chunks = chunks - run < kChunksPerRun ? chunks - run : kChunksPerRun;
        // The next run's rows (the next row group's first run after the
        // last) come in a few lines per micro-kernel while this run is
        // multiplied (KQuantGemmParts.h's reason).
        const bool last_run = run + kChunksPerRun >= chunks;
        const int64_t next_first = last_run ? first + kGemmRowGroup : first;
        const int64_t next_run = last_run ? 0 : run + kChunksPerRun;
        const int64_t next_count = std::min(kGemmRowGroup, row_end - next_first);
        const int64_t next_chunks = std::min(kChunksPerRun, chunks - next_run);
        SpreadPrefetch next_rows(weights + next_first * row_bytes + next_run * kChunk * Elements::kBytes, row_bytes,
                                 next_count, next_chunks * kChunk * Elements::kBytes,
                                 quads * 2 * (pass_end - pass));
        for (int64_t quad = 0; quad < quads; ++quad) {
          for (int64_t half = 0; half < 2; ++half) {
            const uint8_t* quad_rows[kQuad];
            for (int64_t r = 0; r < kQuad; ++r) {
              const int64_t row = kQuad * quad + r;
              quad_rows[r] = weights + (first + (row < count ? row : 0)) * row_bytes;
            }
            for (int64_t group = pass; group < pass_end; ++group) {
              const float* x = panel_floats + group * kGemmTokenGroup * vector_cols +
                               (half * chunks + run) * kPanelHalfChunkFloats;
              next_rows.Step();
              MicroKernel<Elements>(quad_rows, half, run, x, run_chunks, sums[group - pass].acc[quad][half]);
            }
          }
        }
      }
      for (int64_t group = pass; group < pass_end; ++group) {
        const GroupSums& group_sums = sums[group - pass];
        const float* group_tails = activation_tails + group * kGemmTokenGroup * tail;
        for (int64_t r = 0; r < count; ++r) {
          for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
            const int64_t t = group * kGemmTokenGroup + i;
            if (t >= tokens) break;
            y[t * y_stride + first + r] =
                Finish(group_sums.acc[r / kQuad][0][r % kQuad][i], group_sums.acc[r / kQuad][1][r % kQuad][i],
                       weight_tails + r * tail, group_tails + i * tail, tail);
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
