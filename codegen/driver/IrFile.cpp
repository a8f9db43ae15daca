#include "codegen/driver/IrFile.h"

#include "absl/strings/str_cat.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

namespace kvjit::codegen {

absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> ParseIrFile(mlir::MLIRContext& context,
                                                              const std::string& path) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer) {
    return absl::NotFoundError(absl::StrCat(path, ": ", buffer.getError().message()));
  }
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(*buffer), llvm::SMLoc());
  std::string messages;
  llvm::raw_string_ostream stream(messages);
  mlir::SourceMgrDiagnosticHandler handler(sources, &context, stream);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sources, mlir::ParserConfig(&context));
  if (!module) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not valid IR of kvjit's dialects:\n", messages));
  }
  return module;
}

}  // namespace kvjit::codegen
