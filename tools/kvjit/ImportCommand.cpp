// kvjit import MODEL -o model.mlir: the model's math as tfm IR.

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "runtime/core/StatusMacros.h"
#include "tools/kvjit/SharedFlags.h"
#include "tools/kvjit/CompilerCommands.h"
#include "passes/registration/KvjitRegistration.h"


namespace kvjit::cli {
namespace {

absl::Status RunImport(const std::vector<std::string>& arguments) {
  if (arguments.size() != 1) return absl::InvalidArgumentError("expected one MODEL argument");
  KVJIT_ASSIGN_OR_RETURN(model::ModelFile model, model::OpenModelFile(arguments[0]));
  mlir::DialectRegistry registry;
  RegisterKvjitDialects(registry);
  mlir::MLIRContext context(registry);
  KVJIT_ASSIGN_OR_RETURN(mlir::OwningOpRef<mlir::ModuleOp> module,
                         model::BuildDecoderModule(context, model.config, *model.weights));
  const std::string output = absl::GetFlag(FLAGS_o);
  std::error_code error;
  llvm::raw_fd_ostream stream(output, error, llvm::sys::fs::OF_Text);
  if (error) {
    return absl::PermissionDeniedError(absl::StrCat(output, ": ", error.message()));
  }
  module->print(stream);
  return absl::OkStatus();
}

}  // namespace

Subcommand ImportCommand() { return CompilerCommand("import", RunImport); }

}  // namespace kvjit::cli
