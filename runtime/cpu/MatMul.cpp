#include "runtime/cpu/MatMul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/BlockGemm.h"
#include "runtime/cpu/DotKernels.h"
#include "runtime/quant/Dequantize.h"
#include "runtime/quant/Half.h"
#include "runtime/quant/StorageType.h"

namespace kvjit::cpu {
namespace {

using internal::DotKernels;
using internal::Q8Block32;
using internal::Q8KBlock;
using internal::RowDot;
using quant::StorageType;

// Rows per group of an interleaved weight (kvx's RowsInterleaved8), which is
// the GEMM's row group: the GEMM unpacks one group per tile.
constexpr int64_t kInterleavedRows = 8;
static_assert(kInterleavedRows == internal::kGemmRowGroup);

// What each weight type multiplies against.
enum class ActivationFormat { kF32, kF16Rounded, kBF16Rounded, kQ8_0, kQ8_1, kQ8_K };

ActivationFormat ActivationFormatFor(StorageType type) {
  switch (type) {
    case StorageType::kF32: return ActivationFormat::kF32;
    case StorageType::kF16: return ActivationFormat::kF16Rounded;
    case StorageType::kBF16: return ActivationFormat::kBF16Rounded;
    case StorageType::kQ8_0:
    case StorageType::kQ4_0:
    case StorageType::kQ5_0: return ActivationFormat::kQ8_0;
    case StorageType::kQ4_1:
    case StorageType::kQ5_1: return ActivationFormat::kQ8_1;
    case StorageType::kQ4_K:
    case StorageType::kQ5_K:
    case StorageType::kQ6_K: return ActivationFormat::kQ8_K;
  }
  return ActivationFormat::kF32;  // Unreachable: the switch covers every enumerator.
}

RowDot RowDotFor(const DotKernels& kernels, StorageType type) {
  switch (type) {
    case StorageType::kF32: return kernels.f32;
    case StorageType::kF16: return kernels.f16;
    case StorageType::kBF16: return kernels.bf16;
    case StorageType::kQ8_0: return kernels.q8_0;
    case StorageType::kQ4_0: return kernels.q4_0;
    case StorageType::kQ4_1: return kernels.q4_1;
    case StorageType::kQ5_0: return kernels.q5_0;
    case StorageType::kQ5_1: return kernels.q5_1;
    case StorageType::kQ4_K: return kernels.q4_k;
    case StorageType::kQ5_K: return kernels.q5_k;
    case StorageType::kQ6_K: return kernels.q6_k;
  }
  return kernels.f32;  // Unreachable: the switch covers every enumerator.
}

// The kernel for `type` of a table of the 32-element block types' kernels
// (the four-row or the several-rows table), or null for another type.
template <typename Kernels>
auto BlockTypeKernel(const Kernels& kernels, StorageType type) -> decltype(kernels.q8_0) {
  switch (type) {
    case StorageType::kQ8_0: return kernels.q8_0;
    case StorageType::kQ4_0: return kernels.q4_0;
    case StorageType::kQ4_1: return kernels.q4_1;
    case StorageType::kQ5_0: return kernels.q5_0;
    case StorageType::kQ5_1: return kernels.q5_1;
    default: return nullptr;
  }
}

#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
// Whether CpuNumerics::kFast's bf16 kernels (AVX-512 BF16's vdpbf16ps)
// take this weight's rows: bf16 in GGUF's rows of a multiple of 32 columns
// on a CPU that has them; every other bf16 weight keeps the batch-invariant
// kernels.
bool UsesFastBf16(CpuIsa isa, StorageType type, int64_t cols, CpuNumerics numerics) {
  return type == StorageType::kBF16 && numerics == CpuNumerics::kFast && isa == CpuIsa::kAvx512Vnni &&
         cols % 32 == 0 && CpuSupportsAvx512Bf16();
}

// Whether CpuNumerics::kFast's block sums (BlockGemmBlockSumsAvx512Vnni.cpp
// and its single rows) take this weight: a 32-element block type, in either
// layout, under AVX-512 VNNI.
bool UsesBlockSums(CpuIsa isa, StorageType type, CpuNumerics numerics) {
  return numerics == CpuNumerics::kFast && isa == CpuIsa::kAvx512Vnni && quant::ElementsPerBlock(type) == 32;
}
#endif

// The four-row kernel for `type` under `isa` and the weight's interleaving,
// or null where there is none (the rows then go one by one, with the same
// results). AVX-512 VNNI takes steps of three tokens or more through the GEMM
// instead.
internal::RowDot4 RowDot4For(CpuIsa isa, StorageType type, bool interleaved) {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (isa == CpuIsa::kAvx2) {
    return BlockTypeKernel(interleaved ? internal::Avx2Interleaved8DotKernels4() : internal::Avx2DotKernels4(),
                           type);
  }
#endif
  return nullptr;
}

// The several-rows kernel for `type` under `isa`, the weight's interleaving
// and `numerics`, or null where there is none (rows then go one by one, with
// the same results).
internal::RowsDot RowsDotFor(CpuIsa isa, StorageType type, int64_t cols, bool interleaved,
                             [[maybe_unused]] CpuNumerics numerics) {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (UsesFastBf16(isa, type, cols, numerics)) return internal::Avx512Bf16FastKernels().rows_dot;
  if (UsesBlockSums(isa, type, numerics)) {
    return BlockTypeKernel(interleaved ? internal::Avx512VnniInterleaved8BlockSumRowsDotKernels()
                                       : internal::Avx512VnniBlockSumRowsDotKernels(),
                           type);
  }
  // The K-quants' AVX-512 rows (see KQuantSingleRowDotFor), two at a time.
  if (isa == CpuIsa::kAvx512Vnni && !interleaved) {
    const internal::KQuantRowsDotKernels& k_quants = numerics == CpuNumerics::kFast
                                                         ? internal::Avx512VnniKQuantSubBlockSumRowsDotKernels()
                                                         : internal::Avx512VnniKQuantRowsDotKernels();
    switch (type) {
      case StorageType::kQ4_K: return k_quants.q4_k;
      case StorageType::kQ5_K: return k_quants.q5_k;
      case StorageType::kQ6_K: return k_quants.q6_k;
      default: break;
    }
  }
  // The float types' rows four at a time in 512-bit registers: the AVX2
  // row's bits, at up to twice its rate (docs/benchmarks.md, "Float weights'
  // decode GEMV in AVX-512").
  if (isa == CpuIsa::kAvx512Vnni && !interleaved) {
    const internal::FloatRowsDotKernels& floats = internal::Avx512FloatRowsDotKernels();
    switch (type) {
      case StorageType::kF32: return floats.f32;
      case StorageType::kF16: return floats.f16;
      case StorageType::kBF16: return floats.bf16;
      default: break;
    }
  }
  if (isa == CpuIsa::kAvx2 || isa == CpuIsa::kAvx512Vnni) {
    return BlockTypeKernel(
        interleaved ? internal::Avx2Interleaved8RowsDotKernels() : internal::Avx2RowsDotKernels(), type);
  }
#endif
  return nullptr;
}

// The register-blocked GEMM for `type` under `isa`, the weight's
// interleaving and `numerics`, or null where there is none (the four-row
// kernels then take the step, with the same results).
const internal::BlockGemmKernel* BlockGemmFor(CpuIsa isa, StorageType type, int64_t cols, bool interleaved,
                                             [[maybe_unused]] CpuNumerics numerics) {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (isa != CpuIsa::kAvx512Vnni) return nullptr;
  if (UsesFastBf16(isa, type, cols, numerics)) return &internal::Avx512Bf16FastKernels().gemm;
  // Only the 32-element block types can be interleaved (CheckWeight).
  const internal::BlockGemmKernels& blocks =
      numerics == CpuNumerics::kFast
          ? (interleaved ? internal::Avx512VnniInterleaved8BlockSumGemmKernels()
                         : internal::Avx512VnniBlockSumGemmKernels())
          : (interleaved ? internal::Avx512VnniInterleaved8BlockGemmKernels() : internal::Avx512VnniBlockGemmKernels());
  const internal::KQuantGemmKernels& k_quants = numerics == CpuNumerics::kFast
                                                    ? internal::Avx512VnniKQuantSubBlockSumGemmKernels()
                                                    : internal::Avx512VnniKQuantGemmKernels();
  const internal::FloatGemmKernels& floats = internal::Avx512FloatGemmKernels();
  switch (type) {
    case StorageType::kF32: return &floats.f32;
    case StorageType::kF16: return &floats.f16;
    case StorageType::kBF16: return &floats.bf16;
    case StorageType::kQ8_0: return &blocks.q8_0;
    case StorageType::kQ4_0: return &blocks.q4_0;
    case StorageType::kQ4_1: return &blocks.q4_1;
    case StorageType::kQ5_0: return &blocks.q5_0;
    case StorageType::kQ5_1: return &blocks.q5_1;
    case StorageType::kQ4_K: return &k_quants.q4_k;
    case StorageType::kQ5_K: return &k_quants.q5_k;
    case StorageType::kQ6_K: return &k_quants.q6_k;
  }
#endif
  return nullptr;
}

const DotKernels& KernelsFor(CpuIsa isa) {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  // kAvx512Vnni's single rows are AVX2's but for the K-quants' (see
  // SingleRowDotFor): a decode GEMV of the 32-element block types is bound by
  // reading the weights, and vpdpbusd measured ~15% slower there than AVX2's
  // pair of instructions (runtime/cpu/bench/KernelBench.cpp).
  if (isa == CpuIsa::kAvx2 || isa == CpuIsa::kAvx512Vnni) return internal::Avx2DotKernels();
#endif
  return internal::PortableDotKernels();
}

// The K-quants' single-row kernel for `type` under `isa` and `numerics`, or null where
// KernelsFor's is the one. Unlike the 32-element block types', the
// K-quants' decode GEMV is bound by the arithmetic, not by reading the
// weights: in 512-bit registers it measured 1.4-1.8x AVX2's
// (docs/benchmarks.md, "K-quant decode GEMV in AVX-512"). One-token steps
// take these rows two at a time (RowsDotFor); two or three tokens, one by one.
RowDot KQuantSingleRowDotFor(CpuIsa isa, StorageType type, [[maybe_unused]] CpuNumerics numerics) {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (isa != CpuIsa::kAvx512Vnni) return nullptr;
  const internal::KQuantDotKernels& k_quants = numerics == CpuNumerics::kFast
                                                   ? internal::Avx512VnniKQuantSubBlockSumDotKernels()
                                                   : internal::Avx512VnniKQuantDotKernels();
  switch (type) {
    case StorageType::kQ4_K: return k_quants.q4_k;
    case StorageType::kQ5_K: return k_quants.q5_k;
    case StorageType::kQ6_K: return k_quants.q6_k;
    default: return nullptr;
  }
#endif
  return nullptr;
}

// The single-row kernel for `type`, whose rows are interleaved by 8 where
// `interleaved` (only the 32-element block types can be).
RowDot SingleRowDotFor(CpuIsa isa, StorageType type, int64_t cols, bool interleaved, CpuNumerics numerics) {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (UsesFastBf16(isa, type, cols, numerics)) return internal::Avx512Bf16FastKernels().dot;
  if (UsesBlockSums(isa, type, numerics)) {
    return BlockTypeKernel(interleaved ? internal::Avx512VnniInterleaved8BlockSumDotKernels()
                                       : internal::Avx512VnniBlockSumDotKernels(),
                           type);
  }
#endif
  if (!interleaved) {
    const RowDot k_quant = KQuantSingleRowDotFor(isa, type, numerics);
    return k_quant != nullptr ? k_quant : RowDotFor(KernelsFor(isa), type);
  }
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (isa == CpuIsa::kAvx2 || isa == CpuIsa::kAvx512Vnni) {
    return BlockTypeKernel(internal::Avx2Interleaved8DotKernels(), type);
  }
#endif
  return BlockTypeKernel(internal::PortableInterleaved8DotKernels(), type);
}

int64_t ActivationRowBytes(ActivationFormat format, int64_t cols) {
  switch (format) {
    case ActivationFormat::kF32:
    case ActivationFormat::kF16Rounded:
    case ActivationFormat::kBF16Rounded: return cols * static_cast<int64_t>(sizeof(float));
    case ActivationFormat::kQ8_0:
    case ActivationFormat::kQ8_1: return cols / 32 * static_cast<int64_t>(sizeof(Q8Block32));
    case ActivationFormat::kQ8_K: return cols / 256 * static_cast<int64_t>(sizeof(Q8KBlock));
  }
  return 0;  // Unreachable: the switch covers every enumerator.
}

float RoundThroughHalf(float value) { return quant::HalfToFloat(quant::FloatToHalf(value)); }

// Round to nearest, ties to even, for |value| < 2^22: adding 1.5 * 2^23 puts
// the rounded integer in the low mantissa bits (the rounding mode's default).
int32_t RoundToNearestEven(float value) {
  const float shifted = value + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &shifted, sizeof bits);
  return (bits & 0x007fffff) - 0x00400000;
}

// ggml's x86 Q8_0 / Q8_1 quantization of one 32-element block.
void QuantizeQ8Block32(const float* x, Q8Block32& out) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
  int32_t sum = 0;
  for (int i = 0; i < 32; ++i) {
    const int32_t q = RoundToNearestEven(x[i] * inverse);
    out.q[i] = static_cast<int8_t>(q);
    sum += q;
  }
  out.scale = RoundThroughHalf(d);
  out.scaled_sum = RoundThroughHalf(d * static_cast<float>(sum));
}

