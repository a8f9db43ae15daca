#ifndef KVJIT_IR_REFERENCE_REFERENCEEVALUATOR_H_
#define KVJIT_IR_REFERENCE_REFERENCEEVALUATOR_H_

#include <string>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ir/Reference/RefKvCache.h"
#include "ir/Reference/RefTensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/dist/Communicator.h"

namespace kvjit::reference {

// Supplies the f32 values of the module's tfm.param weights by name.
class WeightProvider {
 public:
  virtual ~WeightProvider() = default;
  // The returned tensor stays valid as long as the provider.
  virtual absl::StatusOr<const RefTensor*> Load(absl::string_view name) = 0;
};

// Runs a function of tfm IR on the CPU, op by op, in f32 storage with double
// accumulation: the oracle that passes and backends are checked against.
// Slow by design; every op follows its ODS description literally, as its
// ReferenceEvaluableOpInterface implementation states it.
class ReferenceEvaluator {
 public:
  // Attaches the ops' reference evaluations to the module's context where
  // it lacks them (EnsureReferenceModels).
  ReferenceEvaluator(mlir::ModuleOp module, WeightProvider& weights);

  // The cache that kv ops read and write; it persists across Run calls, as
  // the runtime's KV pool does across steps.
  void set_cache(RefKvCache* cache) { cache_ = cache; }
  // The collectives of the tensor-parallel rank whose program the module is
  // (shard-tensor-parallel): the evaluators of every rank's program run
  // together, each in its own thread, over one group's communicators.
  void set_communicator(runtime::dist::Communicator* communicator) {
    communicator_ = communicator;
  }

  // Evaluates `function` on `arguments` (matched against its signature,
  // dynamic dimensions bound by the arguments) and returns its results. An
  // argument of !kv.cache type takes an empty RefTensor: the cache is the
  // one set above.
  absl::StatusOr<std::vector<RefTensor>> Run(absl::string_view function,
                                             std::vector<RefTensor> arguments);

 private:
  mlir::ModuleOp module_;
  WeightProvider& weights_;
  RefKvCache* cache_ = nullptr;
  runtime::dist::Communicator* communicator_ = nullptr;
  // The weights the compiler makes (`tfm.param ... concat` and `shifted`),
  // made once from the model's and kept, as the provider keeps the model's own.
  absl::node_hash_map<std::string, RefTensor> derived_;
};

}  // namespace kvjit::reference

#endif  // KVJIT_IR_REFERENCE_REFERENCEEVALUATOR_H_
