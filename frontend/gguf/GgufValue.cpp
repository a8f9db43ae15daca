#include "frontend/gguf/GgufValue.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "frontend/gguf/ByteCursor.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::gguf {
namespace {

// Bytes of one value of a fixed-size type; 0 for strings and arrays.
uint64_t FixedSize(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool:
      return 1;
    case GgufType::kUint16:
    case GgufType::kInt16:
      return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32:
      return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

// The fewest bytes a value of `type` can take: a string's length field, an
// array's element type and length fields.
uint64_t MinimumSize(GgufType type) {
  if (type == GgufType::kString) return 8;
  if (type == GgufType::kArray) return 4 + 8;
  return FixedSize(type);
}

bool IsUnsigned(GgufType type) {
  return type == GgufType::kUint8 || type == GgufType::kUint16 || type == GgufType::kUint32 ||
         type == GgufType::kUint64;
}

bool IsSigned(GgufType type) {
  return type == GgufType::kInt8 || type == GgufType::kInt16 || type == GgufType::kInt32 || type == GgufType::kInt64;
}

absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  return absl::Status(status.code(), absl::StrCat(context, ": ", status.message()));
}

}  // namespace

absl::StatusOr<GgufType> GgufTypeFromId(uint32_t id) {
  if (id > static_cast<uint32_t>(GgufType::kFloat64)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown value type ", id));
  }
  return static_cast<GgufType>(id);
}

absl::string_view GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return "invalid";
}

bool GgufTypeIsInteger(GgufType type) { return IsUnsigned(type) || IsSigned(type); }

absl::StatusOr<GgufValue> GgufValue::Read(ByteCursor& cursor, GgufType type) { return ReadAtDepth(cursor, type, 0); }

absl::StatusOr<GgufValue> GgufValue::ReadAtDepth(ByteCursor& cursor, GgufType type, int depth) {
  if (type == GgufType::kArray) return ReadArray(cursor, depth);
  if (type == GgufType::kString) {
    KVJIT_ASSIGN_OR_RETURN(absl::string_view text, cursor.ReadString("string"));
    return GgufValue(type, {reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  }
  KVJIT_ASSIGN_OR_RETURN(absl::Span<const uint8_t> bytes, cursor.Take(FixedSize(type), GgufTypeName(type)));
  return GgufValue(type, bytes);
}

absl::StatusOr<GgufValue> GgufValue::ReadArray(ByteCursor& cursor, int depth) {
  const uint64_t start = cursor.offset();
  if (depth >= kMaxArrayDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("array at offset ", start, " is nested more than ", kMaxArrayDepth, " arrays deep"));
  }
  KVJIT_ASSIGN_OR_RETURN(uint32_t type_id, cursor.ReadU32("the array element type"));
  absl::StatusOr<GgufType> element_type = GgufTypeFromId(type_id);
  if (!element_type.ok()) {
    return WithContext(element_type.status(), absl::StrCat("array at offset ", start, ": element type"));
  }
  KVJIT_ASSIGN_OR_RETURN(const uint64_t count, cursor.ReadU64("the array length"));
  // Bounds the count before anything is sized by it, which also rules out
  // overflow in count * element size.
  const uint64_t minimum_size = MinimumSize(*element_type);
  if (count > cursor.remaining() / minimum_size) {
    return absl::InvalidArgumentError(absl::StrCat("truncated: array at offset ", start, " of ", count, " ",
                                                   GgufTypeName(*element_type), " elements (at least ",
                                                   minimum_size, " bytes each) cannot fit in the ",
                                                   cursor.remaining(), " bytes that remain"));
  }
  GgufValue array(GgufType::kArray, {});
  array.array_type_ = *element_type;
  array.array_size_ = count;
  if (FixedSize(*element_type) != 0) {
    KVJIT_ASSIGN_OR_RETURN(array.bytes_, cursor.Take(count * minimum_size, "array elements"));
    return array;
  }
  auto elements = std::make_shared<std::vector<GgufValue>>();
  elements->reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    absl::StatusOr<GgufValue> element = ReadAtDepth(cursor, *element_type, depth + 1);
    if (!element.ok()) return WithContext(element.status(), absl::StrCat("array element ", i));
    elements->push_back(*std::move(element));
  }
  array.variable_elements_ = std::move(elements);
  return array;
}

