#ifndef KVJIT_FRONTEND_MODEL_DECODERBUILDER_H_
#define KVJIT_FRONTEND_MODEL_DECODERBUILDER_H_

#include "absl/status/statusor.h"
#include "frontend/model/ModelConfig.h"
#include "frontend/model/WeightSource.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace kvjit::model {

// The name of the function BuildDecoderModule emits:
//   func.func @forward(%tokens: tensor<?xi32>, %positions: tensor<?xi32>)
//       -> tensor<?x{vocab}xf32>
// the logits of every token of one whole sequence, recomputed from scratch.
inline constexpr char kForwardFunctionName[] = "forward";

// Emits the tfm IR of a decoder as `config` describes it (its family's layer
// resolved by the frontend/arch registry), attention written the way the
// model defines it (softmax(Q·Kᵀ·scale + causal mask)·V, no cache, no fusion).
// Every weight the architecture needs must be in `weights` with the shape
// `config` implies; the error names the first that is missing or misshapen.
absl::StatusOr<mlir::OwningOpRef<mlir::ModuleOp>> BuildDecoderModule(mlir::MLIRContext& context,
                                                                   const ModelConfig& config,
                                                                   const WeightSource& weights);

}  // namespace kvjit::model

#endif  // KVJIT_FRONTEND_MODEL_DECODERBUILDER_H_
