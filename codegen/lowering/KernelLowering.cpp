// The lowering of kernel.fusion: one instruction per fusion, the kernel its
// kind names, over the fusion's operands. A row_wise fusion is its op's
// kernel (RowKernelOpInterface), so a new row-wise op needs nothing here.

#include <iterator>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/lowering/ExecutableLowerableOpInterface.h"
#include "codegen/lowering/OperandTable.h"
#include "codegen/lowering/TfmOpParams.h"
#include "ir/Kernel/KernelDialect.h"
#include "ir/Kernel/KernelOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::codegen {
namespace {

// The one `OpT` of a fusion's body, which the fusion's kernel template
// computes.
template <typename OpT>
absl::StatusOr<OpT> SingleOp(kernel::FusionOp fusion) {
  auto ops = fusion.getBody().front().getOps<OpT>();
  if (std::distance(ops.begin(), ops.end()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        DescribeOp(fusion), " does not hold exactly one '", OpT::getOperationName().str(),
        "' as its ", kernel::stringifyFusionKind(fusion.getKind()).str(), " template needs"));
  }
  return *ops.begin();
}

// The body of an elementwise fusion as steps over its operands: block
// argument i is chain input i (the instruction's input i), the result of
// the k-th op is -(k + 1). The yielded value must be the last step's.
absl::StatusOr<std::vector<kvx::ElementwiseStep>> ElementwiseChain(kernel::FusionOp fusion) {
  mlir::Block& body = fusion.getBody().front();
  llvm::DenseMap<mlir::Value, int32_t> operand_of;
  for (mlir::BlockArgument argument : body.getArguments()) {
    operand_of[argument] = static_cast<int32_t>(argument.getArgNumber());
  }
  std::vector<kvx::ElementwiseStep> steps;
  for (mlir::Operation& inner : body.without_terminator()) {
    for (mlir::Value value : inner.getOperands()) {
      if (!operand_of.count(value)) {
        return absl::UnimplementedError(absl::StrCat(DescribeOp(&inner), " in elementwise ",
                                                     DescribeOp(fusion),
                                                     " reads a value from outside its fusion"));
      }
    }
    auto elementwise = mlir::dyn_cast<ElementwiseStepOpInterface>(inner);
    if (!elementwise || inner.getNumOperands() == 0) {
      const std::string hint = mlir::isa<tfm::CausalMaskOp>(inner)
                                   ? "; a causal mask belongs to attention, which "
                                     "fuse-attention should have fused"
                                   : "";
      return absl::UnimplementedError(absl::StrCat(DescribeOp(&inner), " in elementwise ",
                                                   DescribeOp(fusion), " has no elementwise step",
                                                   hint));
    }
    const int32_t lhs = operand_of.at(inner.getOperand(0));
    const int32_t rhs = inner.getNumOperands() > 1 ? operand_of.at(inner.getOperand(1)) : lhs;
    operand_of[inner.getResult(0)] = -static_cast<int32_t>(steps.size()) - 1;
    steps.push_back(elementwise.getElementwiseStep(lhs, rhs));
  }
  mlir::ValueRange yielded = body.getTerminator()->getOperands();
  if (steps.empty() || yielded.size() != 1 ||
      operand_of.lookup(yielded.front()) != -static_cast<int32_t>(steps.size())) {
    return absl::UnimplementedError(absl::StrCat(
        DescribeOp(fusion),
        " does not yield exactly the result of its last op, which an elementwise kernel writes"));
  }
  return steps;
}

// The operands of a swiglu fusion's kernel.
struct GateAndUp {
  mlir::Value gate, up;
};

using SwiGluOperand = OperandOf<GateAndUp, kvx::SwiGluOperand>;
constexpr SwiGluOperand kSwiGluOperands[] = {
    {kvx::SwiGluOperand::Gate, [](GateAndUp values) { return values.gate; }},
    {kvx::SwiGluOperand::Up, [](GateAndUp values) { return values.up; }},
};
static_assert(kvx::CoversEnumInOrder(kSwiGluOperands, &SwiGluOperand::operand),
              "one value per kvx::SwiGluOperand, in its order");