// ggml's Q8_K quantization of one 256-element super-block: the element of
// largest magnitude maps to -127 (so the scale's sign follows it), and the
// scale stays f32.
void QuantizeQ8KBlock(const float* x, Q8KBlock& out) {
  float amax = 0.0f;
  float extreme = 0.0f;
  for (int i = 0; i < 256; ++i) {
    const float magnitude = std::fabs(x[i]);
    if (magnitude > amax) {
      amax = magnitude;
      extreme = x[i];
    }
  }
  if (amax == 0.0f) {
    std::memset(&out, 0, sizeof out);
    return;
  }
  const float inverse_scale = -127.0f / extreme;
  for (int i = 0; i < 256; ++i) out.q[i] = static_cast<int8_t>(std::min(127, RoundToNearestEven(inverse_scale * x[i])));
  for (int j = 0; j < 8; ++j) {
    int32_t sum = 0;
    for (int i = 32 * j; i < 32 * j + 32; ++i) sum += out.q[i];
    out.sums32[j] = sum;
  }
  out.scale = 1.0f / inverse_scale;
}

void PrepareActivationRow(ActivationFormat format, CpuIsa isa, const float* x, int64_t cols, uint8_t* out) {
  switch (format) {
    case ActivationFormat::kF32: std::memcpy(out, x, static_cast<size_t>(cols) * sizeof(float)); return;
    case ActivationFormat::kF16Rounded: {
      auto* rounded = reinterpret_cast<float*>(out);
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
      if (isa != CpuIsa::kPortable) return internal::Avx2RoundThroughHalf(x, cols, rounded);
#endif
      for (int64_t i = 0; i < cols; ++i) rounded[i] = RoundThroughHalf(x[i]);
      return;
    }
    case ActivationFormat::kBF16Rounded: {
      auto* rounded = reinterpret_cast<float*>(out);
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
      if (isa != CpuIsa::kPortable) return internal::Avx2RoundThroughBFloat16(x, cols, rounded);
#endif
      for (int64_t i = 0; i < cols; ++i) rounded[i] = quant::BFloat16ToFloat(quant::FloatToBFloat16(x[i]));
      return;
    }
    case ActivationFormat::kQ8_0:
    case ActivationFormat::kQ8_1:
      return internal::QuantizeQ8Blocks32(isa, x, cols / 32, reinterpret_cast<Q8Block32*>(out));
    case ActivationFormat::kQ8_K: {
      auto* blocks = reinterpret_cast<Q8KBlock*>(out);
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
      if (isa != CpuIsa::kPortable) return internal::Avx2QuantizeQ8KBlocks(x, cols / 256, blocks);
#endif
      for (int64_t b = 0; b < cols / 256; ++b) QuantizeQ8KBlock(x + 256 * b, blocks[b]);
      return;
    }
  }
}

