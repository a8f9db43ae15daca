#ifndef KVJIT_TESTS_UNIT_FRONTEND_GGUF_GGUFTESTWRITER_H_
#define KVJIT_TESTS_UNIT_FRONTEND_GGUF_GGUFTESTWRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace kvjit::gguf::test {

// GGUF value type ids, spelled out here rather than taken from GgufValue.h so
// that the writer does not share its understanding of the format with the
// reader it tests.
enum TypeId : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// Appends little-endian fields.
class ByteWriter {
 public:
  ByteWriter& U8(uint8_t v);
  ByteWriter& U16(uint16_t v);
  ByteWriter& U32(uint32_t v);
  ByteWriter& U64(uint64_t v);
  ByteWriter& F32(float v);
  ByteWriter& F64(double v);
  // A GGUF string: uint64 length, then the characters.
  ByteWriter& Str(absl::string_view s);
  ByteWriter& Raw(const std::vector<uint8_t>& bytes);

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Writes GGUF files: valid unless told otherwise through the fields and the
// raw variants below.
class GgufWriter {
 public:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t ggml_type;
    std::vector<uint8_t> data;
    // Replaces the offset written in the tensor info; the data is still laid
    // out where a valid file would put it.
    std::optional<uint64_t> offset_override;
  };

  GgufWriter& Version(uint32_t version);
  // Lays the data section out with this alignment and records it as
  // general.alignment (uint32).
  GgufWriter& Alignment(uint32_t alignment);

  GgufWriter& AddUint32(absl::string_view key, uint32_t value);
  GgufWriter& AddString(absl::string_view key, absl::string_view value);
  GgufWriter& AddStringArray(absl::string_view key, const std::vector<std::string>& values);
  // A pair whose type id and encoded value the caller writes.
  GgufWriter& AddRaw(absl::string_view key, uint32_t type_id, const ByteWriter& value);

  // Its data goes at the next aligned offset of the data section.
  GgufWriter& AddTensor(Tensor tensor);

  std::optional<uint64_t> tensor_count_override;
  std::optional<uint64_t> metadata_count_override;

  std::vector<uint8_t> Build() const;

 private:
  uint32_t version_ = 3;
  uint64_t alignment_ = 32;
  uint64_t metadata_count_ = 0;
  ByteWriter metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace kvjit::gguf::test

#endif  // KVJIT_TESTS_UNIT_FRONTEND_GGUF_GGUFTESTWRITER_H_
