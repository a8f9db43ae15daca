// The reference evaluation of the kernel dialect's ops.

#include "ir/Kernel/KernelDialect.h"
#include "ir/Kernel/KernelOps.h"
#include "ir/Reference/ReferenceEvaluableOpInterface.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::reference {
namespace {

// A fusion's kernel computes exactly its body, so the body is its semantics.
struct FusionReferenceModel
    : ReferenceEvaluableOpInterface::ExternalModel<FusionReferenceModel, kernel::FusionOp> {
  absl::Status evaluateReference(mlir::Operation* op, ReferenceFrame& frame) const {
    auto fusion = mlir::cast<kernel::FusionOp>(op);
    KVJIT_ASSIGN_OR_RETURN(std::vector<RefTensor> results,
                           frame.RunBlock(fusion.getBody().front(), fusion.getInputs()));
    for (auto [result, tensor] : llvm::zip(fusion.getResults(), results)) {
      KVJIT_RETURN_IF_ERROR(frame.Bind(result, std::move(tensor)));
    }
    return absl::OkStatus();
  }
};

}  // namespace

void RegisterKernelReferenceModels(mlir::DialectRegistry& registry) {
  registry.addExtension(+[](mlir::MLIRContext* context, kernel::KernelDialect*) {
    kernel::FusionOp::attachInterface<FusionReferenceModel>(*context);
  });
}

}  // namespace kvjit::reference
