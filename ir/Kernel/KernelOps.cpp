#include "ir/Kernel/KernelOps.h"

#include "ir/Tfm/TfmOps.h"
#include "llvm/Support/ErrorHandling.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

namespace kvjit::kernel {
namespace {

using mlir::LogicalResult;

// Whether `yield` returns exactly the first result of each of `producers`, in order.
bool YieldsResultsOf(YieldOp yield, llvm::ArrayRef<mlir::Operation*> producers) {
  if (yield.getValues().size() != producers.size()) return false;
  for (auto [value, producer] : llvm::zip(yield.getValues(), producers)) {
    if (value != producer->getResult(0)) return false;
  }
  return true;
}

// Holds the body to the shape of the template its kind names, since codegen
// emits that template without looking at the body again.
LogicalResult VerifyTemplate(FusionOp fusion, llvm::ArrayRef<mlir::Operation*> ops, YieldOp yield) {
  switch (fusion.getKind()) {
    case FusionKind::add_rms_norm: {
      auto add = ops.size() == 2 ? mlir::dyn_cast<tfm::AddOp>(ops[0]) : tfm::AddOp();
      auto norm = ops.size() == 2 ? mlir::dyn_cast<tfm::RmsNormOp>(ops[1]) : tfm::RmsNormOp();
      if (add && norm && norm.getInput() == add.getResult() && YieldsResultsOf(yield, ops)) {
        return mlir::success();
      }
      return fusion.emitOpError() << "of kind add_rms_norm must hold tfm.add, then tfm.rms_norm "
                                     "of the sum, and yield the sum and the normed value";
    }
    case FusionKind::rms_norm:
      if (ops.size() == 1 && mlir::isa<tfm::RmsNormOp>(ops[0]) && YieldsResultsOf(yield, ops)) {
        return mlir::success();
      }
      return fusion.emitOpError() << "of kind rms_norm must hold one tfm.rms_norm and yield "
                                     "its result";
    case FusionKind::swiglu: {
      auto silu = ops.size() == 2 ? mlir::dyn_cast<tfm::SiluOp>(ops[0]) : tfm::SiluOp();
      auto mul = ops.size() == 2 ? mlir::dyn_cast<tfm::MulOp>(ops[1]) : tfm::MulOp();
      if (silu && mul && (mul.getLhs() == silu.getResult()) != (mul.getRhs() == silu.getResult()) &&
          YieldsResultsOf(yield, {mul})) {
        return mlir::success();
      }
      return fusion.emitOpError() << "of kind swiglu must hold tfm.silu, then tfm.mul of its "
                                     "result by another value, and yield the product";
    }
    case FusionKind::rope:
      if (ops.size() == 1 && mlir::isa<tfm::RopeOp>(ops[0]) && YieldsResultsOf(yield, ops)) {
        return mlir::success();
      }
      return fusion.emitOpError() << "of kind rope must hold one tfm.rope and yield its result";
    case FusionKind::elementwise:
      if (ops.empty()) return fusion.emitOpError() << "of kind elementwise holds no op";
      for (mlir::Operation* op : ops) {
        if (!op->hasTrait<tfm::OpTrait::Elementwise>()) {
          return fusion.emitOpError()
                 << "of kind elementwise holds '" << op->getName() << "', which is row-wise";
        }
      }
      return mlir::success();
  }
  llvm_unreachable("a fusion kind without a template");
}

}  // namespace

LogicalResult FusionOp::verifyRegions() {
  mlir::Block& body = getBody().front();
  if (body.getNumArguments() != getInputs().size()) {
    return emitOpError() << "body has " << body.getNumArguments()
                         << " arguments but the fusion has " << getInputs().size() << " operands";
  }
  for (auto [index, argument, input] : llvm::enumerate(body.getArguments(), getInputs())) {
    if (argument.getType() != input.getType()) {
      return emitOpError() << "body argument #" << index << " has type " << argument.getType()
                           << " but operand #" << index << " has type " << input.getType();
    }
  }
  auto yield = mlir::cast<YieldOp>(body.getTerminator());
  if (yield.getValues().size() != getNumResults()) {
    return emitOpError() << "body yields " << yield.getValues().size()
                         << " values but the fusion has " << getNumResults() << " results";
  }
  for (auto [index, value, result] : llvm::enumerate(yield.getValues(), getResults())) {
    if (value.getType() != result.getType()) {
      return emitOpError() << "body yields " << value.getType() << " as value #" << index
                           << " but result #" << index << " has type " << result.getType();
    }
  }
  llvm::SmallVector<mlir::Operation*> ops;
  for (mlir::Operation& op : body.without_terminator()) {
    if (!op.hasTrait<tfm::OpTrait::Elementwise>() && !op.hasTrait<tfm::OpTrait::RowWise>()) {
      return emitOpError() << "body holds '" << op.getName()
                           << "', which is neither elementwise nor row-wise and runs outside "
                              "fusions";
    }
    ops.push_back(&op);
  }
  return VerifyTemplate(*this, ops, yield);
}

}  // namespace kvjit::kernel

#define GET_OP_CLASSES
#include "ir/Kernel/KernelOps.cpp.inc"