absl::Status LowerFusion(kernel::FusionOp fusion, InstructionEmitter& emitter) {
  mlir::Block& body = fusion.getBody().front();
  // The fusion operand a value of the body reads; the kernel templates read
  // only their operands, never a value computed inside.
  auto outer = [&](mlir::Value inner) -> absl::StatusOr<mlir::Value> {
    auto argument = mlir::dyn_cast<mlir::BlockArgument>(inner);
    if (!argument || argument.getOwner() != &body) {
      return absl::UnimplementedError(absl::StrCat(
          DescribeOp(fusion), " computes an operand of its ",
          kernel::stringifyFusionKind(fusion.getKind()).str(),
          " template inside its body; the kernel reads only the fusion's operands"));
    }
    return fusion.getOperand(argument.getArgNumber());
  };
  switch (fusion.getKind()) {
    case kernel::FusionKind::row_wise: {
      // The verifier holds the body to the op, after its residual add where
      // it fuses one, yielding the sum and the op's result in that order.
      llvm::SmallVector<mlir::Operation*> ops;
      for (mlir::Operation& inner : body.without_terminator()) ops.push_back(&inner);
      auto kernel = mlir::dyn_cast<RowKernelOpInterface>(ops.back());
      if (!kernel) {
        return absl::UnimplementedError(absl::StrCat(DescribeOp(ops.back()), " in ",
                                                     DescribeOp(fusion), " has no kernel"));
      }
      const tfm::AddOp residual_add =
          ops.size() == 2 ? mlir::cast<tfm::AddOp>(ops.front()) : tfm::AddOp();
      return EmitRowKernel(fusion, kernel, residual_add, outer, emitter);
    }
    case kernel::FusionKind::swiglu: {
      KVJIT_ASSIGN_OR_RETURN(tfm::SiluOp silu, SingleOp<tfm::SiluOp>(fusion));
      KVJIT_ASSIGN_OR_RETURN(tfm::MulOp mul, SingleOp<tfm::MulOp>(fusion));
      mlir::Value up_inner = mul.getLhs() == silu.getResult() ? mul.getRhs() : mul.getLhs();
      if (up_inner == silu.getResult() ||
          (mul.getLhs() != silu.getResult() && mul.getRhs() != silu.getResult())) {
        return absl::InvalidArgumentError(
            absl::StrCat(DescribeOp(fusion), " does not compute silu(gate) · up"));
      }
      KVJIT_ASSIGN_OR_RETURN(mlir::Value gate, outer(silu.getInput()));
      KVJIT_ASSIGN_OR_RETURN(mlir::Value up, outer(up_inner));
      return emitter.Emit(fusion, kvx::OpCode::SwiGlu,
                          InputsOf(GateAndUp{gate, up}, kSwiGluOperands), gate);
    }
    case kernel::FusionKind::elementwise: {
      KVJIT_ASSIGN_OR_RETURN(std::vector<kvx::ElementwiseStep> steps, ElementwiseChain(fusion));
      // Elementwise ops take operands of their result's type, so any
      // operand carries the result's rows.
      std::vector<mlir::Value> inputs(fusion.getOperands().begin(), fusion.getOperands().end());
      return emitter.Emit(fusion, kvx::OpCode::Elementwise, inputs, inputs.front(),
                          ElementwiseChainParams(steps, emitter.builder()));
    }
  }
  return absl::UnimplementedError(absl::StrCat(DescribeOp(fusion), " is of an unknown fusion kind"));
}

struct FusionLoweringModel
    : ExecutableLowerableOpInterface::ExternalModel<FusionLoweringModel, kernel::FusionOp> {
  absl::Status lowerToExecutable(mlir::Operation* op, InstructionEmitter& emitter) const {
    return LowerFusion(mlir::cast<kernel::FusionOp>(op), emitter);
  }
};

}  // namespace

void RegisterKernelLoweringModels(mlir::DialectRegistry& registry) {
  registry.addExtension(+[](mlir::MLIRContext* context, kernel::KernelDialect*) {
    kernel::FusionOp::attachInterface<FusionLoweringModel>(*context);
  });
}

}  // namespace kvjit::codegen
