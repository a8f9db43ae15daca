// CpuNumerics::kFast's kernels for bf16 weights under AVX-512 BF16: the
// single row, the decode GEMV (four rows at a time) and the GEMM of
// BlockGemm.h, all with vdpbf16ps, which multiplies 32 bf16 pairs into 16
// f32 lanes per instruction, twice the f32 FMA's work; llama.cpp's bf16
// kernels on this ISA use it too.
//
// Their arithmetic, one (weight row, token) pair at a time, for rows whose
// columns are a multiple of 32 (MatMul.cpp sends any other row to the
// batch-invariant kernels): the activations, already rounded to bf16, and
// the weights go in 32-element chunks, in order, into one 16-lane f32
// accumulator, lane l taking elements 2l + 1 and then 2l of each chunk by
// vdpbf16ps (an exact product and one rounded add each, denormal inputs and
// results flushed to zero); the result is Fold16 of the lanes. The GEMM
// gives every pair its own accumulator, so a token's bits do not depend on
// its step (batch invariance).
//
// Same linkage rule as DotKernels.h: only the entry point is external.

#if !defined(__AVX512BF16__) || !defined(__AVX512VL__) || !defined(__AVX512BW__)
#error "BFloat16DotAvx512Bf16.cpp must be compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16"
#endif

#include "runtime/cpu/Gcc12Avx512Warnings.h"

#include <immintrin.h>

#include "runtime/cpu/BlockGemm.h"
#include "runtime/cpu/GemvRowWalk.h"
#include "runtime/cpu/Prefetch.h"
#include "runtime/cpu/TiledGemmPasses.h"

namespace kvjit::cpu::internal {
namespace {

constexpr int64_t kChunk = 32;           // elements per vdpbf16ps
constexpr int64_t kChunkBytes = 64;      // a chunk of bf16 weights or activations
constexpr int64_t kChunksPerRun = 32;    // chunks a micro-kernel call takes (4 rows' 8 KiB stay in L1)

// 32 activations (f32 values that are bf16 already, so the conversion is
// exact) as the bf16 operand of vdpbf16ps.
__m512bh ActivationChunk(const float* x) {
  return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
}

__m512bh WeightChunk(const uint8_t* p) { return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p)); }

// The 16 lanes added: the upper eight onto the lower eight, then the upper
// four of those onto the lower four, then lanes 2 and 3 onto 0 and 1, then
// lane 1 onto lane 0.
float Fold16(__m512 v) {
  const __m256 eights = _mm256_add_ps(_mm512_castps512_ps256(v),
                                      _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  const __m128 fours = _mm_add_ps(_mm256_castps256_ps128(eights), _mm256_extractf128_ps(eights, 1));
  const __m128 twos = _mm_add_ps(fours, _mm_movehl_ps(fours, fours));
  return _mm_cvtss_f32(_mm_add_ss(twos, _mm_movehdup_ps(twos)));
}

float Dot(const uint8_t* weight_row, const void* activation_row, int64_t cols) {
  const auto* x = static_cast<const float*>(activation_row);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t c = 0; c < cols / kChunk; ++c) {
    acc = _mm512_dpbf16_ps(acc, WeightChunk(weight_row + c * kChunkBytes), ActivationChunk(x + c * kChunk));
  }
  return Fold16(acc);
}

// A decode GEMV: four rows at a time sharing each activation chunk, and
// while they are read, the four rows eight further on asked for into L2, a
// chunk at a time (KQuantDotAvx512Vnni.cpp's DotKRows says why).
void DotRows(const uint8_t* weights, int64_t row_bytes, int64_t rows, const void* activation_row, int64_t cols,
             float* out) {
  const auto* x = static_cast<const float*>(activation_row);
  const int64_t chunks = cols / kChunk;
  WalkRowsByFours(
      weights, row_bytes, rows,
      [&](const uint8_t* first, const uint8_t* ahead, int64_t r) {
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        for (int64_t c = 0; c < chunks; ++c) {
          const __m512bh activations = ActivationChunk(x + c * kChunk);
#pragma GCC unroll 4
          for (int i = 0; i < 4; ++i) {
            PrefetchLinesToL2(ahead + i * row_bytes + c * kChunkBytes, kChunkBytes);
            acc[i] = _mm512_dpbf16_ps(acc[i], WeightChunk(first + i * row_bytes + c * kChunkBytes), activations);
          }
        }
        for (int i = 0; i < 4; ++i) out[r + i] = Fold16(acc[i]);
      },
      [&](const uint8_t* row, int64_t r) { out[r] = Dot(row, activation_row, cols); });
}

