#include "frontend/model/WeightSource.h"

#include "absl/strings/str_cat.h"
#include "runtime/quant/Dequantize.h"

namespace kvjit::model {

int64_t WeightInfo::element_count() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

const WeightInfo* WeightSource::Find(absl::string_view name) const {
  for (const WeightInfo& weight : weights()) {
    if (weight.name == name) return &weight;
  }
  return nullptr;
}

absl::Status WeightSource::ReadF32(const WeightInfo& weight, absl::Span<float> out) const {
  if (static_cast<int64_t>(out.size()) != weight.element_count()) {
    return absl::InvalidArgumentError(absl::StrCat(origin(), ": tensor '", weight.name, "' has ",
                                                   weight.element_count(), " elements, not ",
                                                   out.size()));
  }
  absl::Status status = quant::DequantizeRow(weight.storage, Bytes(weight), out);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(origin(), ": tensor '", weight.name, "': ",
                                                    status.message()));
  }
  return absl::OkStatus();
}

}  // namespace kvjit::model
