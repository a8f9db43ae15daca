// RmsNorm and AddRmsNorm: x / sqrt(mean(x²) + epsilon) · weight over each
// row, AddRmsNorm first adding the residual (tfm.rms_norm, alone and after
// the residual add it fuses). Their runtime description and CPU kernels
// (runtime/cpu/RowKernels.cpp); codegen/cuda/rowops/RmsNorm.cpp writes their
// CUDA kernels.

#include <cstring>

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

}  // namespace

const RowOp kRmsNormOp = {
    {kvx::OpCode::RmsNorm, 2, 2, 1, kvx::OpParams::RmsNormParams, false, VerifyNorm, CostRmsNorm},
    RunRmsNorm,
};

const RowOp kAddRmsNormOp = {
    {kvx::OpCode::AddRmsNorm, 3, 3, 2, kvx::OpParams::RmsNormParams, false, VerifyNorm,
     CostAddRmsNorm},
    RunAddRmsNorm,
};

}  // namespace kvjit::runtime