// The GEMM's panel: per token group and chunk, the group's four tokens' 32
// bf16 activations, 64 bytes each (zeros past the last token).
constexpr int64_t kPanelChunkBytes = kGemmTokenGroup * kChunkBytes;

void PackActivations(const void* activation_rows, int64_t tokens, int64_t cols, int64_t group_begin,
                     int64_t group_end, uint8_t* panel) {
  const auto* activations = static_cast<const float*>(activation_rows);
  const int64_t chunks = cols / kChunk;
  for (int64_t group = group_begin; group < group_end; ++group) {
    for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
      const int64_t t = group * kGemmTokenGroup + i;
      for (int64_t c = 0; c < chunks; ++c) {
        uint8_t* out = panel + (group * chunks + c) * kPanelChunkBytes + i * kChunkBytes;
        const __m512i chunk = t < tokens ? reinterpret_cast<__m512i>(ActivationChunk(activations + t * cols + c * kChunk))
                                         : _mm512_setzero_si512();
        _mm512_store_si512(reinterpret_cast<__m512i*>(out), chunk);
      }
    }
  }
}

// A tile's accumulators against one token group: row r, token i in
// acc[4r + i].
struct TileSums {
  __m512 acc[16];

  static TileSums Zero() {
    TileSums sums;
    for (__m512& sum : sums.acc) sum = _mm512_setzero_ps();
    return sums;
  }
};

// Four weight rows against one token group over chunks [chunk_begin,
// chunk_end), continuing acc[4r + i] (row r, token i) in chunk order.
void MicroKernel(const uint8_t* const rows[kTileRows], const uint8_t* group_panel, int64_t chunk_begin,
                 int64_t chunk_end, __m512 acc[16]) {
  __m512 sums[16];
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k) sums[k] = acc[k];
  for (int64_t c = chunk_begin; c < chunk_end; ++c) {
    const uint8_t* p = group_panel + c * kPanelChunkBytes;
    __m512bh activations[kGemmTokenGroup];
#pragma GCC unroll 4
    for (int i = 0; i < kGemmTokenGroup; ++i) {
      activations[i] = reinterpret_cast<__m512bh>(_mm512_load_si512(p + i * kChunkBytes));
    }
#pragma GCC unroll 4
    for (int r = 0; r < kTileRows; ++r) {
      const __m512bh weights = WeightChunk(rows[r] + c * kChunkBytes);
#pragma GCC unroll 4
      for (int i = 0; i < kGemmTokenGroup; ++i) sums[4 * r + i] = _mm512_dpbf16_ps(sums[4 * r + i], weights, activations[i]);
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < 16; ++k) acc[k] = sums[k];
}

// BlockGemm.h's multiply (TiledGemmPasses.h): tiles of four rows read from
// GGUF's rows in place (bf16 needs no unpacking; `tile` is unused), each
// taken through up to kGroupsPerPass token groups in runs of chunks, so that
// the run of the four rows stays in L1 while every group reads it.
void Multiply(const uint8_t* weights, int64_t row_bytes, int64_t row_begin, int64_t row_end, const uint8_t* panel,
              int64_t tokens, int64_t cols, float* y, int64_t y_stride, uint8_t* /*tile*/) {
  const int64_t chunks = cols / kChunk;
  const uint8_t* rows[kTileRows];
  MultiplyTilesInPasses<TileSums, kChunksPerRun>(
      row_begin, row_end, tokens, chunks,
      [&](int64_t first, int64_t steps) { return NextTileRows(weights, row_bytes, first, row_end, steps); },
      [&](int64_t first, int64_t count) {
        // Rows past the end stand in as copies of the last; their sums are
        // dropped.
        for (int64_t r = 0; r < kTileRows; ++r) rows[r] = weights + (first + (r < count ? r : count - 1)) * row_bytes;
      },
      [&](int64_t group, int64_t run, int64_t run_end, TileSums& sums) {
        MicroKernel(rows, panel + group * chunks * kPanelChunkBytes, run, run_end, sums.acc);
      },
      [&](const TileSums& sums, int64_t group, int64_t first, int64_t count) {
        float results[kTileRows][kGemmTokenGroup];
        for (int64_t r = 0; r < kTileRows; ++r) {
          for (int64_t i = 0; i < kGemmTokenGroup; ++i) results[r][i] = Fold16(sums.acc[4 * r + i]);
        }
        StoreTileResults(results, group, first, count, tokens, y, y_stride);
      });
}

}  // namespace

const BFloat16FastKernels& Avx512Bf16FastKernels() {
  static constexpr BFloat16FastKernels kKernels = {
      Dot, DotRows, {kChunk, kPanelChunkBytes, 0, PackActivations, Multiply}};
  return kKernels;
}

}  // namespace kvjit::cpu::internal
