// RmsNorm and AddRmsNorm: x / sqrt(mean(x²) + epsilon) · weight over each
// row, AddRmsNorm first adding the residual (tfm.rms_norm, alone and after
// the residual add it fuses). Their runtime description, CPU kernels
// (runtime/cpu/RowKernels.cpp) and CUDA kernels.

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/RowKernels.h"
#include "runtime/ops/RowOps.h"

namespace kvjit::runtime {
namespace {

// RmsNorm: in x, weight → out. AddRmsNorm: in a, b, weight → out sum, normed.
absl::Status VerifyNorm(const OpCheckContext& context) {
  const kvx::TensorRef& x = context.input(0);
  const kvx::TensorRef& weight = context.input(context.num_inputs() - 1);
  const size_t outputs = context.instruction.outputs()->size();
  return OutputFits(SameShape(context.output(0), x) && LastStaticDim(weight) == LastStaticDim(x) &&
                    (outputs < 2 || SameShape(context.output(1), x)) &&
                    (context.num_inputs() < 3 || SameShape(context.input(1), x)));
}

// x², their sum, the scaling and the weight's product per element.
void CostRmsNorm(const OpCostContext& context, InstructionCost& cost) {
  cost.flops = 4 * context.output_elements;
}

void CostAddRmsNorm(const OpCostContext& context, InstructionCost& cost) {
  cost.flops = 5 * context.output_elements;
}

// ---- CPU ----

// RmsNorm: in x, weight → out.
absl::Status RunRmsNorm(CpuOpContext& context) {
  KVJIT_ASSIGN_OR_RETURN(float* x, context.Floats(context.input(0)));
  KVJIT_ASSIGN_OR_RETURN(float* weight, context.Floats(context.input(1)));
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(context.output(0)));
  const int64_t w = context.Width(context.input(0));
  return cpu::RmsNorm(x, weight, context.instruction.params_as_RmsNormParams()->epsilon(),
                      context.Elements(context.input(0)) / w, w, out, context.pool);
}

// AddRmsNorm: in a, b, weight → out sum, normed.
absl::Status RunAddRmsNorm(CpuOpContext& context) {
  KVJIT_ASSIGN_OR_RETURN(float* a, context.Floats(context.input(0)));
  KVJIT_ASSIGN_OR_RETURN(float* b, context.Floats(context.input(1)));
  KVJIT_ASSIGN_OR_RETURN(float* weight, context.Floats(context.input(2)));
  KVJIT_ASSIGN_OR_RETURN(float* sum, context.Floats(context.output(0)));
  KVJIT_ASSIGN_OR_RETURN(float* normed, context.Floats(context.output(1)));
  const int64_t n = context.Elements(context.input(0));
  if (sum != a) std::memcpy(sum, a, n * sizeof(float));
  const int64_t w = context.Width(context.input(0));
  return cpu::AddRmsNorm(sum, b, weight, context.instruction.params_as_RmsNormParams()->epsilon(),
                         n / w, w, normed, context.pool);
}

// ---- CUDA ----

constexpr char kRmsNorm[] = R"cuda(
// RmsNorm over rows of @WIDTH@, eps @EPS_TEXT@.
extern "C" __global__ void __launch_bounds__(@THREADS@)
KVJIT_KERNEL(const kvjit::cuda_abi::LaunchArgs args) {
  constexpr int kWidth = @WIDTH@;
  __shared__ float reduce[32];
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kWidth;
  const float* x = static_cast<const float*>(args.buffers[0]) + base;
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
  const float* a = static_cast<const float*>(args.buffers[0]) + base;
  const float* b = static_cast<const float*>(args.buffers[1]) + base;
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

absl::Status EmitNorm(CudaRowKernelEmitter& emitter, const char* text, absl::string_view stem,
                      int weight_input) {
  const kvx::TensorRef& x = *emitter.instruction().inputs()->Get(0);
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
                       threads, 0, rank - 1);
  return absl::OkStatus();
}

absl::Status EmitRmsNorm(CudaRowKernelEmitter& emitter) {
  return EmitNorm(emitter, kRmsNorm, "rms_norm", 1);
}

absl::Status EmitAddRmsNorm(CudaRowKernelEmitter& emitter) {
  return EmitNorm(emitter, kAddRmsNorm, "add_rms_norm", 2);
}

}  // namespace

const RowOp kRmsNormOp = {
    {kvx::OpCode::RmsNorm, 2, 2, 1, kvx::OpParams::RmsNormParams, false, VerifyNorm, CostRmsNorm},
    RunRmsNorm,
    EmitRmsNorm,
};

const RowOp kAddRmsNormOp = {
    {kvx::OpCode::AddRmsNorm, 3, 3, 2, kvx::OpParams::RmsNormParams, false, VerifyNorm,
     CostAddRmsNorm},
    RunAddRmsNorm,
    EmitAddRmsNorm,
};

}  // namespace kvjit::runtime
