// kvjit-opt: mlir-opt with kvjit's dialects and passes, for lit tests and for
// anyone studying a pass in isolation.

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "passes/registration/KvjitRegistration.h"

int main(int argc, char** argv) {
  mlir::DialectRegistry registry;
  kvjit::RegisterKvjitDialects(registry);
  kvjit::RegisterKvjitPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "kvjit optimizer driver\n", registry));
}
