#include "frontend/gguf/GgufFile.h"

#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "frontend/gguf/ByteCursor.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::gguf {
namespace {

constexpr uint32_t kMaxDims = 4;
// The fewest bytes a metadata pair (key length, value type, one-byte value)
// and a tensor info (name length, n_dims, type, offset) can take; the header
// counts are checked against them before anything is sized by the counts.
constexpr uint64_t kMinMetadataEntryBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;
constexpr absl::string_view kAlignmentKey = "general.alignment";

// Names from a damaged file may hold any bytes; messages show them escaped.
std::string Quoted(absl::string_view name) { return absl::StrCat("'", absl::CHexEscape(name), "'"); }

std::string TypeDescription(const GgufValue& value) {
  if (value.type() != GgufType::kArray) return std::string(GgufTypeName(value.type()));
  return absl::StrCat("array of ", GgufTypeName(value.array_type()));
}

uint32_t ByteSwap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00) | ((v << 8) & 0xff0000) | (v << 24);
}


}  // namespace

int64_t GgufTensor::element_count() const {
  int64_t count = 1;
  for (int64_t dim : dims) count *= dim;
  return count;
}

GgufFile::GgufFile(std::string path, absl::Span<const uint8_t> bytes,
                   std::optional<MappedFile> mapping)
    : path_(std::move(path)), bytes_(bytes), mapping_(std::move(mapping)) {}

GgufFile::~GgufFile() = default;

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::Open(const std::string& path) {
  KVJIT_ASSIGN_OR_RETURN(MappedFile mapping, MappedFile::Open(path));
  const absl::Span<const uint8_t> bytes = mapping.bytes();
  std::unique_ptr<GgufFile> file(new GgufFile(path, bytes, std::move(mapping)));
  KVJIT_RETURN_IF_ERROR(file->Parse());
  return file;
}

absl::StatusOr<std::unique_ptr<GgufFile>> GgufFile::FromBuffer(std::string name, absl::Span<const uint8_t> bytes) {
  std::unique_ptr<GgufFile> file(new GgufFile(std::move(name), bytes, std::nullopt));
  KVJIT_RETURN_IF_ERROR(file->Parse());
  return file;
}

absl::Status GgufFile::Error(absl::string_view detail) const {
  return absl::InvalidArgumentError(absl::StrCat(path_, ": ", detail));
}

absl::Status GgufFile::WithContext(const absl::Status& status, absl::string_view context) const {
  return absl::Status(status.code(), absl::StrCat(path_, ": ", context, ": ", status.message()));
}

absl::Status GgufFile::Parse() {
  ByteCursor cursor(bytes_);
  uint64_t tensor_count = 0;
  uint64_t metadata_count = 0;
  KVJIT_RETURN_IF_ERROR(ParseHeader(cursor, tensor_count, metadata_count));
  KVJIT_RETURN_IF_ERROR(ParseMetadata(cursor, metadata_count));
  KVJIT_RETURN_IF_ERROR(ResolveAlignment());
  KVJIT_RETURN_IF_ERROR(ParseTensorInfos(cursor, tensor_count));
  // The data section starts at the first aligned offset after the infos.
  const uint64_t misalignment = cursor.offset() % alignment_;
  const uint64_t padding = misalignment == 0 ? 0 : alignment_ - misalignment;
  if (padding > std::numeric_limits<uint64_t>::max() - cursor.offset()) {
    return Error(absl::StrCat("the data section offset overflows (alignment ", alignment_, ")"));
  }
  data_offset_ = cursor.offset() + padding;
  return PlaceTensorData();
}

