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

// RmsNorm: in x, weight → out.
absl::Status VerifyRmsNorm(const OpCheckContext& context) {
  using Operand = kvx::RmsNormOperand;
  const kvx::TensorRef& x = context.input(Operand::X);
  return OutputFits(SameShape(context.output(0), x) &&
                    LastStaticDim(context.input(Operand::Weight)) == LastStaticDim(x));
}

// AddRmsNorm: in a, b, weight → out sum, normed.
absl::Status VerifyAddRmsNorm(const OpCheckContext& context) {
  using Operand = kvx::AddRmsNormOperand;
  const kvx::TensorRef& a = context.input(Operand::A);
  return OutputFits(SameShape(context.output(0), a) &&
                    LastStaticDim(context.input(Operand::Weight)) == LastStaticDim(a) &&
                    SameShape(context.output(1), a) && SameShape(context.input(Operand::B), a));
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
  using Operand = kvx::RmsNormOperand;
  const kvx::TensorRef& x_ref = context.input(Operand::X);
  KVJIT_ASSIGN_OR_RETURN(float* x, context.Floats(x_ref));
  KVJIT_ASSIGN_OR_RETURN(float* weight, context.Floats(context.input(Operand::Weight)));
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(context.output(0)));
  const int64_t w = context.Width(x_ref);
  return cpu::RmsNorm(x, weight, context.instruction.params_as_RmsNormParams()->epsilon(),
                      context.Elements(x_ref) / w, w, out, context.pool);
}

// AddRmsNorm: in a, b, weight → out sum, normed.
absl::Status RunAddRmsNorm(CpuOpContext& context) {
  using Operand = kvx::AddRmsNormOperand;
  const kvx::TensorRef& a_ref = context.input(Operand::A);
  KVJIT_ASSIGN_OR_RETURN(float* a, context.Floats(a_ref));
  KVJIT_ASSIGN_OR_RETURN(float* b, context.Floats(context.input(Operand::B)));
  KVJIT_ASSIGN_OR_RETURN(float* weight, context.Floats(context.input(Operand::Weight)));
  KVJIT_ASSIGN_OR_RETURN(float* sum, context.Floats(context.output(0)));
  KVJIT_ASSIGN_OR_RETURN(float* normed, context.Floats(context.output(1)));
  const int64_t n = context.Elements(a_ref);
  if (sum != a) std::memcpy(sum, a, n * sizeof(float));
  const int64_t w = context.Width(a_ref);
  return cpu::AddRmsNorm(sum, b, weight, context.instruction.params_as_RmsNormParams()->epsilon(),
                         n / w, w, normed, context.pool);
}

}  // namespace

const RowOp kRmsNormOp = {
    {kvx::OpCode::RmsNorm, kvx::kOperandCount<kvx::RmsNormOperand>,
     kvx::kOperandCount<kvx::RmsNormOperand>, 1, kvx::OpParams::RmsNormParams, false, VerifyRmsNorm,
     CostRmsNorm},
    RunRmsNorm,
};

const RowOp kAddRmsNormOp = {
    {kvx::OpCode::AddRmsNorm, kvx::kOperandCount<kvx::AddRmsNormOperand>,
     kvx::kOperandCount<kvx::AddRmsNormOperand>, 2, kvx::OpParams::RmsNormParams, false,
     VerifyAddRmsNorm, CostAddRmsNorm},
    RunAddRmsNorm,
};

}  // namespace kvjit::runtime
