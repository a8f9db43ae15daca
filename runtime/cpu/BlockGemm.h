#ifndef KVJIT_RUNTIME_CPU_BLOCKGEMM_H_
#define KVJIT_RUNTIME_CPU_BLOCKGEMM_H_

// Internal to kvjit_cpu_kernels: register-blocked matrix products for the
// 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) against Q8Block32
// activations, for steps of several tokens (prefill, batched decode). Each
// result is bit for bit its RowDot's (DotKernels.h's numeric contract), so
// a token's output does not depend on whether it went through a GEMM.
//
// The product runs in two stages:
//  - the step's activations are laid out once per call in a panel: tokens
//    in groups of four, each block's bytes, scales and integer corrections
//    where the micro-kernel loads them whole (kPanelBlockBytes per group and
//    block);
//  - each thread takes a range of weight rows and, eight rows at a time,
//    unpacks their blocks once into a scratch tile (kTileBlockBytes per
//    block) that every token group then reads from L1.
//
// Same linkage rule as DotKernels.h: the translation units that define these
// are compiled for AVX-512, so this header holds only types, constants and
// declarations.

#include <cstdint>

#include "runtime/cpu/DotKernels.h"

namespace kvjit::cpu::internal {

constexpr int64_t kGemmTokenGroup = 4;
constexpr int64_t kGemmRowGroup = 8;

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

static constexpr int64_t GemmTokenGroups(int64_t tokens) {
  return (tokens + kGemmTokenGroup - 1) / kGemmTokenGroup;
}
static constexpr int64_t GemmPanelBytes(int64_t tokens, int64_t cols) {
  return GemmTokenGroups(tokens) * (cols / 32) * kPanelBlockBytes;
}
static constexpr int64_t GemmTileBytes(int64_t cols) { return (cols / 32) * kTileBlockBytes; }

// Writes the panel's token groups [group_begin, group_end) from `tokens`
// rows of cols / 32 activation blocks each (row t at activations + t *
// (cols / 32)); tokens past the last are zeros. The panel is 64-byte aligned.
using PackGemmActivations = void (*)(const Q8Block32* activations, int64_t tokens, int64_t cols,
                                     int64_t group_begin, int64_t group_end, uint8_t* panel);

// y[t * y_stride + o] for every token t < tokens and weight row o in
// [row_begin, row_end); weight row o starts at weights + o * row_bytes.
// `tile` holds GemmTileBytes(cols), 64-byte aligned.
using BlockGemm = void (*)(const uint8_t* weights, int64_t row_bytes, int64_t row_begin, int64_t row_end,
                           const uint8_t* panel, int64_t tokens, int64_t cols, float* y, int64_t y_stride,
                           uint8_t* tile);

struct BlockGemmKernel {
  PackGemmActivations pack;
  BlockGemm multiply;
};

struct BlockGemmKernels {
  BlockGemmKernel q8_0;
  BlockGemmKernel q4_0;
  BlockGemmKernel q4_1;
  BlockGemmKernel q5_0;
  BlockGemmKernel q5_1;
};

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
const BlockGemmKernels& Avx512VnniBlockGemmKernels();
// The same products over weights in kvx's RowsInterleaved8 layout
// (runtime/schema/WeightLayout.h): `weights + o * row_bytes` is then the
// start of the group of row o, a multiple of 8, and the row group's tile is
// unpacked from one stream. The same bits.
const BlockGemmKernels& Avx512VnniInterleaved8BlockGemmKernels();
#endif

}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_BLOCKGEMM_H_
