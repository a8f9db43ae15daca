#ifndef KVJIT_FRONTEND_SAFETENSORS_SAFETENSORSFILE_H_
#define KVJIT_FRONTEND_SAFETENSORS_SAFETENSORSFILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "runtime/core/MappedFile.h"
#include "runtime/quant/StorageType.h"

namespace kvjit::safetensors {

// One tensor of a .safetensors file.
struct Tensor {
  std::string name;
  // Row-major, outermost dimension first, as PyTorch writes it: a Linear
  // weight is [out_features, in_features]. This is the reverse of GGUF's
  // dimension order (ne[0] is the innermost there).
  std::vector<int64_t> dims;
  quant::StorageType storage_type = quant::StorageType::kF32;
  // The tensor's bytes inside the mapping, little-endian. The format does not
  // align them: read elements with memcpy, not through a cast pointer.
  absl::Span<const uint8_t> data;
};

// A memory-mapped .safetensors file: an 8-byte little-endian header length,
// a JSON header naming each tensor's dtype, shape and byte range, then the
// data. Open validates the whole header, so every Tensor it yields is in
// bounds and sized to its shape. Move-only; tensor spans stay valid across
// moves and for the object's lifetime.
class SafetensorsFile {
 public:
  static absl::StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // In the order of their data in the file.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // The whole file as mapped: a tensor's bytes start
  // `tensor.data.data() - bytes().data()` bytes into the file.
  absl::Span<const uint8_t> bytes() const { return mapping_.bytes(); }
  // The header's "__metadata__" string map (empty where absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // nullptr when the file holds no tensor of that name.
  const Tensor* Find(absl::string_view name) const;
  // As Find, with a NotFound error naming the file and the tensor.
  absl::StatusOr<const Tensor*> Get(absl::string_view name) const;

 private:
  SafetensorsFile(std::string path, MappedFile mapping)
      : path_(std::move(path)), mapping_(std::move(mapping)) {}
  absl::Status ParseHeader();

  std::string path_;
  MappedFile mapping_;
  std::vector<Tensor> tensors_;
  absl::flat_hash_map<std::string, size_t> index_by_name_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace kvjit::safetensors

#endif  // KVJIT_FRONTEND_SAFETENSORS_SAFETENSORSFILE_H_
