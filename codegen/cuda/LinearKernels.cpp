// Linear: y[m, n] = x[m, :] · W[n, :] (+ bias[n]), W read in its storage
// type (f32, f16, bf16 or GGUF blocks), as runtime/cpu/MatMul.cpp computes
// it from dequantized weights.
//
// Decode path (few rows): a matrix-vector kernel, one warp per output
// feature, reading each weight block once for up to kRowsPerPass rows.
// Prefill path: W dequantized to f16 and x converted to f16 in scratch, one
// cublasGemmEx with f32 accumulation (runtime/schema/kvx.fbs, CudaGemm),
// then the bias.

#include "absl/strings/str_cat.h"
#include "codegen/cuda/KernelEmitter.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/CudaLaunchAbi.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::codegen::cuda {
namespace {

constexpr uint32_t kMatVecThreads = 128;  // 4 warps, one output feature each
constexpr int64_t kRowsPerPass = 8;
constexpr uint32_t kDequantThreads = 256;

constexpr char kMatVec[] = R"cuda(
// Linear, decode path: W [@N@, @K@] @STORAGE@@BIAS_TEXT@.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kN = @N@;
  constexpr int kK = @K@;
  constexpr int kGroups = (kK + 31) / 32;
  constexpr int kRowsPerPass = @ROWS_PER_PASS@;
  const int64_t rows = @ROWS@;
  const int lane = threadIdx.x & 31;
  const int n = blockIdx.x * (@THREADS@ / 32) + (threadIdx.x >> 5);
  if (n >= kN) return;
  const int64_t first_row = static_cast<int64_t>(blockIdx.y) * kRowsPerPass;
  const int64_t row_count = min(static_cast<int64_t>(kRowsPerPass), rows - first_row);
  const uint8_t* weight_row =
      static_cast<const uint8_t*>(args.buffers[@WEIGHT@]) + static_cast<uint64_t>(n) * @ROW_BYTES@ull;
  const float* x = static_cast<const float*>(args.buffers[@X@]) + first_row * kK;
  float* y = static_cast<float*>(args.buffers[@OUT@]) + first_row * kN;
  float sums[kRowsPerPass];
#pragma unroll
  for (int r = 0; r < kRowsPerPass; ++r) sums[r] = 0.0f;
  for (int group = lane; group < kGroups; group += 32) {
    float w[32];
    @DEQUANT@(weight_row, group, kK, w);
    const int width = min(32, kK - group * 32);
#pragma unroll
    for (int r = 0; r < kRowsPerPass; ++r) {
      if (r >= row_count) break;
      const float* xr = x + r * kK + group * 32;
      float sum = 0.0f;
      for (int j = 0; j < width; ++j) sum += w[j] * xr[j];
      sums[r] += sum;
    }
  }
#pragma unroll
  for (int r = 0; r < kRowsPerPass; ++r) {
    if (r >= row_count) break;
    const float total = warp_sum(sums[r]);
    if (lane == 0) y[r * kN + n] = total + @BIAS@;
  }
}
)cuda";

constexpr char kDequantToHalf[] = R"cuda(
// Linear, prefill path: W [@N@, @K@] @STORAGE@ to f16 in scratch.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kN = @N@;
  constexpr int kK = @K@;
  constexpr int kGroups = (kK + 31) / 32;
  const int64_t item = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (item >= static_cast<int64_t>(kN) * kGroups) return;
  const int64_t n = item / kGroups;
  const int group = static_cast<int>(item % kGroups);
  float w[32];
  const uint8_t* weight_row =
      static_cast<const uint8_t*>(args.buffers[@WEIGHT@]) + static_cast<uint64_t>(n) * @ROW_BYTES@ull;
  @DEQUANT@(weight_row, group, kK, w);
  uint8_t* scratch = static_cast<uint8_t*>(args.buffers[@SCRATCH@]);
  uint16_t* out = reinterpret_cast<uint16_t*>(scratch + @WEIGHT_OFFSET@ull) + n * kK + group * 32;
  for (int j = 0; j < 32 && group * 32 + j < kK; ++j) out[j] = float_to_half(w[j]);
}
)cuda";

constexpr char kActivationToHalf[] = R"cuda(
// Linear, prefill path: x [rows, @K@] to f16 in scratch.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kK = @K@;
  const int64_t row = blockIdx.x;
  const float* x = static_cast<const float*>(args.buffers[@X@]) + row * kK;
  uint8_t* scratch = static_cast<uint8_t*>(args.buffers[@SCRATCH@]);
  uint16_t* out = reinterpret_cast<uint16_t*>(scratch + @ACTIVATION_OFFSET@ull) + row * kK;
  for (int i = threadIdx.x; i < kK; i += blockDim.x) out[i] = float_to_half(x[i]);
}
)cuda";

constexpr char kAddBias[] = R"cuda(
// Linear, prefill path: y [rows, @N@] += bias.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kN = @N@;
  float* y = static_cast<float*>(args.buffers[@OUT@]) + static_cast<int64_t>(blockIdx.x) * kN;
  for (int i = threadIdx.x; i < kN; i += blockDim.x) y[i] += @BIAS@;
}
)cuda";

