#ifndef KVJIT_FRONTEND_MODEL_REFERENCEWEIGHTS_H_
#define KVJIT_FRONTEND_MODEL_REFERENCEWEIGHTS_H_

#include <map>
#include <string>

#include "frontend/model/WeightSource.h"
#include "ir/Reference/ReferenceEvaluator.h"

namespace kvjit::model {

// Feeds a model's weights to the reference evaluator, each dequantized to f32
// on first use and kept for later calls.
class ReferenceWeights : public reference::WeightProvider {
 public:
  explicit ReferenceWeights(const WeightSource& source) : source_(source) {}

  absl::StatusOr<const reference::RefTensor*> Load(absl::string_view name) override;

 private:
  const WeightSource& source_;
  std::map<std::string, reference::RefTensor, std::less<>> cache_;
};

}  // namespace kvjit::model

#endif  // KVJIT_FRONTEND_MODEL_REFERENCEWEIGHTS_H_
