#ifndef KVJIT_TESTS_UNIT_FRONTEND_SAFETENSORS_SAFETENSORSTESTFILES_H_
#define KVJIT_TESTS_UNIT_FRONTEND_SAFETENSORS_SAFETENSORSTESTFILES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvjit::safetensors::testing {

// A fresh directory under the test's temporary directory, removed with its
// contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `contents` to path()/name and returns the file's path.
  std::string WriteFile(absl::string_view name, absl::string_view contents) const;

 private:
  std::string path_;
};

struct TensorSpec {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

// A well-formed .safetensors image: tensors laid out back to back in the
// given order, offsets computed from their byte strings.
std::string SerializeSafetensors(const std::vector<TensorSpec>& tensors,
                                 const std::map<std::string, std::string>& metadata = {});

// An image with exactly this header text and data, for malformed cases.
std::string SafetensorsWithHeader(absl::string_view header_json, absl::string_view data);

// The little-endian bytes of these floats.
std::string F32Bytes(const std::vector<float>& values);

template <typename T>
std::string ErrorMessage(const absl::StatusOr<T>& result) {
  return result.ok() ? std::string("OK") : std::string(result.status().message());
}

}  // namespace kvjit::safetensors::testing

#endif  // KVJIT_TESTS_UNIT_FRONTEND_SAFETENSORS_SAFETENSORSTESTFILES_H_
