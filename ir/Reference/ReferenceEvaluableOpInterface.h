#ifndef KVJIT_IR_REFERENCE_REFERENCEEVALUABLEOPINTERFACE_H_
#define KVJIT_IR_REFERENCE_REFERENCEEVALUABLEOPINTERFACE_H_

#include "absl/status/status.h"
#include "ir/Reference/ReferenceFrame.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OpDefinition.h"

#include "ir/Reference/ReferenceEvaluableOpInterface.h.inc"

namespace kvjit::reference {

// Attaches the reference evaluation of every op of the tfm, kv and kernel
// dialects (each dialect's in its own file) when the dialect loads.
// RegisterKvjitDialects calls it for every tool's context.
void RegisterReferenceModels(mlir::DialectRegistry& registry);

// The per-dialect halves of RegisterReferenceModels.
void RegisterTfmReferenceModels(mlir::DialectRegistry& registry);
void RegisterKvReferenceModels(mlir::DialectRegistry& registry);
void RegisterKernelReferenceModels(mlir::DialectRegistry& registry);
void RegisterDistReferenceModels(mlir::DialectRegistry& registry);

// Attaches the models to `context` unless they are there already, so that a
// context made without RegisterKvjitDialects (the importer's, a test's) can
// be evaluated too.
void EnsureReferenceModels(mlir::MLIRContext& context);

}  // namespace kvjit::reference

#endif  // KVJIT_IR_REFERENCE_REFERENCEEVALUABLEOPINTERFACE_H_
