#ifndef KVJIT_FRONTEND_GGUF_GGUFFILE_H_
#define KVJIT_FRONTEND_GGUF_GGUFFILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "frontend/gguf/GgufValue.h"
#include "runtime/core/MappedFile.h"
#include "runtime/quant/StorageType.h"

namespace kvjit::gguf {

struct GgufTensor {
  std::string name;
  // GGUF order: dims[0] is the contiguous (fastest-varying) dimension.
  std::vector<int64_t> dims;
  quant::StorageType type;
  // Relative to the start of the tensor data section, as stored in the file.
  uint64_t offset_in_data;
  // Absolute position in the file.
  uint64_t file_offset;
  uint64_t size_bytes;
  // The tensor's bytes inside the mapping (or buffer).
  absl::Span<const uint8_t> data;

  int64_t element_count() const;
};

struct GgufMetadataEntry {
  absl::string_view key;
  GgufValue value;
};

// A GGUF file (versions 2 and 3, little-endian), checked in full when opened:
// every later access is in bounds. Strings, arrays and tensor data are views
// into the file's bytes, valid while this object lives.
class GgufFile {
 public:
  static constexpr uint64_t kDefaultAlignment = 32;

  // Maps `path` read-only.
  static absl::StatusOr<std::unique_ptr<GgufFile>> Open(const std::string& path);
  // Reads `bytes` in place, without copying; the caller keeps them alive for
  // the lifetime of the result. `name` stands for the path in messages.
  static absl::StatusOr<std::unique_ptr<GgufFile>> FromBuffer(std::string name, absl::Span<const uint8_t> bytes);

  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;
  ~GgufFile();

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  // general.alignment, or 32 where the file does not set it.
  uint64_t alignment() const { return alignment_; }
  // Where the tensor data section starts in the file.
  uint64_t data_offset() const { return data_offset_; }

  // Every key/value pair, in file order.
  const std::vector<GgufMetadataEntry>& metadata() const { return metadata_; }
  bool Has(absl::string_view key) const { return Find(key) != nullptr; }
  const GgufValue* Find(absl::string_view key) const;

  // Typed getters; a missing key is NotFound, a value of another type
  // InvalidArgument, each naming the file and the key.
  absl::StatusOr<absl::string_view> GetString(absl::string_view key) const;
  // Any integer type holding a non-negative value.
  absl::StatusOr<uint64_t> GetUint(absl::string_view key) const;
  // Any integer type whose value fits int64_t.
  absl::StatusOr<int64_t> GetInt(absl::string_view key) const;
  // float32 or float64.
  absl::StatusOr<double> GetFloat(absl::string_view key) const;
  absl::StatusOr<bool> GetBool(absl::string_view key) const;
  absl::StatusOr<std::vector<absl::string_view>> GetStringArray(absl::string_view key) const;
  // Arrays of float32 or float64.
  absl::StatusOr<std::vector<float>> GetFloatArray(absl::string_view key) const;
  // Arrays of any integer type whose values fit int64_t.
  absl::StatusOr<std::vector<int64_t>> GetIntArray(absl::string_view key) const;

  // Tensors in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* FindTensor(absl::string_view name) const;
  // NotFound naming the file and the tensor where it is absent.
  absl::StatusOr<const GgufTensor*> GetTensor(absl::string_view name) const;

 private:
  GgufFile(std::string path, absl::Span<const uint8_t> bytes, std::optional<MappedFile> mapping);
  absl::Status Parse();
  absl::Status ParseHeader(ByteCursor& cursor, uint64_t& tensor_count, uint64_t& metadata_count);
  absl::Status ParseMetadata(ByteCursor& cursor, uint64_t count);
  absl::Status ResolveAlignment();
  absl::Status ParseTensorInfos(ByteCursor& cursor, uint64_t count);
  absl::Status ParseTensorInfo(ByteCursor& cursor, uint64_t index, GgufTensor& tensor);
  absl::Status PlaceTensorData();
  absl::Status Error(absl::string_view detail) const;
  absl::Status WithContext(const absl::Status& status, absl::string_view context) const;
  absl::StatusOr<const GgufValue*> Require(absl::string_view key) const;
  absl::Status WrongType(absl::string_view key, const GgufValue& value, absl::string_view expected) const;

  std::string path_;
  absl::Span<const uint8_t> bytes_;
  // The mapping behind bytes_; empty for FromBuffer.
  std::optional<MappedFile> mapping_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<GgufMetadataEntry> metadata_;
  absl::flat_hash_map<absl::string_view, size_t> metadata_index_;
  std::vector<GgufTensor> tensors_;
  absl::flat_hash_map<absl::string_view, size_t> tensor_index_;
};

}  // namespace kvjit::gguf

#endif  // KVJIT_FRONTEND_GGUF_GGUFFILE_H_
