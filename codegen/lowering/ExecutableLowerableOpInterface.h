#ifndef KVJIT_CODEGEN_LOWERING_EXECUTABLELOWERABLEOPINTERFACE_H_
#define KVJIT_CODEGEN_LOWERING_EXECUTABLELOWERABLEOPINTERFACE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "codegen/lowering/InstructionEmitter.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OpDefinition.h"
#include "runtime/schema/kvx_generated.h"

#include "codegen/lowering/ExecutableLowerableOpInterface.h.inc"

namespace kvjit::codegen {

// The per-dialect lowerings, each in its own file.
void RegisterTfmLoweringModels(mlir::DialectRegistry& registry);
void RegisterKvLoweringModels(mlir::DialectRegistry& registry);
void RegisterKernelLoweringModels(mlir::DialectRegistry& registry);
void RegisterDistLoweringModels(mlir::DialectRegistry& registry);

// Attaches the lowering of every op of the tfm, kv, kernel and dist dialects to
// `context` unless it is there already: the writer calls it, so that any
// context it is given can be lowered.
void EnsureLoweringModels(mlir::MLIRContext& context);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_LOWERING_EXECUTABLELOWERABLEOPINTERFACE_H_
