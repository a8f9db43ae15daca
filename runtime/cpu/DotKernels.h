#ifndef KVJIT_RUNTIME_CPU_DOTKERNELS_H_
#define KVJIT_RUNTIME_CPU_DOTKERNELS_H_

// Internal to kvjit_cpu_kernels: the row-by-row dot products behind MatMul,
// shared by the portable and the x86 translation units.
//
// This header is included by translation units compiled for AVX2. It must
// hold only types and functions with internal linkage: an inline function
// with external linkage would be emitted by both units, and the linker could
// keep the AVX2 copy for callers on machines without AVX2.

#include <cstdint>
#include <cstring>

#include "runtime/cpu/CpuIsa.h"

namespace kvjit::cpu::internal {

// Activations quantized the way ggml quantizes the right-hand side of each
// weight type's vec_dot. Only the arithmetic follows ggml; the layouts are
// kvjit's own (the scales are kept as floats already rounded to f16 where
// ggml stores f16, so the kernels need not convert them).

// For Q8_0 / Q4_0 / Q5_0 weights (ggml's Q8_0) and Q4_1 / Q5_1 weights
// (ggml's Q8_1, whose s = d * sum(q) carries the weights' offset m).
struct Q8Block32 {
  float scale;       // f16-rounded amax / 127
  float scaled_sum;  // f16-rounded (amax / 127) * sum(q); used with offsets only
  int8_t q[32];
};

// For the K-quants (ggml's Q8_K): one f32 scale per 256 elements.
struct Q8KBlock {
  float scale;
  int32_t sums32[8];  // sum of q over each 32-element sub-block, for the mins
  int8_t q[256];
};

// dot(weight row, activation row) over `cols` elements. The activation row
// is float (already rounded to f16 / bf16 for those weight types),
// Q8Block32[] or Q8KBlock[] depending on the weight type.
using RowDot = float (*)(const uint8_t* weight_row, const void* activation_row, int64_t cols);

struct DotKernels {
  RowDot f32;
  RowDot f16;
  RowDot bf16;
  RowDot q8_0;
  RowDot q4_0;
  RowDot q4_1;
  RowDot q5_0;
  RowDot q5_1;
  RowDot q4_k;
  RowDot q5_k;
  RowDot q6_k;
};

// ggml's x86 Q8_0 quantization of `blocks` consecutive 32-element blocks of
// x: the activations of the 32-element block types' dot products, and a
// q8_0 KV cache's rows. AVX2 unless `isa` is kPortable; the same bytes
// either way.
void QuantizeQ8Blocks32(CpuIsa isa, const float* x, int64_t blocks, Q8Block32* out);

const DotKernels& PortableDotKernels();
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
const DotKernels& Avx2DotKernels();
// MatMul.cpp's QuantizeQ8Block32 over `blocks` consecutive blocks of x, in
// AVX2: the same bytes.
void Avx2QuantizeQ8Blocks32(const float* x, int64_t blocks, Q8Block32* out);
// MatMul.cpp's QuantizeQ8KBlock over `blocks` consecutive super-blocks of x,
// and its rounding of n activations through f16 and bf16, in AVX2 + F16C:
// the same bits.
void Avx2QuantizeQ8KBlocks(const float* x, int64_t blocks, Q8KBlock* out);
void Avx2RoundThroughHalf(const float* x, int64_t n, float* out);
void Avx2RoundThroughBFloat16(const float* x, int64_t n, float* out);
#endif

// The K-quants' single-row kernels in AVX-512 BW/VL/VNNI
// (KQuantDotAvx512Vnni.cpp): the same bits as Avx2DotKernels()'s.
struct KQuantDotKernels {
  RowDot q4_k;
  RowDot q5_k;
  RowDot q6_k;
};
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
const KQuantDotKernels& Avx512VnniKQuantDotKernels();
// CpuNumerics::kFast's: each sub-block's products summed as one integer
// before its scale, the scaled sums as one integer per super-block before one
// fma: the bits of Avx512VnniKQuantSubBlockSumGemmKernels().
const KQuantDotKernels& Avx512VnniKQuantSubBlockSumDotKernels();
#endif

// One weight row against four activation rows at once, each result bit for
// bit its RowDot's; for the 32-element block types, where unpacking a block
// once for several tokens pays (prefill, batched decode). AVX2 only: the
// AVX-512 VNNI path has the register-blocked GEMM of BlockGemm.h.
using RowDot4 = void (*)(const uint8_t* weight_row, const void* const activation_rows[4],
                         int64_t cols, float out[4]);
struct DotKernels4 {
  RowDot4 q8_0;
  RowDot4 q4_0;
  RowDot4 q4_1;
  RowDot4 q5_0;
  RowDot4 q5_1;
};
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
const DotKernels4& Avx2DotKernels4();
#endif

// One activation row against `rows` consecutive weight rows (row r at
// weights + r * row_bytes), out[r] bit for bit its RowDot's; for the
// 32-element block types, where a decode GEMV runs rows two at a time to
// overlap their chains of FMAs. AVX2 only (the portable path goes row by row)
// but for the K-quants' AVX-512 rows below.
using RowsDot = void (*)(const uint8_t* weights, int64_t row_bytes, int64_t rows, const void* activation_row,
                         int64_t cols, float* out);
struct RowsDotKernels {
  RowsDot q8_0;
  RowsDot q4_0;
  RowsDot q4_1;
  RowsDot q5_0;
  RowsDot q5_1;
};
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
const RowsDotKernels& Avx2RowsDotKernels();
#endif

// KQuantDotKernels' rows two at a time (KQuantDotAvx512Vnni.cpp).
struct KQuantRowsDotKernels {
  RowsDot q4_k;
  RowsDot q5_k;
  RowsDot q6_k;
};
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
const KQuantRowsDotKernels& Avx512VnniKQuantRowsDotKernels();
const KQuantRowsDotKernels& Avx512VnniKQuantSubBlockSumRowsDotKernels();
#endif

// The 32-element block types' single-row kernels, for the interleaved layout.
struct BlockDotKernels {
  RowDot q8_0;
  RowDot q4_0;
  RowDot q4_1;
  RowDot q5_0;
  RowDot q5_1;
};

// The kernels above over weights in kvx's RowsInterleaved8 layout
// (runtime/schema/WeightLayout.h), with the same operations in the same order
// and so the same bits: a weight row pointer is the row's first block (its
// group's start plus its index in the group times the block's bytes), and
// each next block of the row lies 8 blocks further on. A RowsDot takes one
// group: the group's start as `weights`, the block's bytes as `row_bytes`.
const BlockDotKernels& PortableInterleaved8DotKernels();
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
const BlockDotKernels& Avx2Interleaved8DotKernels();
const DotKernels4& Avx2Interleaved8DotKernels4();
const RowsDotKernels& Avx2Interleaved8RowsDotKernels();
// CpuNumerics::kFast's single rows of the 32-element block types in AVX-512
// BW/VL/VNNI (BlockDotBlockSumsAvx512Vnni.cpp), in GGUF's rows and
// interleaved: each block's products summed as one integer, eight blocks to
// a register, one fma per block; the bits of Avx512VnniBlockSumGemmKernels()
// (BlockGemm.h), not of the kernels above.
const BlockDotKernels& Avx512VnniBlockSumDotKernels();
const BlockDotKernels& Avx512VnniInterleaved8BlockSumDotKernels();
const RowsDotKernels& Avx512VnniBlockSumRowsDotKernels();
const RowsDotKernels& Avx512VnniInterleaved8BlockSumRowsDotKernels();
#endif

// The numeric contract both implementations follow exactly, so that their
// results agree bit for bit:
//
// Quantized weights. A 32-element vector of integer products w_e * q_e is
// cut into 8 lanes of 4 consecutive elements (lane m: elements 4m..4m+3),
// the natural result of a byte multiply-add followed by a pairwise add. Per
// block (32 elements) or super-block (256), integer lane sums L_m are formed
// (for the K-quants weighted by the sub-block scales, exactly), and each of
// 8 float accumulators takes acc_m = fma(d, float(L_m), acc_m) with d the
// product of the weight's and the activation's scales. Offsets (Q4_1/Q5_1's
// m * s, the K-quants' -dmin * sum(min * bsum)) go to one scalar accumulator
// by fma. The result is LaneSum(acc) + offset.
//
// Float weights. Chunks of 32 elements feed 4 x 8 accumulators by fma
// (accumulator j, lane l: element 32c + 8j + l); they are combined as
// (a0 + a1) + (a2 + a3) lane by lane, then LaneSum; the remaining cols % 32
// products are added in double, as ggml does, and the sum rounded to float.

// ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)): the order in which a
// 256-bit register is folded in halves.
static inline float LaneSum(const float lanes[8]) {
  return ((lanes[0] + lanes[4]) + (lanes[2] + lanes[6])) + ((lanes[1] + lanes[5]) + (lanes[3] + lanes[7]));
}

// Q4_K / Q5_K keep eight 6-bit scales and mins in 12 bytes: sub-blocks 0..3
// in the low 6 bits of bytes j and j + 4; sub-blocks 4..7 with their low 4
// bits in byte j + 4 (scale low nibble, min high nibble) and their top 2 bits
// in the spare top bits of bytes j - 4 (scale) and j (min).
static inline void UnpackKScalesAndMins(const uint8_t packed[12], int32_t scales[8], int32_t mins[8]) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = packed[j] & 63;
    mins[j] = packed[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    scales[j] = (packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4);
    mins[j] = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// UnpackKScalesAndMins word by word: bytes 0..7 of `scales` and `mins` are
// sub-blocks 0..7's.
struct KScalesAndMinsBytes {
  uint64_t scales;
  uint64_t mins;
};
static inline KScalesAndMinsBytes UnpackKScalesAndMinsBytes(const uint8_t packed[12]) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof w);
  constexpr uint32_t kSixBits = 0x3f3f3f3f, kLowNibbles = 0x0f0f0f0f, kTwoBits = 0x03030303;
  const uint32_t scales_low = w[0] & kSixBits;
  const uint32_t mins_low = w[1] & kSixBits;
  const uint32_t scales_high = (w[2] & kLowNibbles) | (((w[0] >> 6) & kTwoBits) << 4);
  const uint32_t mins_high = ((w[2] >> 4) & kLowNibbles) | (((w[1] >> 6) & kTwoBits) << 4);
  return {scales_low | (static_cast<uint64_t>(scales_high) << 32), mins_low | (static_cast<uint64_t>(mins_high) << 32)};
}

}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_DOTKERNELS_H_
