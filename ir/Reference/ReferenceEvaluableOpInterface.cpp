#include "ir/Reference/ReferenceEvaluableOpInterface.h"

#include <optional>

#include "ir/Tfm/TfmOps.h"
#include "mlir/IR/OperationSupport.h"

#include "ir/Reference/ReferenceEvaluableOpInterface.cpp.inc"

namespace kvjit::reference {

void RegisterReferenceModels(mlir::DialectRegistry& registry) {
  RegisterTfmReferenceModels(registry);
  RegisterKvReferenceModels(registry);
  RegisterKernelReferenceModels(registry);
  RegisterDistReferenceModels(registry);
}

void EnsureReferenceModels(mlir::MLIRContext& context) {
  // One registration attaches all dialects' models, so tfm.weight (every
  // evaluated module has weights) stands for them all. Appending again would
  // only pile up copies of the extensions in the context's registry.
  std::optional<mlir::RegisteredOperationName> weight =
      mlir::RegisteredOperationName::lookup(tfm::WeightOp::getOperationName(), &context);
  if (weight && weight->hasInterface<ReferenceEvaluableOpInterface>()) return;
  mlir::DialectRegistry registry;
  RegisterReferenceModels(registry);
  context.appendDialectRegistry(registry);
}

}  // namespace kvjit::reference
