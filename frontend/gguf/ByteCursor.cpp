#include "frontend/gguf/ByteCursor.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::gguf {

uint16_t LoadLittleEndian16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

uint32_t LoadLittleEndian32(const uint8_t* p) {
  return static_cast<uint32_t>(LoadLittleEndian16(p)) | (static_cast<uint32_t>(LoadLittleEndian16(p + 2)) << 16);
}

uint64_t LoadLittleEndian64(const uint8_t* p) {
  return static_cast<uint64_t>(LoadLittleEndian32(p)) | (static_cast<uint64_t>(LoadLittleEndian32(p + 4)) << 32);
}

absl::Status ByteCursor::Truncated(absl::string_view what, uint64_t size) const {
  return absl::InvalidArgumentError(absl::StrCat("truncated: ", what, " needs ", size, " bytes at offset ", offset_,
                                                 ", but only ", remaining(), " remain"));
}

absl::StatusOr<absl::Span<const uint8_t>> ByteCursor::Take(uint64_t size, absl::string_view what) {
  if (size > remaining()) return Truncated(what, size);
  absl::Span<const uint8_t> taken = bytes_.subspan(offset_, size);
  offset_ += size;
  return taken;
}

absl::StatusOr<uint32_t> ByteCursor::ReadU32(absl::string_view what) {
  KVJIT_ASSIGN_OR_RETURN(absl::Span<const uint8_t> bytes, Take(4, what));
  return LoadLittleEndian32(bytes.data());
}

absl::StatusOr<uint64_t> ByteCursor::ReadU64(absl::string_view what) {
  KVJIT_ASSIGN_OR_RETURN(absl::Span<const uint8_t> bytes, Take(8, what));
  return LoadLittleEndian64(bytes.data());
}

absl::StatusOr<absl::string_view> ByteCursor::ReadString(absl::string_view what) {
  // Checked here rather than through ReadU64 so that the message for the
  // length is only built when it is needed.
  if (remaining() < 8) return Truncated(absl::StrCat("the length of ", what), 8);
  const uint64_t length = LoadLittleEndian64(bytes_.data() + offset_);
  offset_ += 8;
  if (length > remaining()) {
    return absl::InvalidArgumentError(absl::StrCat("truncated: ", what, " of ", length, " bytes at offset ", offset_,
                                                   " runs past the end (", remaining(), " bytes remain)"));
  }
  absl::string_view text(reinterpret_cast<const char*>(bytes_.data() + offset_), length);
  offset_ += length;
  return text;
}

}  // namespace kvjit::gguf