absl::Status GgufFile::ParseHeader(ByteCursor& cursor, uint64_t& tensor_count, uint64_t& metadata_count) {
  absl::StatusOr<absl::Span<const uint8_t>> magic = cursor.Take(4, "the magic");
  if (!magic.ok()) return WithContext(magic.status(), "header");
  const absl::string_view magic_text(reinterpret_cast<const char*>(magic->data()), magic->size());
  if (magic_text != "GGUF") {
    return Error(absl::StrCat("bad magic \"", absl::CHexEscape(magic_text), "\": not a GGUF file (expected \"GGUF\")"));
  }
  absl::StatusOr<uint32_t> version = cursor.ReadU32("the version");
  if (!version.ok()) return WithContext(version.status(), "header");
  if (*version != 2 && *version != 3) {
    const uint32_t swapped = ByteSwap32(*version);
    if (swapped == 2 || swapped == 3) {
      return Error(absl::StrCat("big-endian GGUF (version ", swapped, ") is not supported"));
    }
    return Error(absl::StrCat("GGUF version ", *version, " is not supported (kvjit reads versions 2 and 3)"));
  }
  version_ = *version;
  absl::StatusOr<uint64_t> tensors = cursor.ReadU64("the tensor count (n_tensors)");
  if (!tensors.ok()) return WithContext(tensors.status(), "header");
  absl::StatusOr<uint64_t> entries = cursor.ReadU64("the metadata count (n_kv)");
  if (!entries.ok()) return WithContext(entries.status(), "header");
  if (*entries > cursor.remaining() / kMinMetadataEntryBytes) {
    return Error(absl::StrCat("header: n_kv ", *entries, " is more than the ", cursor.remaining(),
                              " remaining bytes can hold (each key/value pair takes at least ",
                              kMinMetadataEntryBytes, ")"));
  }
  if (*tensors > cursor.remaining() / kMinTensorInfoBytes) {
    return Error(absl::StrCat("header: n_tensors ", *tensors, " is more than the ", cursor.remaining(),
                              " remaining bytes can hold (each tensor info takes at least ", kMinTensorInfoBytes,
                              ")"));
  }
  tensor_count = *tensors;
  metadata_count = *entries;
  return absl::OkStatus();
}

