// The CUDA kernels of RmsNorm and AddRmsNorm (runtime/ops/RmsNorm.cpp
// describes the ops): one block per row, the sum of squares reduced across
// the block.

#include <string>

#include "absl/strings/str_cat.h"
#include "codegen/cuda/rowops/RowOpEmitters.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/schema/OpOperands.h"

namespace kvjit::codegen::cuda {
namespace {

constexpr char kRmsNorm[] = R"cuda(
// RmsNorm over rows of @WIDTH@, eps @EPS_TEXT@.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kWidth = @WIDTH@;
  __shared__ float reduce[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kWidth;
  const float* x = static_cast<const float*>(args.buffers[@X@]) + base;
  float* out = static_cast<float*>(args.buffers[@OUT@]) + base;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < kWidth; i += blockDim.x) sum += x[i] * x[i];
  const float mean = block_sum(sum, reduce) / static_cast<float>(kWidth);
  const float scale = 1.0f / sqrtf(mean + @EPS@);
  for (int i = threadIdx.x; i < kWidth; i += blockDim.x) out[i] = (x[i] * scale) * @WEIGHT@;
}
)cuda";
constexpr char kAddRmsNorm[] = R"cuda(
// AddRmsNorm: sum = a + b, then RmsNorm over rows of @WIDTH@, eps @EPS_TEXT@.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kWidth = @WIDTH@;
  __shared__ float reduce[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kWidth;
  const float* a = static_cast<const float*>(args.buffers[@A@]) + base;
  const float* b = static_cast<const float*>(args.buffers[@B@]) + base;
  float* sum_out = static_cast<float*>(args.buffers[@SUM@]) + base;
  float* normed = static_cast<float*>(args.buffers[@NORMED@]) + base;
  float squares = 0.0f;
  for (int i = threadIdx.x; i < kWidth; i += blockDim.x) {
    const float value = a[i] + b[i];
    sum_out[i] = value;
    squares += value * value;
  }
  const float mean = block_sum(squares, reduce) / static_cast<float>(kWidth);
  const float scale = 1.0f / sqrtf(mean + @EPS@);
  for (int i = threadIdx.x; i < kWidth; i += blockDim.x) {
    normed[i] = (sum_out[i] * scale) * @WEIGHT@;
  }
}
)cuda";

// A norm's kernel, `text` with its inputs' buffers filled in: rows of input
// `rows_input` (x, or AddRmsNorm's a), scaled by input `weight_input`.
absl::Status EmitNorm(CudaRowKernelEmitter& emitter, const std::string& text,
                      absl::string_view stem, int rows_input, int weight_input) {
  const kvx::TensorRef& x = *emitter.instruction().inputs()->Get(rows_input);
  const size_t rank = x.shape()->size();
  KVJIT_ASSIGN_OR_RETURN(int64_t width, StaticDim(x, rank - 1, "the row width"));
  KVJIT_ASSIGN_OR_RETURN(std::string weight, emitter.ElementLoad(weight_input, "i"));
  const uint32_t threads = RowThreads(width);
  const kvx::RmsNormParams* params = emitter.instruction().params_as_RmsNormParams();
  if (params == nullptr) return absl::InvalidArgumentError("a norm without its RmsNormParams");
  const float epsilon = params->epsilon();
  emitter.AddRowKernel(stem,
                       Fill(text, {{"THREADS", absl::StrCat(threads)},
                                   {"WIDTH", absl::StrCat(width)},
                                   {"EPS", FloatLiteral(epsilon)},
                                   {"EPS_TEXT", absl::StrCat(epsilon)},
                                   {"WEIGHT", weight},
                                   {"OUT", absl::StrCat(emitter.OutputBuffer(0))},
                                   {"SUM", absl::StrCat(emitter.OutputBuffer(0))},
                                   {"NORMED", absl::StrCat(emitter.OutputBuffer(1))}}),
                       threads, rows_input, rank - 1);
  return absl::OkStatus();
}

}  // namespace

absl::Status EmitRmsNorm(CudaRowKernelEmitter& emitter) {
  using Operand = kvx::RmsNormOperand;
  return EmitNorm(emitter, Fill(kRmsNorm, {{"X", absl::StrCat(kvx::OperandIndex(Operand::X))}}),
                  "rms_norm", kvx::OperandIndex(Operand::X), kvx::OperandIndex(Operand::Weight));
}

absl::Status EmitAddRmsNorm(CudaRowKernelEmitter& emitter) {
  using Operand = kvx::AddRmsNormOperand;
  return EmitNorm(emitter,
                  Fill(kAddRmsNorm, {{"A", absl::StrCat(kvx::OperandIndex(Operand::A))},
                                     {"B", absl::StrCat(kvx::OperandIndex(Operand::B))}}),
                  "add_rms_norm", kvx::OperandIndex(Operand::A),
                  kvx::OperandIndex(Operand::Weight));
}

}  // namespace kvjit::codegen::cuda
