#include "frontend/model/ReferenceWeights.h"

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::model {

absl::StatusOr<const reference::RefTensor*> ReferenceWeights::Load(absl::string_view name) {
  auto cached = cache_.find(name);
  if (cached != cache_.end()) return &cached->second;
  const WeightInfo* weight = source_.Find(name);
  if (weight == nullptr) {
    return absl::NotFoundError(absl::StrCat(source_.origin(), ": no tensor '", name, "'"));
  }
  reference::RefTensor tensor = reference::RefTensor::Float(
      weight->shape, std::vector<float>(static_cast<size_t>(weight->element_count())));
  KVJIT_RETURN_IF_ERROR(source_.ReadF32(*weight, absl::MakeSpan(tensor.values)));
  return &cache_.emplace(std::string(name), std::move(tensor)).first->second;
}

}  // namespace kvjit::model
