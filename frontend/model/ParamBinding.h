#ifndef KVJIT_FRONTEND_MODEL_PARAMBINDING_H_
#define KVJIT_FRONTEND_MODEL_PARAMBINDING_H_

#include "absl/status/status.h"
#include "frontend/model/WeightSource.h"
#include "mlir/IR/BuiltinOps.h"

namespace kvjit::model {

// Binds IR not written by BuildDecoderModule (`kvjit import`'s output edited
// by hand, or printed by kvjit-opt) to a model's weights: every tfm.param
// must name a weight of `weights` whose shape and storage type it declares.
// The error names the first that does not, by its symbol and its place in
// the IR ("m.mlir:7:3: tfm.param @blk.0.attn_q.weight declares …").
absl::Status BindParams(mlir::ModuleOp module, const WeightSource& weights);

}  // namespace kvjit::model

#endif  // KVJIT_FRONTEND_MODEL_PARAMBINDING_H_
