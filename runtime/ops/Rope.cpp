// Rope: rotary position embedding of each head, both pairings, with linear
// and Llama 3 frequency scaling or per-pair frequency factors
// (tfm.rope). Its runtime description and CPU kernel (runtime/cpu/Rope.cpp);
// codegen/cuda/rowops/Rope.cpp writes its CUDA kernel, which computes what
// the CPU kernel computes.

#include "runtime/cpu/Rope.h"

#include "runtime/core/StatusMacros.h"
#include "runtime/ops/RowOps.h"

namespace kvjit::runtime {
namespace {

// Rope: in x [T, heads, head_dim], positions → out.
absl::Status VerifyRope(const OpCheckContext& context) {
  const kvx::TensorRef& x = context.input(kvx::RopeOperand::X);
  if (absl::Status fits = OutputFits(SameShape(context.output(0), x)); !fits.ok()) return fits;
  return HeadOperand(context, x, /*of_the_cache=*/false);
}

// Each rotated pair: four multiplies and two adds.
void CostRope(const OpCostContext& context, InstructionCost& cost) {
  const int64_t head_dim =
      Extent(kvx::InputOf(context.instruction, kvx::RopeOperand::X), 2, context.sizes);
  const kvx::RopeParams& rope = *context.instruction.params_as_RopeParams();
  const int64_t rotary = rope.rotary_dim() > 0 ? rope.rotary_dim() : head_dim;
  cost.flops = 3 * (context.output_elements / head_dim) * rotary;
}

// ---- CPU ----

cpu::RopeParams RopeParamsOf(const kvx::RopeParams* rope, int64_t head_dim) {
  cpu::RopeParams params;
  if (rope == nullptr) return params;
  params.style =
      rope->style() == kvx::RopeStyle::NeoX ? cpu::RopeStyle::kNeox : cpu::RopeStyle::kInterleaved;
  params.theta = rope->theta();
  params.rotary_dim = rope->rotary_dim() > 0 ? rope->rotary_dim() : head_dim;
  if (const kvx::RopeScaling* scaling = rope->scaling()) {
    switch (scaling->kind()) {
      case kvx::RopeScalingKind::None:
        break;
      case kvx::RopeScalingKind::Linear:
        params.scaling.kind = cpu::RopeScaling::Kind::kLinear;
        break;
      case kvx::RopeScalingKind::Llama3:
        params.scaling.kind = cpu::RopeScaling::Kind::kLlama3;
        break;
    }
    params.scaling.factor = scaling->factor();
    params.scaling.low_freq_factor = scaling->low_freq_factor();
    params.scaling.high_freq_factor = scaling->high_freq_factor();
    params.scaling.original_max_positions = scaling->original_context();
  }
  if (const flatbuffers::Vector<float>* factors = rope->freq_factors()) {
    params.freq_factors = absl::MakeConstSpan(factors->data(), factors->size());
  }
  return params;
}

// Rope: in x [T, heads, head_dim], positions → out.
absl::Status RunRope(CpuOpContext& context) {
  const kvx::TensorRef& x_ref = context.input(kvx::RopeOperand::X);
  KVJIT_ASSIGN_OR_RETURN(float* x, context.Floats(x_ref));
  KVJIT_ASSIGN_OR_RETURN(const int32_t* positions,
                         context.Ints(context.input(kvx::RopeOperand::Positions)));
  KVJIT_ASSIGN_OR_RETURN(float* out, context.Floats(context.output(0)));
  const int64_t heads = context.Extent(x_ref, 1);
  const int64_t head_dim = context.Extent(x_ref, 2);
  return cpu::Rope(x, context.sizes.tokens, heads, head_dim, positions,
                   RopeParamsOf(context.instruction.params_as_RopeParams(), head_dim), out,
                   context.pool, &context.rope_angles);
}

}  // namespace

const RowOp kRopeOp = {
    {kvx::OpCode::Rope, kvx::kOperandCount<kvx::RopeOperand>, kvx::kOperandCount<kvx::RopeOperand>,
     1, kvx::OpParams::RopeParams, false, VerifyRope, CostRope},
    RunRope,
};

}  // namespace kvjit::runtime
