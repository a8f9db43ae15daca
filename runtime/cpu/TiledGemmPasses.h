#ifndef KVJIT_RUNTIME_CPU_TILEDGEMMPASSES_H_
#define KVJIT_RUNTIME_CPU_TILEDGEMMPASSES_H_
// The loop of BlockGemm.h's multiply that the AVX-512 GEMMs of four-row tiles
// share (KQuantGemmParts.h's K-quant GEMMs, BlockGemmBlockSumsAvx512Vnni.cpp's
// 32-element blocks, BFloat16DotAvx512Bf16.cpp's bf16 rows): a thread's rows
// in tiles of kTileRows, each made ready once and taken through up to
// kGroupsPerPass token groups in runs of blocks, so that a tile's run stays
// in L1 while every group of the pass reads it and the pass's panel stays
// in L2. Each kernel brings its tile, its micro-kernel and its sums.
//
// Included only by translation units compiled for AVX-512, in an anonymous
// namespace (DotKernels.h's linkage rule).

#if !defined(__AVX512F__)
#error "TiledGemmPasses.h is for translation units compiled with AVX-512"
#endif

#include <cstdint>

#include "runtime/cpu/BlockGemm.h"
#include "runtime/cpu/Prefetch.h"

namespace kvjit::cpu::internal {
namespace {

// The micro-kernels' rows: a tile holds this many weight rows.
constexpr int64_t kTileRows = 4;
static_assert(kGemmRowGroup % kTileRows == 0, "a thread's row range is whole tiles");

// Token groups per pass over a thread's rows, whose panel blocks stay in L2
// while every tile reads them (K-quants: 32 groups of 1536 columns take 276
// KiB; 32-element blocks, 2048 columns: 448 KiB).
constexpr int64_t kGroupsPerPass = 32;

// For each tile of the rows [row_begin, row_end) and each pass of token
// groups: make_tile(first, count) once (unpack the tile's `count` rows from
// row `first`), then multiply_run(group, run, run_end, sums) for blocks
// [run, run_end) of every group of the pass, run after run, into that
// group's Sums (from Sums::Zero()), each after a step of next_rows(first,
// steps) (what comes after the tile: a SpreadPrefetch over `steps` steps),
// then store(sums, group, first, count).
template <class Sums, int64_t kBlocksPerRun, class NextRows, class MakeTile, class MultiplyRun, class Store>
__attribute__((always_inline)) inline void MultiplyTilesInPasses(int64_t row_begin, int64_t row_end, int64_t tokens,
                                                                 int64_t blocks, NextRows next_rows,
                                                                 MakeTile make_tile, MultiplyRun multiply_run,
                                                                 Store store) {
  const int64_t groups = GemmTokenGroups(tokens);
  const int64_t runs = (blocks + kBlocksPerRun - 1) / kBlocksPerRun;
  for (int64_t pass = 0; pass < groups; pass += kGroupsPerPass) {
    const int64_t pass_end = groups - pass < kGroupsPerPass ? groups : pass + kGroupsPerPass;
    for (int64_t first = row_begin; first < row_end; first += kTileRows) {
      const int64_t count = row_end - first < kTileRows ? row_end - first : kTileRows;
      make_tile(first, count);
      SpreadPrefetch next = next_rows(first, runs * (pass_end - pass));
      Sums sums[kGroupsPerPass];
      for (int64_t group = pass; group < pass_end; ++group) sums[group - pass] = Sums::Zero();
      for (int64_t run = 0; run < blocks; run += kBlocksPerRun) {
        const int64_t run_end = blocks - run < kBlocksPerRun ? blocks : run + kBlocksPerRun;
        for (int64_t group = pass; group < pass_end; ++group) {
          next.Step();
          multiply_run(group, run, run_end, sums[group - pass]);
        }
      }
      for (int64_t group = pass; group < pass_end; ++group) store(sums[group - pass], group, first, count);
    }
  }
}

// The SpreadPrefetch of the tile after the one at row `first`: its rows,
// contiguous in GGUF's layout, none past `row_end`.
inline SpreadPrefetch NextTileRows(const uint8_t* weights, int64_t row_bytes, int64_t first, int64_t row_end,
                                   int64_t steps) {
  return SpreadPrefetchOfRows(weights, row_bytes, first + kTileRows, kTileRows, row_end, steps);
}

// A group's results[r][i] (row first + r, token 4 * group + i) into y, rows
// past `count` and tokens past `tokens` left out.
inline void StoreTileResults(const float results[kTileRows][kGemmTokenGroup], int64_t group, int64_t first,
                             int64_t count, int64_t tokens, float* y, int64_t y_stride) {
  for (int64_t i = 0; i < kGemmTokenGroup; ++i) {
    const int64_t t = group * kGemmTokenGroup + i;
    if (t >= tokens) break;
    for (int64_t r = 0; r < count; ++r) y[t * y_stride + first + r] = results[r][i];
  }
}

}  // namespace
}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_TILEDGEMMPASSES_H_
