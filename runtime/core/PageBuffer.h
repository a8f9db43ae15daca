#ifndef KVJIT_RUNTIME_CORE_PAGEBUFFER_H_
#define KVJIT_RUNTIME_CORE_PAGEBUFFER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace kvjit {

// A zero-filled buffer of anonymous pages that costs memory only where it is
// written: the kernel backs a page when it is first touched, so a KV pool or
// an activation arena sized for the most a run could need is resident only
// for what the run really uses. (Zeroing a std::vector would touch, and so
// make resident, every byte up front.) Move-only; moving keeps the address.
class PageBuffer {
 public:
  PageBuffer() = default;
  // `what` names the buffer in the error when the address space is short.
  static absl::StatusOr<PageBuffer> Allocate(size_t bytes, const std::string& what);

  PageBuffer(PageBuffer&& other) noexcept;
  PageBuffer& operator=(PageBuffer&& other) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  ~PageBuffer();

  uint8_t* data() const { return address_; }
  size_t size() const { return size_; }

  // Bytes of the buffer backed by memory now (whole pages), by mincore(2).
  size_t ResidentBytes() const;

 private:
  PageBuffer(uint8_t* address, size_t size) : address_(address), size_(size) {}
  void Release();

  uint8_t* address_ = nullptr;
  size_t size_ = 0;
};

// Bytes of [address, address + bytes) resident in memory, in whole pages:
// for mapped files and anonymous buffers alike.
size_t ResidentBytesOf(const void* address, size_t bytes);

}  // namespace kvjit

#endif  // KVJIT_RUNTIME_CORE_PAGEBUFFER_H_