absl::Status GgufFile::ParseMetadata(ByteCursor& cursor, uint64_t count) {
  metadata_.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    absl::StatusOr<absl::string_view> key = cursor.ReadString("the key");
    if (!key.ok()) return WithContext(key.status(), absl::StrCat("metadata entry ", i));
    // Zero padding read as metadata would give empty keys: refusing them
    // catches counts that run into the padding.
    if (key->empty()) return Error(absl::StrCat("metadata entry ", i, ": the key is empty"));
    const std::string context = absl::StrCat("key ", Quoted(*key));
    absl::StatusOr<uint32_t> type_id = cursor.ReadU32("the value type");
    if (!type_id.ok()) return WithContext(type_id.status(), context);
    absl::StatusOr<GgufType> type = GgufTypeFromId(*type_id);
    if (!type.ok()) return WithContext(type.status(), context);
    absl::StatusOr<GgufValue> value = GgufValue::Read(cursor, *type);
    if (!value.ok()) return WithContext(value.status(), context);
    auto [existing, inserted] = metadata_index_.emplace(*key, metadata_.size());
    if (!inserted) {
      return Error(absl::StrCat("duplicate key ", Quoted(*key), " (metadata entries ", existing->second, " and ", i,
                                ")"));
    }
    metadata_.push_back({*key, *std::move(value)});
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ResolveAlignment() {
  const GgufValue* value = Find(kAlignmentKey);
  if (value == nullptr) return absl::OkStatus();
  std::optional<uint64_t> alignment = value->AsUint();
  if (!alignment) {
    return Error(absl::StrCat(kAlignmentKey, " is ", value->ToString(), " (", TypeDescription(*value),
                              "), not a positive integer"));
  }
  if (*alignment == 0 || (*alignment & (*alignment - 1)) != 0) {
    return Error(absl::StrCat(kAlignmentKey, " ", *alignment, " is not a power of two"));
  }
  alignment_ = *alignment;
  return absl::OkStatus();
}

absl::Status GgufFile::ParseTensorInfos(ByteCursor& cursor, uint64_t count) {
  tensors_.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    GgufTensor tensor;
    KVJIT_RETURN_IF_ERROR(ParseTensorInfo(cursor, i, tensor));
    tensors_.push_back(std::move(tensor));
  }
  // Indexed only now: the names' characters no longer move.
  for (size_t i = 0; i < tensors_.size(); ++i) {
    auto [existing, inserted] = tensor_index_.emplace(tensors_[i].name, i);
    if (!inserted) {
      return Error(absl::StrCat("duplicate tensor name ", Quoted(tensors_[i].name), " (tensors ", existing->second,
                                " and ", i, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status GgufFile::ParseTensorInfo(ByteCursor& cursor, uint64_t index, GgufTensor& tensor) {
  absl::StatusOr<absl::string_view> name = cursor.ReadString("the name");
  if (!name.ok()) return WithContext(name.status(), absl::StrCat("tensor ", index));
  tensor.name = std::string(*name);
  const std::string context = absl::StrCat("tensor ", Quoted(tensor.name));

  absl::StatusOr<uint32_t> dim_count = cursor.ReadU32("n_dims");
  if (!dim_count.ok()) return WithContext(dim_count.status(), context);
  if (*dim_count > kMaxDims) {
    return Error(absl::StrCat(context, ": n_dims ", *dim_count, " is more than ", kMaxDims));
  }
  int64_t element_count = 1;
  for (uint32_t d = 0; d < *dim_count; ++d) {
    absl::StatusOr<uint64_t> dim = cursor.ReadU64("a dimension");
    if (!dim.ok()) return WithContext(dim.status(), context);
    if (*dim == 0 || *dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Error(absl::StrCat(context, ": dimension ", d, " is ", *dim, ", not a positive int64"));
    }
    const int64_t extent = static_cast<int64_t>(*dim);
    if (element_count > std::numeric_limits<int64_t>::max() / extent) {
      return Error(absl::StrCat(context, ": the element count overflows int64 at dimension ", d));
    }
    element_count *= extent;
    tensor.dims.push_back(extent);
  }

  absl::StatusOr<uint32_t> type_id = cursor.ReadU32("the type");
  if (!type_id.ok()) return WithContext(type_id.status(), context);
  absl::StatusOr<quant::StorageType> type = quant::StorageTypeFromGgml(*type_id);
  if (!type.ok()) return WithContext(type.status(), context);
  tensor.type = *type;

  absl::StatusOr<uint64_t> offset = cursor.ReadU64("the data offset");
  if (!offset.ok()) return WithContext(offset.status(), context);
  if (*offset % alignment_ != 0) {
    return Error(absl::StrCat(context, ": data offset ", *offset, " is not a multiple of the alignment ", alignment_));
  }
  tensor.offset_in_data = *offset;

  const int64_t row_elements = tensor.dims.empty() ? 1 : tensor.dims[0];
  absl::StatusOr<uint64_t> row_bytes = quant::RowBytes(tensor.type, row_elements);
  if (!row_bytes.ok()) return WithContext(row_bytes.status(), absl::StrCat(context, ": rows (dimension 0)"));
  const uint64_t rows = static_cast<uint64_t>(element_count / row_elements);
  if (*row_bytes > std::numeric_limits<uint64_t>::max() / rows) {
    return Error(absl::StrCat(context, ": the byte size overflows 64 bits"));
  }
  tensor.size_bytes = *row_bytes * rows;
  return absl::OkStatus();
}

absl::Status GgufFile::PlaceTensorData() {
  const uint64_t file_size = bytes_.size();
  for (GgufTensor& tensor : tensors_) {
    const bool starts_inside =
        data_offset_ <= file_size && tensor.offset_in_data <= file_size - data_offset_;
    if (!starts_inside || tensor.size_bytes > file_size - data_offset_ - tensor.offset_in_data) {
      return Error(absl::StrCat("tensor ", Quoted(tensor.name), ": data of ", tensor.size_bytes,
                                " bytes at data offset ", tensor.offset_in_data, " (file offset ",
                                data_offset_, " + ", tensor.offset_in_data, ") runs past the end of the file (",
                                file_size, " bytes)"));
    }
    tensor.file_offset = data_offset_ + tensor.offset_in_data;
    tensor.data = bytes_.subspan(tensor.file_offset, tensor.size_bytes);
  }
  return absl::OkStatus();
}

const GgufValue* GgufFile::Find(absl::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].value;
}

absl::StatusOr<const GgufValue*> GgufFile::Require(absl::string_view key) const {
  const GgufValue* value = Find(key);
  if (value == nullptr) return absl::NotFoundError(absl::StrCat(path_, ": key ", Quoted(key), " is missing"));
  return value;
}

absl::Status GgufFile::WrongType(absl::string_view key, const GgufValue& value, absl::string_view expected) const {
  return Error(absl::StrCat("key ", Quoted(key), " is of type ", TypeDescription(value), ", not ", expected));
}

absl::StatusOr<absl::string_view> GgufFile::GetString(absl::string_view key) const {
  KVJIT_ASSIGN_OR_RETURN(const GgufValue* value, Require(key));
  if (std::optional<absl::string_view> text = value->AsString()) return *text;
  return WrongType(key, *value, "string");
}

absl::StatusOr<uint64_t> GgufFile::GetUint(absl::string_view key) const {
  KVJIT_ASSIGN_OR_RETURN(const GgufValue* value, Require(key));
  if (std::optional<uint64_t> number = value->AsUint()) return *number;
  if (value->is_integer()) {
    return Error(absl::StrCat("key ", Quoted(key), " is ", value->ToString(), ", not a non-negative integer"));
  }
  return WrongType(key, *value, "an unsigned integer");
}

absl::StatusOr<int64_t> GgufFile::GetInt(absl::string_view key) const {
  KVJIT_ASSIGN_OR_RETURN(const GgufValue* value, Require(key));
  if (std::optional<int64_t> number = value->AsInt()) return *number;
  if (value->is_integer()) {
    return Error(absl::StrCat("key ", Quoted(key), " is ", value->ToString(), ", which does not fit int64"));
  }
  return WrongType(key, *value, "an integer");
}

absl::StatusOr<double> GgufFile::GetFloat(absl::string_view key) const {
  KVJIT_ASSIGN_OR_RETURN(const GgufValue* value, Require(key));
  if (std::optional<double> number = value->AsFloat()) return *number;
  return WrongType(key, *value, "float32 or float64");
}

absl::StatusOr<bool> GgufFile::GetBool(absl::string_view key) const {
  KVJIT_ASSIGN_OR_RETURN(const GgufValue* value, Require(key));
  if (std::optional<bool> flag = value->AsBool()) return *flag;
  return WrongType(key, *value, "bool");
}

absl::StatusOr<std::vector<absl::string_view>> GgufFile::GetStringArray(absl::string_view key) const {
  KVJIT_ASSIGN_OR_RETURN(const GgufValue* value, Require(key));
  const GgufValue& array = *value;
  if (array.type() != GgufType::kArray || array.array_type() != GgufType::kString) {
    return WrongType(key, array, "array of string");
  }
  std::vector<absl::string_view> strings;
  strings.reserve(array.array_size());
  for (uint64_t i = 0; i < array.array_size(); ++i) strings.push_back(*array.ArrayElement(i).AsString());
  return strings;
}

absl::StatusOr<std::vector<float>> GgufFile::GetFloatArray(absl::string_view key) const {
  KVJIT_ASSIGN_OR_RETURN(const GgufValue* value, Require(key));
  const GgufValue& array = *value;
  if (array.type() != GgufType::kArray ||
      (array.array_type() != GgufType::kFloat32 && array.array_type() != GgufType::kFloat64)) {
    return WrongType(key, array, "array of float32 or float64");
  }
  std::vector<float> numbers;
  numbers.reserve(array.array_size());
  for (uint64_t i = 0; i < array.array_size(); ++i) {
    numbers.push_back(static_cast<float>(*array.ArrayElement(i).AsFloat()));
  }
  return numbers;
}

absl::StatusOr<std::vector<int64_t>> GgufFile::GetIntArray(absl::string_view key) const {
  KVJIT_ASSIGN_OR_RETURN(const GgufValue* value, Require(key));
  const GgufValue& array = *value;
  if (array.type() != GgufType::kArray || !GgufTypeIsInteger(array.array_type())) {
    return WrongType(key, array, "array of integers");
  }
  std::vector<int64_t> numbers;
  numbers.reserve(array.array_size());
  for (uint64_t i = 0; i < array.array_size(); ++i) {
    GgufValue element = array.ArrayElement(i);
    std::optional<int64_t> number = element.AsInt();
    if (!number) {
      return Error(absl::StrCat("key ", Quoted(key), ": element ", i, " is ", element.ToString(),
                                ", which does not fit int64"));
    }
    numbers.push_back(*number);
  }
  return numbers;
}

const GgufTensor* GgufFile::FindTensor(absl::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<const GgufTensor*> GgufFile::GetTensor(absl::string_view name) const {
  const GgufTensor* tensor = FindTensor(name);
  if (tensor == nullptr) return absl::NotFoundError(absl::StrCat(path_, ": tensor ", Quoted(name), " is missing"));
  return tensor;
}

}  // namespace kvjit::gguf
