#ifndef KVJIT_FRONTEND_GGUF_GGUFVALUE_H_
#define KVJIT_FRONTEND_GGUF_GGUFVALUE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kvjit::gguf {

class ByteCursor;

// The metadata value types of GGUF, with their ids in the file.
enum class GgufType : uint32_t {
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

absl::StatusOr<GgufType> GgufTypeFromId(uint32_t id);
// "uint8", "float32", "string", "array", ...
absl::string_view GgufTypeName(GgufType type);
// The eight signed and unsigned integer types.
bool GgufTypeIsInteger(GgufType type);

// One metadata value, viewing the file's bytes (strings and array elements
// are not copied): valid while the GgufFile it came from lives. Cheap to copy.
class GgufValue {
 public:
  // Arrays inside arrays deeper than this are refused: real files nest at
  // most once, and the limit bounds the reader's recursion.
  static constexpr int kMaxArrayDepth = 8;

  // Reads a value of `type` at the cursor and advances past it. Errors name
  // the offset but not the file or key; the caller adds those.
  static absl::StatusOr<GgufValue> Read(ByteCursor& cursor, GgufType type);

  GgufType type() const { return type_; }
  bool is_integer() const { return GgufTypeIsInteger(type_); }

  // Typed reads; std::nullopt where the value's type does not fit.
  // AsUint: any integer type holding a non-negative value.
  std::optional<uint64_t> AsUint() const;
  // AsInt: any integer type whose value fits int64_t.
  std::optional<int64_t> AsInt() const;
  // AsFloat: float32 or float64.
  std::optional<double> AsFloat() const;
  std::optional<bool> AsBool() const;
  std::optional<absl::string_view> AsString() const;

  // Arrays: the element type and count (0 for values that are not arrays),
  // and element i for i < array_size().
  GgufType array_type() const { return array_type_; }
  uint64_t array_size() const { return array_size_; }
  GgufValue ArrayElement(uint64_t i) const;

  // A one-line rendering for listings (`kvjit inspect`): strings quoted and
  // escaped, arrays cut after `max_array_elements` with the full count.
  std::string ToString(size_t max_array_elements = 8) const;

 private:
  GgufValue(GgufType type, absl::Span<const uint8_t> bytes) : type_(type), bytes_(bytes) {}
  static absl::StatusOr<GgufValue> ReadAtDepth(ByteCursor& cursor, GgufType type, int depth);
  static absl::StatusOr<GgufValue> ReadArray(ByteCursor& cursor, int depth);

  GgufType type_;
  // Scalars: their encoding; strings: their characters; arrays of
  // fixed-size elements: the elements back to back.
  absl::Span<const uint8_t> bytes_;
  GgufType array_type_ = GgufType::kUint8;
  uint64_t array_size_ = 0;
  // Arrays of strings or arrays, whose elements cannot be found by stride.
  std::shared_ptr<const std::vector<GgufValue>> variable_elements_;
};

}  // namespace kvjit::gguf

#endif  // KVJIT_FRONTEND_GGUF_GGUFVALUE_H_