std::optional<uint64_t> GgufValue::AsUint() const {
  switch (type_) {
    case GgufType::kUint8: return bytes_[0];
    case GgufType::kUint16: return LoadLittleEndian16(bytes_.data());
    case GgufType::kUint32: return LoadLittleEndian32(bytes_.data());
    case GgufType::kUint64: return LoadLittleEndian64(bytes_.data());
    default: break;
  }
  std::optional<int64_t> signed_value = IsSigned(type_) ? AsInt() : std::nullopt;
  if (signed_value && *signed_value >= 0) return static_cast<uint64_t>(*signed_value);
  return std::nullopt;
}

std::optional<int64_t> GgufValue::AsInt() const {
  switch (type_) {
    case GgufType::kInt8: return static_cast<int8_t>(bytes_[0]);
    case GgufType::kInt16: return static_cast<int16_t>(LoadLittleEndian16(bytes_.data()));
    case GgufType::kInt32: return static_cast<int32_t>(LoadLittleEndian32(bytes_.data()));
    case GgufType::kInt64: return static_cast<int64_t>(LoadLittleEndian64(bytes_.data()));
    default: break;
  }
  std::optional<uint64_t> unsigned_value = IsUnsigned(type_) ? AsUint() : std::nullopt;
  if (unsigned_value && *unsigned_value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return static_cast<int64_t>(*unsigned_value);
  }
  return std::nullopt;
}

std::optional<double> GgufValue::AsFloat() const {
  if (type_ == GgufType::kFloat32) {
    const uint32_t bits = LoadLittleEndian32(bytes_.data());
    float value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  if (type_ == GgufType::kFloat64) {
    const uint64_t bits = LoadLittleEndian64(bytes_.data());
    double value;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  return std::nullopt;
}

std::optional<bool> GgufValue::AsBool() const {
  if (type_ != GgufType::kBool) return std::nullopt;
  return bytes_[0] != 0;
}

std::optional<absl::string_view> GgufValue::AsString() const {
  if (type_ != GgufType::kString) return std::nullopt;
  return absl::string_view(reinterpret_cast<const char*>(bytes_.data()), bytes_.size());
}

GgufValue GgufValue::ArrayElement(uint64_t i) const {
  if (variable_elements_ != nullptr) return (*variable_elements_)[i];
  const uint64_t size = FixedSize(array_type_);
  return GgufValue(array_type_, bytes_.subspan(i * size, size));
}

std::string GgufValue::ToString(size_t max_array_elements) const {
  switch (type_) {
    case GgufType::kString:
      return absl::StrCat("\"", absl::Utf8SafeCEscape(*AsString()), "\"");
    case GgufType::kBool:
      return *AsBool() ? "true" : "false";
    case GgufType::kFloat32:
    case GgufType::kFloat64:
      return absl::StrCat(*AsFloat());
    case GgufType::kArray: {
      std::string text = "[";
      const uint64_t shown = std::min<uint64_t>(array_size_, max_array_elements);
      for (uint64_t i = 0; i < shown; ++i) {
        absl::StrAppend(&text, i == 0 ? "" : ", ", ArrayElement(i).ToString(max_array_elements));
      }
      if (shown < array_size_) absl::StrAppend(&text, shown == 0 ? "" : ", ", "... (", array_size_, " elements)");
      return absl::StrCat(text, "]");
    }
    default:
      return IsSigned(type_) ? absl::StrCat(*AsInt()) : absl::StrCat(*AsUint());
  }
}

}  // namespace kvjit::gguf
