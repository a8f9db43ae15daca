#ifndef KVJIT_IR_REFERENCE_REFERENCEFRAME_H_
#define KVJIT_IR_REFERENCE_REFERENCEFRAME_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ir/Reference/RefKvCache.h"
#include "ir/Reference/RefTensor.h"
#include "ir/Tfm/TfmOps.h"
#include "runtime/dist/Communicator.h"
#include "mlir/IR/Block.h"
#include "mlir/IR/Value.h"

namespace kvjit::reference {

// What an op's reference evaluation sees of the evaluator running it: the
// values of its operands, where its results go, the weights and the KV
// cache. The evaluator's interpreter implements it.
class ReferenceFrame {
 public:
  virtual ~ReferenceFrame() = default;

  // The value of `value`, an operand bound earlier in this function.
  virtual const RefTensor& Get(mlir::Value value) = 0;
  const RefTensor* GetOptional(mlir::Value value) { return value ? &Get(value) : nullptr; }

  // Binds `result` to `tensor`; an error names the op where the tensor's
  // shape does not fit the result's type.
  virtual absl::Status Bind(mlir::OpResult result, RefTensor tensor) = 0;

  // Binds `result` to `tensor` itself, not a copy: a weight, which outlives
  // the evaluation (a model's weights are hundreds of MB).
  virtual absl::Status BindAlias(mlir::OpResult result, const RefTensor& tensor) = 0;

  // The values of the param `weight` reads.
  virtual absl::StatusOr<const RefTensor*> LoadWeight(tfm::WeightOp weight) = 0;

  // The KV cache kv ops read and write; an error naming `op` without one.
  virtual absl::StatusOr<RefKvCache*> Cache(mlir::Operation* op) = 0;

  // The collectives of the rank whose program runs; an error naming `op`
  // where the evaluator runs one program alone.
  virtual absl::StatusOr<runtime::dist::Communicator*> Communicator(mlir::Operation* op) = 0;
  // Runs `block` with its arguments bound to the values of `inputs` and
  // returns the values its terminator passes on.
  virtual absl::StatusOr<std::vector<RefTensor>> RunBlock(mlir::Block& block,
                                                          mlir::ValueRange inputs) = 0;
};

}  // namespace kvjit::reference

#endif  // KVJIT_IR_REFERENCE_REFERENCEFRAME_H_
