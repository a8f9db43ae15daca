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

// A row_wise body: the row-wise op alone, or after the tfm.add of its
// operand 0 where the op fuses a residual add (the sum is yielded first).
bool IsRowWiseTemplate(llvm::ArrayRef<mlir::Operation*> ops, YieldOp yield) {
  if (ops.empty() || ops.size() > 2 || !ops.back()->hasTrait<tfm::OpTrait::RowWise>()) return false;
  mlir::Operation* op = ops.back();
  if (ops.size() == 1) return YieldsResultsOf(yield, ops);
  auto add = mlir::dyn_cast<tfm::AddOp>(ops.front());
  return add && op->hasTrait<tfm::OpTrait::FusesResidualAdd>() &&
         op->getOperand(0) == add.getResult() && YieldsResultsOf(yield, ops);
}

// Holds the body to the shape of the template its kind names, since codegen
// emits that template without looking at the body again.
LogicalResult VerifyTemplate(FusionOp fusion, llvm::ArrayRef<mlir::Operation*> ops, YieldOp yield) {
  switch (fusion.getKind()) {
    case FusionKind::row_wise:
      if (IsRowWiseTemplate(ops, yield)) return mlir::success();
      return fusion.emitOpError()
             << "of kind row_wise must hold one row-wise op, after a tfm.add of its first "
                "operand only where the op fuses a residual add, and yield the sum (if any) and "
                "the op's result";
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
