#include "runtime/cuda/PoolLayout.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kvjit::cuda {

absl::StatusOr<uint64_t> PoolLayout::Reserve(absl::string_view name, uint64_t bytes,
                                             uint64_t alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("device region '", name, "': alignment ",
                                                   alignment, " is not a power of two"));
  }
  alignment = std::max(alignment, kDefaultAlignment);
  uint64_t offset = 0;
  uint64_t end = 0;
  if (__builtin_add_overflow(end_, alignment - 1, &offset) ||
      __builtin_add_overflow(offset & ~(alignment - 1), bytes, &end)) {
    return absl::ResourceExhaustedError(absl::StrCat("device region '", name, "' of ", bytes,
                                                     " bytes overflows the device address space"));
  }
  offset &= ~(alignment - 1);
  regions_.push_back({std::string(name), offset, bytes});
  end_ = end;
  return offset;
}

std::string PoolLayout::Describe() const {
  std::string text;
  for (size_t i = 0; i < regions_.size();) {
    uint64_t bytes = 0;
    size_t end = i;
    for (; end < regions_.size() && regions_[end].name == regions_[i].name; ++end) {
      bytes += regions_[end].bytes;
    }
    absl::StrAppend(&text, text.empty() ? "" : ", ", regions_[i].name, " ",
                    absl::StrFormat("%.1f MiB", bytes / (1024.0 * 1024.0)));
    i = end;
  }
  return text;
}

}  // namespace kvjit::cuda