absl::Status CheckOperands(absl::string_view kernel, const WeightView& w, const float* x, int64_t tokens,
                           const float* y) {
  if (tokens < 0) return absl::InvalidArgumentError(absl::StrCat(kernel, ": negative token count ", tokens));
  if (tokens > 0 && w.rows > 0 && w.cols > 0 && (x == nullptr || y == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": null ", x == nullptr ? "input" : "output",
                                                   " for ", tokens, " tokens x ", w.cols, " -> ", w.rows));
  }
  return absl::OkStatus();
}

// Bytes on a 64-byte boundary, for the GEMM's aligned vector loads.
struct AlignedDelete {
  void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t{64}); }
};
using AlignedBytes = std::unique_ptr<uint8_t[], AlignedDelete>;
AlignedBytes AllocateAligned(int64_t bytes) {
  return AlignedBytes(static_cast<uint8_t*>(::operator new[](static_cast<size_t>(bytes), std::align_val_t{64})));
}

// Below this many tokens the GEMM's padding to groups of four and its
// unpacking of the weights cost more than they save. A 3-token step (a
// speculative verify step of 2 drafts) costs less padded to 4 than as three
// single rows: 6.7 against 6.9 ms on SmolLM2-135M Q4_1, 2 threads.
constexpr int64_t kMinGemmTokens = 3;

