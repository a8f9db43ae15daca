#ifndef KVJIT_IR_REFERENCE_REFTENSOR_H_
#define KVJIT_IR_REFERENCE_REFTENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

namespace kvjit::reference {

// A dense row-major tensor of the reference evaluator: f32 values, or i32 for
// token ids and positions.
struct RefTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
  std::vector<int32_t> ints;
  bool is_int = false;

  static RefTensor Float(std::vector<int64_t> shape, std::vector<float> values);
  static RefTensor Int(std::vector<int64_t> shape, std::vector<int32_t> ints);

  int64_t element_count() const;
  std::string ShapeString() const;
};

}  // namespace kvjit::reference

#endif  // KVJIT_IR_REFERENCE_REFTENSOR_H_
