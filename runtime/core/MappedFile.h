#ifndef KVJIT_RUNTIME_CORE_MAPPEDFILE_H_
#define KVJIT_RUNTIME_CORE_MAPPEDFILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kvjit {

// A whole file mapped read-only into memory (model files, weight sidecars).
// Move-only; moving keeps the mapping's address, so spans taken from bytes()
// stay valid across moves. Errors name the file and what failed.
class MappedFile {
 public:
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  absl::Span<const uint8_t> bytes() const { return {address_, size_}; }

 private:
  MappedFile(const uint8_t* address, size_t size) : address_(address), size_(size) {}
  void Unmap();

  const uint8_t* address_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kvjit

#endif  // KVJIT_RUNTIME_CORE_MAPPEDFILE_H_
