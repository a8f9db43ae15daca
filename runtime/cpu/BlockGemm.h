#ifndef KVJIT_RUNTIME_CPU_BLOCKGEMM_H_
#define KVJIT_RUNTIME_CPU_BLOCKGEMM_H_

// Internal to kvjit_cpu_kernels: register-blocked matrix products of a
// weight type against its prepared activations (MatMul.cpp's activation
// formats), for steps of several tokens (prefill, batched decode). Each
// result is bit for bit its RowDot's (DotKernels.h's numeric contract), so
// a token's output does not depend on whether it went through a GEMM.
//
// The product runs in two stages:
//  - the step's activations are laid out once per call in a panel: tokens
//    in groups of four, each block's values, scales and corrections where
//    the micro-kernel loads them whole;
//  - each thread takes a range of weight rows and, eight rows at a time,
//    unpacks their blocks once into a scratch tile that every token group
//    then reads from L1.
//
// A kernel states its block (the columns the panel and the tile are cut
// into) and the bytes its panel and tile take per block.
//
// Same linkage rule as DotKernels.h: the translation units that define these
// are compiled for AVX-512, so this header holds only types, constants and
// declarations.

#include <cstdint>

#include "runtime/cpu/DotKernels.h"

namespace kvjit::cpu::internal {

constexpr int64_t kGemmTokenGroup = 4;
constexpr int64_t kGemmRowGroup = 8;

static constexpr int64_t GemmTokenGroups(int64_t tokens) {
  return (tokens + kGemmTokenGroup - 1) / kGemmTokenGroup;
}

// Writes the panel's token groups [group_begin, group_end) from `tokens`
// rows of prepared activations (row t at activations + t times the row's
// bytes in its format: cols / 32 Q8Block32, cols / 256 Q8KBlock or cols
// floats); tokens past the last are zeros. The panel is 64-byte aligned.
using PackGemmActivations = void (*)(const void* activations, int64_t tokens, int64_t cols, int64_t group_begin,
                                     int64_t group_end, uint8_t* panel);

// y[t * y_stride + o] for every token t < tokens and weight row o in
// [row_begin, row_end); weight row o starts at weights + o * row_bytes.
// `tile` holds GemmTileBytes(cols), 64-byte aligned.
using BlockGemm = void (*)(const uint8_t* weights, int64_t row_bytes, int64_t row_begin, int64_t row_end,
                           const uint8_t* panel, int64_t tokens, int64_t cols, float* y, int64_t y_stride,
                           uint8_t* tile);

struct BlockGemmKernel {
  int64_t block_elements;     // columns per block of the panel and the tile
  int64_t panel_block_bytes;  // per token group and block
  int64_t tile_block_bytes;   // per row group and block
  PackGemmActivations pack;
  BlockGemm multiply;
};

// A row's last block may be short (the fast numerics' octets of 32-element
// blocks); the panel and the tile hold it whole.
static constexpr int64_t GemmBlocks(const BlockGemmKernel& kernel, int64_t cols) {
  return (cols + kernel.block_elements - 1) / kernel.block_elements;
}
static constexpr int64_t GemmPanelBytes(const BlockGemmKernel& kernel, int64_t tokens, int64_t cols) {
  return GemmTokenGroups(tokens) * GemmBlocks(kernel, cols) * kernel.panel_block_bytes;
}
static constexpr int64_t GemmTileBytes(const BlockGemmKernel& kernel, int64_t cols) {
  return GemmBlocks(kernel, cols) * kernel.tile_block_bytes;
}

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

// CpuNumerics::kFast's GEMMs of the same types, in both layouts
// (BlockGemmBlockSumsAvx512Vnni.cpp): each block's products summed as one
// integer before one fma per block, eight blocks to a register, in octets of
// 256 columns (the last may be short). Not RowDot's bits: the bits of
// Avx512VnniBlockSumDotKernels().
const BlockGemmKernels& Avx512VnniBlockSumGemmKernels();
const BlockGemmKernels& Avx512VnniInterleaved8BlockSumGemmKernels();

// The K-quants against Q8KBlock activations (KQuantGemmAvx512Vnni.cpp), in
// 256-element super-blocks.
struct KQuantGemmKernels {
  BlockGemmKernel q4_k;
  BlockGemmKernel q5_k;
  BlockGemmKernel q6_k;
};
const KQuantGemmKernels& Avx512VnniKQuantGemmKernels();
// CpuNumerics::kFast's K-quant GEMMs (KQuantGemmSubBlockSumsAvx512Vnni.cpp):
// each sub-block's products summed as one integer before its scale, the
// scaled sums as one integer per super-block before one fma. Not RowDot's
// bits: the same integers, other float roundings.
const KQuantGemmKernels& Avx512VnniKQuantSubBlockSumGemmKernels();

// Float weights, in GGUF's rows (FloatGemmAvx512.cpp): one-column blocks,
// since a float row may have any number of columns; the same bits as the
// float RowDots, cols % 32 tail included.
struct FloatGemmKernels {
  BlockGemmKernel f32;
  BlockGemmKernel f16;
  BlockGemmKernel bf16;
};
const FloatGemmKernels& Avx512FloatGemmKernels();

// Their decode GEMV (FloatGemmAvx512.cpp): four rows at a time in 512-bit
// registers, the float RowDots' bits.
struct FloatRowsDotKernels {
  RowsDot f32;
  RowsDot f16;
  RowsDot bf16;
};
const FloatRowsDotKernels& Avx512FloatRowsDotKernels();

// CpuNumerics::kFast's bf16 weights under AVX-512 BF16
// (BFloat16DotAvx512Bf16.cpp), for rows of a multiple of 32 columns: the
// single row, the decode GEMV and the GEMM, all in vdpbf16ps's arithmetic
// (not the float RowDots' bits). Only where CpuSupportsAvx512Bf16().
struct BFloat16FastKernels {
  RowDot dot;
  RowsDot rows_dot;
  BlockGemmKernel gemm;
};
const BFloat16FastKernels& Avx512Bf16FastKernels();
#endif

}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_BLOCKGEMM_H_
