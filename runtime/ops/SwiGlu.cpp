// SwiGlu: silu(gate) · up, element by element (fuse-elementwise's swiglu
// template). Its runtime description and CPU kernel
// (runtime/cpu/RowKernels.cpp); codegen/cuda/rowops/SwiGlu.cpp writes its
// CUDA kernel.

#include "runtime/core/StatusMacros.h"
#include "runtime/cpu/RowKernels.h"
#include "runtime/ops/RowOps.h"

namespace kvjit::runtime {
namespace {

// SwiGlu: in gate, up → out silu(gate)·up.
absl::Status VerifySwiGlu(const OpCheckContext& context) {
  const kvx::TensorRef& gate = context.input(kvx::SwiGluOperand::Gate);
  return OutputFits(SameShape(context.output(0), gate) &&
                    SameShape(context.input(kvx::SwiGluOperand::Up), gate));
}

void CostSwiGlu(const OpCostContext& context, InstructionCost& cost) {
  cost.flops = 4 * context.output_elements;
}

// ---- CPU ----

// Floats from one row's start to the next: a column view's stride, else the
// row's own width.
int64_t RowStride(const kvx::TensorRef& ref, int64_t width) {
  return ref.row_stride() != 0 ? static_cast<int64_t>(ref.row_stride()) : width;
}

// SwiGlu: in gate, up → out silu(gate)·up; either input may be a column view.
absl::Status RunSwiGlu(CpuOpContext& context) {
  const kvx::TensorRef& gate_ref = context.input(kvx::SwiGluOperand::Gate);
  const kvx::TensorRef& up_ref = context.input(kvx::SwiGluOperand::Up);
  KVJIT_ASSIGN_OR_RETURN(float* gate, context.Floats(gate_ref));
  KVJIT_ASSIGN_OR_RETURN(float* up, context.Floats(up_ref));
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(context.output(0)));
  const int64_t n = context.Elements(gate_ref);
  if (gate_ref.row_stride() == 0 && up_ref.row_stride() == 0) {
    return cpu::SwiGlu(gate, up, out, n, context.pool);
  }
  const int64_t rows = context.Extent(gate_ref, 0);
  const int64_t w = rows > 0 ? n / rows : 0;
  return cpu::SwiGluRows(gate, RowStride(gate_ref, w), up, RowStride(up_ref, w), out, rows, w,
                         context.pool);
}

}  // namespace

const RowOp kSwiGluOp = {
    {kvx::OpCode::SwiGlu, kvx::kOperandCount<kvx::SwiGluOperand>,
     kvx::kOperandCount<kvx::SwiGluOperand>, 1, kvx::OpParams::NONE, true, VerifySwiGlu,
     CostSwiGlu},
    RunSwiGlu,
};

}  // namespace kvjit::runtime
