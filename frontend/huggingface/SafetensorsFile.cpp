#include "frontend/huggingface/SafetensorsFile.h"

#include <algorithm>
#include <optional>
#include <tuple>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "frontend/huggingface/JsonFile.h"

namespace kvjit::safetensors {
namespace {

constexpr size_t kHeaderLengthBytes = 8;
// Real headers are kilobytes to a few megabytes; a larger length means a
// corrupt or foreign file, and parsing it would only waste memory.
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;
constexpr absl::string_view kMetadataKey = "__metadata__";

std::optional<quant::StorageType> StorageTypeOfDtype(absl::string_view dtype) {
  if (dtype == "F32") return quant::StorageType::kF32;
  if (dtype == "F16") return quant::StorageType::kF16;
  if (dtype == "BF16") return quant::StorageType::kBF16;
  return std::nullopt;
}

uint64_t ReadLittleEndian64(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

// A header entry before it is given its bytes: data_offsets are relative to
// the start of the data section.
struct TensorEntry {
  Tensor tensor;
  uint64_t begin = 0;
  uint64_t end = 0;
};

absl::StatusOr<TensorEntry> ParseTensorEntry(const std::string& name, const nlohmann::json& entry,
                                             uint64_t data_size, const std::string& where) {
  if (!entry.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " must be a JSON object"));
  }
  const nlohmann::json* dtype_field = hf::FindField(entry, "dtype");
  const nlohmann::json* shape_field = hf::FindField(entry, "shape");
  const nlohmann::json* offsets_field = hf::FindField(entry, "data_offsets");
  if (dtype_field == nullptr || !dtype_field->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing string field 'dtype'"));
  }
  if (shape_field == nullptr || !shape_field->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing array field 'shape'"));
  }
  if (offsets_field == nullptr || !offsets_field->is_array() || offsets_field->size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": missing field 'data_offsets' ([begin, end])"));
  }

  const std::string& dtype_name = dtype_field->get_ref<const std::string&>();
  std::optional<quant::StorageType> storage_type = StorageTypeOfDtype(dtype_name);
  if (!storage_type) {
    return absl::UnimplementedError(
        absl::StrCat(where, ": dtype ", dtype_name, " is not supported (F32, F16 and BF16 are)"));
  }

  TensorEntry parsed;
  parsed.tensor.name = name;
  parsed.tensor.storage_type = *storage_type;
  uint64_t element_count = 1;
  for (const nlohmann::json& dim : *shape_field) {
    absl::StatusOr<int64_t> extent = hf::NonNegativeInteger(dim, absl::StrCat(where, ": shape"));
    if (!extent.ok()) return extent.status();
    parsed.tensor.dims.push_back(*extent);
    if (__builtin_mul_overflow(element_count, static_cast<uint64_t>(*extent), &element_count)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": shape [", absl::StrJoin(parsed.tensor.dims, ", "), "...] overflows"));
    }
  }
  uint64_t expected_bytes = 0;
  // F32, F16 and BF16 blocks are single elements.
  uint64_t element_bytes = static_cast<uint64_t>(quant::BytesPerBlock(*storage_type));
  if (__builtin_mul_overflow(element_count, element_bytes, &expected_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": shape [", absl::StrJoin(parsed.tensor.dims, ", "), "] overflows in bytes"));
  }

  absl::StatusOr<int64_t> begin =
      hf::NonNegativeInteger((*offsets_field)[0], absl::StrCat(where, ": data_offsets begin"));
  if (!begin.ok()) return begin.status();
  absl::StatusOr<int64_t> end =
      hf::NonNegativeInteger((*offsets_field)[1], absl::StrCat(where, ": data_offsets end"));
  if (!end.ok()) return end.status();
  parsed.begin = static_cast<uint64_t>(*begin);
  parsed.end = static_cast<uint64_t>(*end);
  if (parsed.begin > parsed.end) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": data_offsets begin ", parsed.begin, " is after end ", parsed.end));
  }
  if (parsed.end > data_size) {
    return absl::OutOfRangeError(absl::StrCat(where, ": data_offsets end ", parsed.end,
                                              " is past the data section (", data_size, " bytes)"));
  }
  if (parsed.end - parsed.begin != expected_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": data_offsets span ", parsed.end - parsed.begin, " bytes but shape [",
        absl::StrJoin(parsed.tensor.dims, ", "), "] of ", dtype_name, " needs ", expected_bytes));
  }
  return parsed;
}