// Weight rows per token tile are re-read from L1 for each token of the tile;
// the tile bounds the activations kept hot in L2. It changes no arithmetic.
constexpr int64_t kTokenTile = 16;

// Enough multiply-adds per chunk to pay for handing it to another thread.
constexpr int64_t kMinMacsPerChunk = 1 << 15;

}  // namespace

void internal::QuantizeQ8Blocks32(CpuIsa isa, const float* x, int64_t blocks, Q8Block32* out) {
#if defined(KVJIT_CPU_HAVE_AVX2_KERNELS)
  if (isa != CpuIsa::kPortable) return Avx2QuantizeQ8Blocks32(x, blocks, out);
#endif
  for (int64_t b = 0; b < blocks; ++b) QuantizeQ8Block32(x + 32 * b, out[b]);
}

absl::StatusOr<uint64_t> CheckWeight(absl::string_view kernel, const WeightView& w) {
  const absl::string_view type = quant::StorageTypeName(w.type);
  if (w.rows < 0 || w.cols < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": weight ", type, " [", w.rows, " x ", w.cols, "] has a negative dimension"));
  }
  absl::StatusOr<uint64_t> row_bytes = quant::RowBytes(w.type, w.cols);
  if (!row_bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": weight ", type, " [", w.rows, " x ", w.cols,
                                                   "]: ", row_bytes.status().message()));
  }
  if (w.rows > 0 && *row_bytes > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(w.rows)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kernel, ": weight ", type, " [", w.rows, " x ", w.cols, "] overflows a 64-bit byte count"));
  }
  if (w.rows_interleaved != 1) {
    if (w.rows_interleaved != kInterleavedRows) {
      return absl::InvalidArgumentError(absl::StrCat(kernel, ": weight ", type, " [", w.rows, " x ", w.cols,
                                                     "] has rows interleaved by ", w.rows_interleaved,
                                                     "; the kernels read 1 (GGUF's rows) or 8"));
    }
    if (BlockTypeKernel(internal::PortableInterleaved8DotKernels(), w.type) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(kernel, ": weight ", type, " [", w.rows, " x ", w.cols,
                                                     "] has rows interleaved by 8, which only the "
                                                     "32-element block types q8_0, q4_0, q4_1, q5_0 and "
                                                     "q5_1 can be"));
    }
    if (w.rows % kInterleavedRows != 0) {
      return absl::InvalidArgumentError(absl::StrCat(kernel, ": weight ", type, " [", w.rows, " x ", w.cols,
                                                     "] has rows interleaved by 8 but ", w.rows,
                                                     " rows, not a multiple of 8"));
    }
  }
  const uint64_t total_bytes = *row_bytes * static_cast<uint64_t>(w.rows);
  if (total_bytes != w.bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(kernel, ": weight ", type, " [", w.rows, " x ", w.cols, "] takes ",
                                                   total_bytes, " bytes (", w.rows, " rows of ", *row_bytes,
                                                   "), but the view has ", w.bytes.size()));
  }
  return *row_bytes;
}

