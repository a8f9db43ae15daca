// A pass plugin for the tests of kvjit-opt's --load-pass-plugin and kvjit
// compile's --load_pass_plugin: a pass written outside the tree, loaded as
// mlir-opt loads one. count-ops reports on stderr how many operations of one
// name (or in all) the module holds and changes nothing, so a test sees both
// that it ran and where in the pipeline.

#include <cstdint>
#include <string>

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Tools/Plugins/PassPlugin.h"

namespace {

class CountOpsPass
    : public mlir::PassWrapper<CountOpsPass, mlir::OperationPass<mlir::ModuleOp>> {
 public:
  MLIR_DEFINE_EXPLICIT_INTERNAL_INLINE_TYPE_ID(CountOpsPass)

  CountOpsPass() = default;
  CountOpsPass(const CountOpsPass& other) : PassWrapper(other) {}

  llvm::StringRef getArgument() const final { return "count-ops"; }
  llvm::StringRef getDescription() const final {
    return "Reports how many operations of one name the module holds; changes nothing";
  }

  void runOnOperation() final {
    int64_t count = 0;
    getOperation()->walk([&](mlir::Operation* op) {
      if (name_.empty() || op->getName().getStringRef() == name_) ++count;
    });
    llvm::errs() << "count-ops: " << count << " "
                 << (name_.empty() ? std::string("operations") : name_.getValue()) << "\n";
    markAllAnalysesPreserved();
  }

 private:
  Option<std::string> name_{*this, "name",
                            llvm::cl::desc("the operations to count (all where empty)")};
};

}  // namespace

extern "C" LLVM_ATTRIBUTE_WEAK mlir::PassPluginLibraryInfo mlirGetPassPluginInfo() {
  return {MLIR_PLUGIN_API_VERSION, "KvjitCountOps", LLVM_VERSION_STRING,
          [] { mlir::PassRegistration<CountOpsPass>(); }};
}
