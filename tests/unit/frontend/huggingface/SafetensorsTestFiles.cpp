#include "tests/unit/frontend/huggingface/SafetensorsTestFiles.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "nlohmann/json.hpp"

namespace kvjit::safetensors::testing {

TempDir::TempDir() {
  std::filesystem::path base = std::filesystem::temp_directory_path();
  if (const char* test_tmp = std::getenv("TEST_TMPDIR")) base = test_tmp;
  std::string pattern = (base / "kvjit_safetensors_XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed for " + pattern);
  }
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::WriteFile(absl::string_view name, absl::string_view contents) const {
  std::string path = (std::filesystem::path(path_) / std::string(name)).string();
  std::ofstream stream(path, std::ios::binary);
  stream.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  if (!stream) throw std::runtime_error("cannot write " + path);
  return path;
}

std::string SerializeSafetensors(const std::vector<TensorSpec>& tensors,
                                 const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string data;
  for (const TensorSpec& tensor : tensors) {
    header[tensor.name] = {{"dtype", tensor.dtype},
                           {"shape", tensor.shape},
                           {"data_offsets", {data.size(), data.size() + tensor.bytes.size()}}};
    data += tensor.bytes;
  }
  std::string header_text = header.dump();
  // The reference writer pads the header with spaces to a multiple of 8.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  return SafetensorsWithHeader(header_text, data);
}

std::string SafetensorsWithHeader(absl::string_view header_json, absl::string_view data) {
  std::string image;
  uint64_t length = header_json.size();
  for (int i = 0; i < 8; ++i) image.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  image.append(header_json.data(), header_json.size());
  image.append(data.data(), data.size());
  return image;
}

std::string F32Bytes(const std::vector<float>& values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

}  // namespace kvjit::safetensors::testing
