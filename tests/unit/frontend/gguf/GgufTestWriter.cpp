#include "tests/unit/frontend/gguf/GgufTestWriter.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace kvjit::gguf::test {

ByteWriter& ByteWriter::U8(uint8_t v) {
  bytes_.push_back(v);
  return *this;
}

ByteWriter& ByteWriter::U16(uint16_t v) { return U8(static_cast<uint8_t>(v)).U8(static_cast<uint8_t>(v >> 8)); }

ByteWriter& ByteWriter::U32(uint32_t v) {
  return U16(static_cast<uint16_t>(v)).U16(static_cast<uint16_t>(v >> 16));
}

ByteWriter& ByteWriter::U64(uint64_t v) {
  return U32(static_cast<uint32_t>(v)).U32(static_cast<uint32_t>(v >> 32));
}

ByteWriter& ByteWriter::F32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return U32(bits);
}

ByteWriter& ByteWriter::F64(double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return U64(bits);
}

ByteWriter& ByteWriter::Str(absl::string_view s) {
  U64(s.size());
  bytes_.insert(bytes_.end(), s.begin(), s.end());
  return *this;
}

ByteWriter& ByteWriter::Raw(const std::vector<uint8_t>& bytes) {
  bytes_.insert(bytes_.end(), bytes.begin(), bytes.end());
  return *this;
}

GgufWriter& GgufWriter::Version(uint32_t version) {
  version_ = version;
  return *this;
}

GgufWriter& GgufWriter::Alignment(uint32_t alignment) {
  alignment_ = alignment;
  return AddUint32("general.alignment", alignment);
}

GgufWriter& GgufWriter::AddUint32(absl::string_view key, uint32_t value) {
  return AddRaw(key, kUint32, ByteWriter().U32(value));
}

GgufWriter& GgufWriter::AddString(absl::string_view key, absl::string_view value) {
  return AddRaw(key, kString, ByteWriter().Str(value));
}

GgufWriter& GgufWriter::AddStringArray(absl::string_view key, const std::vector<std::string>& values) {
  ByteWriter array;
  array.U32(kString).U64(values.size());
  for (const std::string& value : values) array.Str(value);
  return AddRaw(key, kArray, array);
}

GgufWriter& GgufWriter::AddRaw(absl::string_view key, uint32_t type_id, const ByteWriter& value) {
  metadata_.Str(key).U32(type_id).Raw(value.bytes());
  ++metadata_count_;
  return *this;
}

GgufWriter& GgufWriter::AddTensor(Tensor tensor) {
  tensors_.push_back(std::move(tensor));
  return *this;
}

std::vector<uint8_t> GgufWriter::Build() const {
  ByteWriter file;
  file.U8('G').U8('G').U8('U').U8('F').U32(version_);
  file.U64(tensor_count_override.value_or(tensors_.size()));
  file.U64(metadata_count_override.value_or(metadata_count_));
  file.Raw(metadata_.bytes());

  auto align = [this](uint64_t offset) { return (offset + alignment_ - 1) / alignment_ * alignment_; };
  std::vector<uint64_t> offsets;
  uint64_t data_size = 0;
  for (const Tensor& tensor : tensors_) {
    offsets.push_back(data_size);
    data_size = align(data_size + tensor.data.size());
  }
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor& tensor = tensors_[i];
    file.Str(tensor.name).U32(static_cast<uint32_t>(tensor.dims.size()));
    for (uint64_t dim : tensor.dims) file.U64(dim);
    file.U32(tensor.ggml_type).U64(tensor.offset_override.value_or(offsets[i]));
  }
  file.bytes().resize(align(file.bytes().size()), 0);
  const size_t data_start = file.bytes().size();
  file.bytes().resize(data_start + data_size, 0);
  for (size_t i = 0; i < tensors_.size(); ++i) {
    std::copy(tensors_[i].data.begin(), tensors_[i].data.end(), file.bytes().begin() + data_start + offsets[i]);
  }
  return file.bytes();
}

}  // namespace kvjit::gguf::test
