#include "codegen/lowering/ExecutableLowerableOpInterface.h"

#include <optional>

#include "ir/Tfm/TfmOps.h"
#include "mlir/IR/OperationSupport.h"

#include "codegen/lowering/ExecutableLowerableOpInterface.cpp.inc"

namespace kvjit::codegen {

void EnsureLoweringModels(mlir::MLIRContext& context) {
  // One registration attaches all dialects' models, so tfm.weight (every
  // step function reads weights) stands for them all. Appending again would
  // only pile up copies of the extensions in the context's registry.
  std::optional<mlir::RegisteredOperationName> weight =
      mlir::RegisteredOperationName::lookup(tfm::WeightOp::getOperationName(), &context);
  if (weight && weight->hasInterface<ExecutableLowerableOpInterface>()) return;
  mlir::DialectRegistry registry;
  RegisterTfmLoweringModels(registry);
  RegisterKvLoweringModels(registry);
  RegisterKernelLoweringModels(registry);
  RegisterDistLoweringModels(registry);
  context.appendDialectRegistry(registry);
}

}  // namespace kvjit::codegen
