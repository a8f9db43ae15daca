#include "tools/registration/KvjitRegistration.h"

#include "ir/Tfm/TfmDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"

namespace kvjit {

void RegisterKvjitDialects(mlir::DialectRegistry& registry) {
  registry.insert<tfm::TfmDialect, mlir::func::FuncDialect>();
}

void RegisterKvjitPasses() {
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  mlir::registerSymbolDCEPass();
  mlir::registerInlinerPass();
}

}  // namespace kvjit
