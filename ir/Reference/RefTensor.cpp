#include "ir/Reference/RefTensor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kvjit::reference {

RefTensor RefTensor::Float(std::vector<int64_t> shape, std::vector<float> values) {
  RefTensor tensor;
  tensor.shape = std::move(shape);
  tensor.values = std::move(values);
  return tensor;
}

RefTensor RefTensor::Int(std::vector<int64_t> shape, std::vector<int32_t> ints) {
  RefTensor tensor;
  tensor.shape = std::move(shape);
  tensor.ints = std::move(ints);
  tensor.is_int = true;
  return tensor;
}

int64_t RefTensor::element_count() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

std::string RefTensor::ShapeString() const {
  return absl::StrCat("[", absl::StrJoin(shape, "x"), "]");
}

}  // namespace kvjit::reference
