#ifndef KVJIT_FRONTEND_GGUF_BYTECURSOR_H_
#define KVJIT_FRONTEND_GGUF_BYTECURSOR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kvjit::gguf {

// Reads little-endian fields front to back from a byte buffer; every read is
// bounds-checked, and one past the end is a "truncated" error naming `what`
// and the offset. Messages do not name the file: callers add that context.
class ByteCursor {
 public:
  explicit ByteCursor(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}

  uint64_t offset() const { return offset_; }
  uint64_t remaining() const { return bytes_.size() - offset_; }

  absl::StatusOr<absl::Span<const uint8_t>> Take(uint64_t size, absl::string_view what);
  absl::StatusOr<uint32_t> ReadU32(absl::string_view what);
  absl::StatusOr<uint64_t> ReadU64(absl::string_view what);
  // A GGUF string: a uint64 byte count, then the bytes (no terminator).
  absl::StatusOr<absl::string_view> ReadString(absl::string_view what);

 private:
  absl::Status Truncated(absl::string_view what, uint64_t size) const;

  absl::Span<const uint8_t> bytes_;
  uint64_t offset_ = 0;
};

// Decodes little-endian integers from at least sizeof(T) bytes at `p`.
uint16_t LoadLittleEndian16(const uint8_t* p);
uint32_t LoadLittleEndian32(const uint8_t* p);
uint64_t LoadLittleEndian64(const uint8_t* p);

}  // namespace kvjit::gguf

#endif  // KVJIT_FRONTEND_GGUF_BYTECURSOR_H_