uint64_t AlignScratch(uint64_t bytes) {
  return (bytes + cuda_abi::kScratchAlignment - 1) / cuda_abi::kScratchAlignment *
         cuda_abi::kScratchAlignment;
}

}  // namespace

absl::StatusOr<InstructionSpec> EmitLinear(const EmitContext& context) {
  using Operand = kvx::LinearOperand;
  const kvx::Instruction& instruction = context.instruction;
  const kvx::TensorRef& x = kvx::InputOf(instruction, Operand::X);
  KVJIT_ASSIGN_OR_RETURN(const kvx::Weight* weight,
                         WeightOf(context, kvx::OperandIndex(Operand::Weight)));
  if (weight->shape()->size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight '", weight->name()->str(), "' is not a matrix"));
  }
  const int64_t n = weight->shape()->Get(0), k = weight->shape()->Get(1);
  KVJIT_ASSIGN_OR_RETURN(std::string dequant, DequantFunction(weight->storage()));
  KVJIT_ASSIGN_OR_RETURN(uint64_t row_bytes, WeightRowBytes(weight->storage(), k));
  const bool has_bias = kvx::HasOperand(instruction, Operand::Bias);
  std::string bias_of_n = "0.0f", bias_of_i = "0.0f";
  if (has_bias) {
    KVJIT_ASSIGN_OR_RETURN(bias_of_n, ElementLoad(context, kvx::OperandIndex(Operand::Bias), "n"));
    KVJIT_ASSIGN_OR_RETURN(bias_of_i, ElementLoad(context, kvx::OperandIndex(Operand::Bias), "i"));
  }

  const size_t rank = x.shape()->size();
  const SizeExpr rows = ExtentFactors(x, 0, rank - 1);
  const uint64_t weight_offset = 0;
  const uint64_t activation_offset = AlignScratch(static_cast<uint64_t>(n) * k * 2);
  const uint32_t row_threads = RowThreads(k);
  auto fill = [&](const char* text, uint32_t threads, const std::string& bias) {
    return Fill(text, {{"N", absl::StrCat(n)},
                       {"K", absl::StrCat(k)},
                       {"STORAGE", kvx::EnumNameStorageType(weight->storage())},
                       {"BIAS_TEXT", has_bias ? ", with bias" : ""},
                       {"THREADS", absl::StrCat(threads)},
                       {"ROWS_PER_PASS", absl::StrCat(kRowsPerPass)},
                       {"ROWS", ExtentExpr(x, 0, rank - 1)},
                       {"ROW_BYTES", absl::StrCat(row_bytes)},
                       {"DEQUANT", dequant},
                       {"BIAS", bias},
                       {"X", absl::StrCat(kvx::OperandIndex(Operand::X))},
                       {"WEIGHT", absl::StrCat(kvx::OperandIndex(Operand::Weight))},
                       {"OUT", absl::StrCat(OutputBuffer(instruction, 0))},
                       {"SCRATCH", absl::StrCat(ScratchBuffer(instruction))},
                       {"WEIGHT_OFFSET", absl::StrCat(weight_offset)},
                       {"ACTIVATION_OFFSET", absl::StrCat(activation_offset)}});
  };

  InstructionSpec spec;
  spec.rows = rows;
  const uint32_t matvec =
      context.kernels.Add("linear_matvec", fill(kMatVec, kMatVecThreads, bias_of_n));
  spec.decode.launches.push_back(Launch(matvec, kMatVecThreads,
                                        DivideFirst(Static(n), kMatVecThreads / 32),
                                        DivideFirst(rows, kRowsPerPass)));

  const uint32_t to_half =
      context.kernels.Add("linear_weight_to_f16", fill(kDequantToHalf, kDequantThreads, ""));
  const uint32_t activation =
      context.kernels.Add("linear_activation_to_f16", fill(kActivationToHalf, row_threads, ""));
  spec.prefill.launches.push_back(
      Launch(to_half, kDequantThreads, DivideFirst(Static(n * ((k + 31) / 32)), kDequantThreads)));
  spec.prefill.launches.push_back(Launch(activation, row_threads, rows));
  spec.prefill.gemm = GemmSpec{rows, static_cast<uint32_t>(n), static_cast<uint32_t>(k),
                               weight_offset, activation_offset};
  if (has_bias) {
    const uint32_t bias_threads = RowThreads(n);
    const uint32_t add_bias =
        context.kernels.Add("linear_add_bias", fill(kAddBias, bias_threads, bias_of_i));
    spec.prefill.epilogue.push_back(Launch(add_bias, bias_threads, rows));
  }
  spec.prefill.scratch_fixed_bytes = activation_offset;
  spec.prefill.scratch_bytes = rows;
  spec.prefill.scratch_bytes.emplace_back(kvx::DimKind::Static, k * 2, 1);
  return spec;
}

}  // namespace kvjit::codegen::cuda