absl::StatusOr<std::map<std::string, std::string>> ParseMetadata(const nlohmann::json& metadata,
                                                                 const std::string& path) {
  std::map<std::string, std::string> parsed;
  if (metadata.is_null()) return parsed;
  if (!metadata.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": __metadata__ must be a JSON object"));
  }
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": __metadata__ entry '", key, "' must be a string"));
    }
    parsed.emplace(key, value.get<std::string>());
  }
  return parsed;
}

absl::Status CheckNoOverlap(const std::vector<TensorEntry>& entries_by_offset,
                            const std::string& path) {
  const TensorEntry* furthest = nullptr;
  for (const TensorEntry& entry : entries_by_offset) {
    if (entry.begin == entry.end) continue;  // empty tensors occupy no bytes
    if (furthest != nullptr && entry.begin < furthest->end) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensors '", furthest->tensor.name, "' [", furthest->begin, ", ", furthest->end,
          ") and '", entry.tensor.name, "' [", entry.begin, ", ", entry.end, ") overlap"));
    }
    if (furthest == nullptr || entry.end > furthest->end) furthest = &entry;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  absl::StatusOr<MappedFile> mapping = MappedFile::Open(path);
  if (!mapping.ok()) return mapping.status();
  SafetensorsFile file(path, *std::move(mapping));
  if (absl::Status status = file.ParseHeader(); !status.ok()) return status;
  return file;
}

absl::Status SafetensorsFile::ParseHeader() {
  absl::Span<const uint8_t> bytes = mapping_.bytes();
  if (bytes.size() < kHeaderLengthBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": ", bytes.size(), " bytes is shorter than the 8-byte header length"));
  }
  uint64_t header_length = ReadLittleEndian64(bytes.data());
  if (header_length > kMaxHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": header length ", header_length,
                                                   " exceeds the limit of ", kMaxHeaderBytes,
                                                   " bytes; not a safetensors file?"));
  }
  if (header_length > bytes.size() - kHeaderLengthBytes) {
    return absl::OutOfRangeError(absl::StrCat(path_, ": header length ", header_length,
                                              " runs past the end of the file (", bytes.size(),
                                              " bytes)"));
  }
  absl::string_view header_text(reinterpret_cast<const char*>(bytes.data()) + kHeaderLengthBytes,
                                header_length);
  absl::StatusOr<nlohmann::json> header =
      hf::ParseJson(header_text, absl::StrCat(path_, ": header"));
  if (!header.ok()) return header.status();
  if (!header->is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": header must be a JSON object"));
  }

  absl::Span<const uint8_t> data = bytes.subspan(kHeaderLengthBytes + header_length);
  std::vector<TensorEntry> entries;
  for (const auto& [name, value] : header->items()) {
    if (name == kMetadataKey) {
      absl::StatusOr<std::map<std::string, std::string>> metadata = ParseMetadata(value, path_);
      if (!metadata.ok()) return metadata.status();
      metadata_ = *std::move(metadata);
      continue;
    }
    absl::StatusOr<TensorEntry> entry =
        ParseTensorEntry(name, value, data.size(), absl::StrCat(path_, ": tensor '", name, "'"));
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }

  std::sort(entries.begin(), entries.end(), [](const TensorEntry& a, const TensorEntry& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  if (absl::Status status = CheckNoOverlap(entries, path_); !status.ok()) return status;

  tensors_.reserve(entries.size());
  for (TensorEntry& entry : entries) {
    entry.tensor.data = data.subspan(entry.begin, entry.end - entry.begin);
    index_by_name_.emplace(entry.tensor.name, tensors_.size());
    tensors_.push_back(std::move(entry.tensor));
  }
  return absl::OkStatus();
}

const Tensor* SafetensorsFile::Find(absl::string_view name) const {
  auto found = index_by_name_.find(name);
  return found == index_by_name_.end() ? nullptr : &tensors_[found->second];
}

absl::StatusOr<const Tensor*> SafetensorsFile::Get(absl::string_view name) const {
  if (const Tensor* tensor = Find(name)) return tensor;
  return absl::NotFoundError(absl::StrCat(path_, ": no tensor named '", name, "'"));
}

}  // namespace kvjit::safetensors
