#include "passes/registration/KvjitRegistration.h"

#include "ir/Dist/DistDialect.h"
#include "ir/Kernel/KernelDialect.h"
#include "ir/Kv/KvDialect.h"
#include "ir/Reference/ReferenceEvaluableOpInterface.h"
#include "ir/Tfm/TfmDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"

namespace kvjit {

void RegisterKvjitDialects(mlir::DialectRegistry& registry) {
  registry.insert<tfm::TfmDialect, kv::KvDialect, kernel::KernelDialect, dist::DistDialect,
                  mlir::func::FuncDialect>();
  reference::RegisterReferenceModels(registry);
}

void RegisterKvjitPasses() {
  registerKvjitPasses();
  RegisterKvjitPipeline();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();
}

}  // namespace kvjit