absl::Status MatMul(const WeightView& w, const float* x, int64_t tokens, float* y, ThreadPool& pool) {
  return MatMul(w, x, tokens, y, pool, BestCpuIsa(), ProcessCpuNumerics());
}

absl::Status MatMul(const WeightView& w, const float* x, int64_t tokens, float* y, ThreadPool& pool, CpuIsa isa) {
  return MatMul(w, x, tokens, y, pool, isa, CpuNumerics::kBatchInvariant);
}

absl::Status MatMul(const WeightView& w, const float* x, int64_t tokens, float* y, ThreadPool& pool, CpuIsa isa,
                    CpuNumerics numerics) {
  KVJIT_ASSIGN_OR_RETURN(const uint64_t row_bytes, CheckWeight("MatMul", w));
  KVJIT_RETURN_IF_ERROR(CheckOperands("MatMul", w, x, tokens, y));
  if (!CpuSupports(isa)) {
    return absl::FailedPreconditionError(
        absl::StrCat("MatMul: the ", CpuIsaName(isa), " kernels are not available on this CPU or build"));
  }
  if (tokens == 0 || w.rows == 0) return absl::OkStatus();
  if (w.cols == 0) {
    std::fill(y, y + tokens * w.rows, 0.0f);
    return absl::OkStatus();
  }

  const ActivationFormat format = ActivationFormatFor(w.type);
  const int64_t activation_row_bytes = ActivationRowBytes(format, w.cols);
  std::vector<uint8_t> activations(static_cast<size_t>(tokens * activation_row_bytes));
  auto prepare_activations = [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      PrepareActivationRow(format, isa, x + t * w.cols, w.cols, activations.data() + t * activation_row_bytes);
    }
  };
  const uint8_t* activation_rows = activations.data();

  const int64_t rows = w.rows;
  const int64_t cols = w.cols;
  const uint8_t* weights = w.bytes.data();
  const bool interleaved = w.rows_interleaved != 1;
  // Where row o's first block lies; its next blocks follow at its kernel's
  // stride (the block's bytes, or 8 blocks' in a group).
  const uint64_t block_bytes = interleaved ? row_bytes / static_cast<uint64_t>(cols / 32) : 0;
  auto row_start = [&](int64_t o) {
    if (!interleaved) return weights + static_cast<uint64_t>(o) * row_bytes;
    return weights + static_cast<uint64_t>(o - o % kInterleavedRows) * row_bytes +
           static_cast<uint64_t>(o % kInterleavedRows) * block_bytes;
  };
  const internal::BlockGemmKernel* gemm =
      tokens >= kMinGemmTokens ? BlockGemmFor(isa, w.type, w.cols, interleaved, numerics) : nullptr;
  if (gemm != nullptr) {
    AlignedBytes panel = AllocateAligned(internal::GemmPanelBytes(*gemm, tokens, cols));
    // Each token group is quantized and laid out by the same thread: one
    // hand-off to the pool instead of two.
    pool.ParallelFor(internal::GemmTokenGroups(tokens), [&](int64_t begin, int64_t end) {
      prepare_activations(begin * internal::kGemmTokenGroup, std::min(tokens, end * internal::kGemmTokenGroup));
      gemm->pack(activation_rows, tokens, cols, begin, end, panel.get());
    });
    // Whole row groups per thread, so that none unpacks a group in part.
    const int64_t row_groups = (rows + internal::kGemmRowGroup - 1) / internal::kGemmRowGroup;
    const int64_t min_groups_per_chunk =
        std::max<int64_t>(1, kMinMacsPerChunk / (cols * tokens * internal::kGemmRowGroup));
    pool.ParallelFor(row_groups, min_groups_per_chunk, [&](int64_t begin, int64_t end) {
      AlignedBytes tile = AllocateAligned(internal::GemmTileBytes(*gemm, cols));
      gemm->multiply(weights, static_cast<int64_t>(row_bytes), begin * internal::kGemmRowGroup,
                     std::min(rows, end * internal::kGemmRowGroup), panel.get(), tokens, cols, y, rows, tile.get());
    });
    return absl::OkStatus();
  }

  pool.ParallelFor(tokens, prepare_activations);
  const RowDot dot = SingleRowDotFor(isa, w.type, w.cols, interleaved, numerics);
  const internal::RowDot4 dot4 = RowDot4For(isa, w.type, interleaved);
  const int64_t min_rows_per_chunk = std::max<int64_t>(1, kMinMacsPerChunk / (cols * tokens));
  const internal::RowsDot rows_dot = tokens == 1 ? RowsDotFor(isa, w.type, w.cols, interleaved, numerics) : nullptr;
  if (rows_dot != nullptr && interleaved) {
    // Whole groups per call: a group's rows lie in one stream.
    const int64_t min_groups_per_chunk = std::max<int64_t>(1, min_rows_per_chunk / kInterleavedRows);
    pool.ParallelFor(rows / kInterleavedRows, min_groups_per_chunk, [&](int64_t begin, int64_t end) {
      for (int64_t group = begin; group < end; ++group) {
        rows_dot(row_start(group * kInterleavedRows), static_cast<int64_t>(block_bytes), kInterleavedRows,
                 activation_rows, cols, y + group * kInterleavedRows);
      }
    });
    return absl::OkStatus();
  }
  if (rows_dot != nullptr) {
    pool.ParallelFor(rows, min_rows_per_chunk, [&](int64_t begin, int64_t end) {
      rows_dot(weights + static_cast<uint64_t>(begin) * row_bytes, static_cast<int64_t>(row_bytes), end - begin,
               activation_rows, cols, y + begin);
    });
    return absl::OkStatus();
  }
  pool.ParallelFor(rows, min_rows_per_chunk, [&](int64_t begin, int64_t end) {
    for (int64_t tile = 0; tile < tokens; tile += kTokenTile) {
      const int64_t tile_end = std::min(tokens, tile + kTokenTile);
      for (int64_t o = begin; o < end; ++o) {
        const uint8_t* weight_row = row_start(o);
        int64_t t = tile;
        for (; dot4 != nullptr && t + 4 <= tile_end; t += 4) {
          const void* rows_of_four[4];
          float results[4];
          for (int r = 0; r < 4; ++r) rows_of_four[r] = activation_rows + (t + r) * activation_row_bytes;
          dot4(weight_row, rows_of_four, cols, results);
          for (int r = 0; r < 4; ++r) y[(t + r) * rows + o] = results[r];
        }
        for (; t < tile_end; ++t) {
          y[t * rows + o] = dot(weight_row, activation_rows + t * activation_row_bytes, cols);
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::Status MatMulF32Reference(const WeightView& w, const float* x, int64_t tokens, float* y) {
  KVJIT_ASSIGN_OR_RETURN(const uint64_t row_bytes, CheckWeight("MatMulF32Reference", w));
  KVJIT_RETURN_IF_ERROR(CheckOperands("MatMulF32Reference", w, x, tokens, y));
  if (w.rows_interleaved != 1) {
    return absl::InvalidArgumentError("MatMulF32Reference: the oracle reads GGUF's rows, not interleaved ones");
  }
  std::vector<float> weight_row(static_cast<size_t>(w.cols));
  for (int64_t o = 0; o < w.rows; ++o) {
    KVJIT_RETURN_IF_ERROR(quant::DequantizeRow(w.type, w.bytes.subspan(static_cast<size_t>(o) * row_bytes, row_bytes),
                                               absl::MakeSpan(weight_row)));
    for (int64_t t = 0; t < tokens; ++t) {
      double sum = 0.0;
      for (int64_t i = 0; i < w.cols; ++i) sum += static_cast<double>(weight_row[i]) * x[t * w.cols + i];
      y[t * w.rows + o] = static_cast<float>(sum);
    }
  }
  return absl::OkStatus();
}

}  // namespace kvjit::cpu
