// Feeds arbitrary bytes to the GGUF reader. Whatever it accepts must be safe
// to use in full: every metadata value, every array element and every byte of
// every tensor is read (AddressSanitizer checks the bounds), and the first row
// of each tensor is dequantized.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "frontend/gguf/GgufFile.h"
#include "runtime/quant/Dequantize.h"

namespace {

using kvjit::gguf::GgufFile;
using kvjit::gguf::GgufTensor;
using kvjit::gguf::GgufType;
using kvjit::gguf::GgufValue;

// Accumulates what was read so that the reads cannot be optimized away.
volatile uint64_t sink;

void TouchValue(const GgufValue& value) {
  uint64_t seen = static_cast<uint64_t>(value.type());
  seen += value.AsUint().value_or(0) + static_cast<uint64_t>(value.AsInt().value_or(0));
  seen += static_cast<uint64_t>(value.AsFloat().value_or(0.0) != 0.0) + value.AsBool().value_or(false);
  if (std::optional<absl::string_view> text = value.AsString()) {
    for (char c : *text) seen += static_cast<uint8_t>(c);
  }
  for (uint64_t i = 0; i < value.array_size(); ++i) TouchValue(value.ArrayElement(i));
  sink = sink + seen;
}

void TouchTypedGetters(const GgufFile& file, absl::string_view key) {
  uint64_t seen = file.GetString(key).ok() + file.GetUint(key).ok() + file.GetInt(key).ok();
  seen += file.GetFloat(key).ok() + file.GetBool(key).ok();
  if (auto strings = file.GetStringArray(key); strings.ok()) seen += strings->size();
  if (auto floats = file.GetFloatArray(key); floats.ok()) seen += floats->size();
  if (auto ints = file.GetIntArray(key); ints.ok()) seen += ints->size();
  sink = sink + seen;
}

void TouchTensor(const GgufFile& file, const GgufTensor& tensor) {
  uint64_t seen = file.FindTensor(tensor.name) == &tensor;
  for (uint8_t byte : tensor.data) seen += byte;
  const int64_t row_elements = tensor.dims.empty() ? 1 : tensor.dims[0];
  const uint64_t row_bytes = tensor.size_bytes / static_cast<uint64_t>(tensor.element_count() / row_elements);
  std::vector<float> row(static_cast<size_t>(row_elements));
  absl::Status status =
      kvjit::quant::DequantizeRow(tensor.type, tensor.data.subspan(0, row_bytes), absl::MakeSpan(row));
  if (!status.ok()) __builtin_trap();  // the reader promised whole blocks inside the file
  sink = sink + seen + static_cast<uint64_t>(row.empty() ? 0.0f : row.back() != 0.0f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer("fuzz.gguf", {data, size});
  if (!file.ok()) return 0;
  for (const kvjit::gguf::GgufMetadataEntry& entry : (*file)->metadata()) {
    TouchValue(entry.value);
    sink = sink + entry.value.ToString().size();
    TouchTypedGetters(**file, entry.key);
  }
  for (const GgufTensor& tensor : (*file)->tensors()) TouchTensor(**file, tensor);
  return 0;
}
