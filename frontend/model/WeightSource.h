#ifndef KVJIT_FRONTEND_MODEL_WEIGHTSOURCE_H_
#define KVJIT_FRONTEND_MODEL_WEIGHTSOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/quant/StorageType.h"

namespace kvjit::model {

// A weight as the model builder sees it: its canonical (GGUF-style) name, its
// row-major logical shape, and how its elements are stored in the file.
struct WeightInfo {
  std::string name;
  std::vector<int64_t> shape;
  quant::StorageType storage = quant::StorageType::kF32;
  uint64_t size_bytes = 0;

  int64_t element_count() const;
};

// The weights of one model file (or set of shards), whatever its format.
class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // The file (or directory) the weights come from, for messages.
  virtual const std::string& origin() const = 0;
  virtual const std::vector<WeightInfo>& weights() const = 0;

  // The raw bytes, in the weight's storage type.
  virtual absl::Span<const uint8_t> Bytes(const WeightInfo& weight) const = 0;

  const WeightInfo* Find(absl::string_view name) const;

  // Dequantizes the whole weight into `out` (row-major f32).
  absl::Status ReadF32(const WeightInfo& weight, absl::Span<float> out) const;
};

}  // namespace kvjit::model

#endif  // KVJIT_FRONTEND_MODEL_WEIGHTSOURCE_H_
