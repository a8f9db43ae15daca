#ifndef KVJIT_CODEGEN_DRIVER_IRFILE_H_
#define KVJIT_CODEGEN_DRIVER_IRFILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace kvjit::codegen {

// The module in the MLIR text file at `path`, parsed and verified in
// `context` (which must know the dialects it uses); the error carries the
// parser's and the verifier's messages, each with its file:line:col.
absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> ParseIrFile(mlir::MLIRContext& context,
                                                              const std::string& path);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_DRIVER_IRFILE_H_
