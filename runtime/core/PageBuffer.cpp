#include "runtime/core/PageBuffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kvjit {

absl::StatusOr<PageBuffer> PageBuffer::Allocate(size_t bytes, const std::string& what) {
  if (bytes == 0) return PageBuffer();
  // MAP_NORESERVE: the pages a run never touches need no swap or commit.
  void* address = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (address == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot reserve ", bytes, " bytes for ", what, ": ", std::strerror(errno)));
  }
  return PageBuffer(static_cast<uint8_t*>(address), bytes);
}

PageBuffer::PageBuffer(PageBuffer&& other) noexcept
    : address_(other.address_), size_(other.size_) {
  other.address_ = nullptr;
  other.size_ = 0;
}

PageBuffer& PageBuffer::operator=(PageBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    address_ = other.address_;
    size_ = other.size_;
    other.address_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

PageBuffer::~PageBuffer() { Release(); }

void PageBuffer::Release() {
  if (address_ != nullptr) munmap(address_, size_);
  address_ = nullptr;
  size_ = 0;
}

size_t PageBuffer::ResidentBytes() const { return ResidentBytesOf(address_, size_); }

size_t ResidentBytesOf(const void* address, size_t bytes) {
  if (address == nullptr || bytes == 0) return 0;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(address) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(address) + bytes;
  const size_t pages = (end - begin + page - 1) / page;
  std::vector<unsigned char> resident(pages);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, resident.data()) != 0) return 0;
  size_t count = 0;
  for (unsigned char flags : resident) count += flags & 1;
  return count * page;
}

}  // namespace kvjit
