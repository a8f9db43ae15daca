#ifndef KVJIT_RUNTIME_CUDA_POOLLAYOUT_H_
#define KVJIT_RUNTIME_CUDA_POOLLAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvjit::cuda {

// The layout of the one device allocation a runner makes: weights, the
// activation arena, step inputs, scratch and the KV pool are regions of it,
// each at an offset aligned as asked. One allocation means one cuMemAlloc
// (no fragmentation, one place where out-of-memory is reported with the
// whole budget) and fixed addresses, which CUDA graphs capture.
class PoolLayout {
 public:
  // Offsets are multiples of `alignment` at least (a power of two).
  static constexpr uint64_t kDefaultAlignment = 256;

  // Reserves `bytes` (zero is allowed: the region is empty) at an offset that
  // is a multiple of `alignment` (a power of two; the default alignment at
  // least); returns the offset. An alignment that is not a power of two, or
  // a total that overflows 64 bits, is an error naming `name`.
  absl::StatusOr<uint64_t> Reserve(absl::string_view name, uint64_t bytes,
                                   uint64_t alignment = kDefaultAlignment);

  // Bytes the allocation needs: the end of the last region.
  uint64_t total_bytes() const { return end_; }

  // "weights 1.2 MiB, arena 3.0 MiB, ...", consecutive regions of one name
  // summed: for out-of-memory messages.
  std::string Describe() const;

 private:
  struct Region {
    std::string name;
    uint64_t offset, bytes;
  };
  std::vector<Region> regions_;
  uint64_t end_ = 0;
};

}  // namespace kvjit::cuda

#endif  // KVJIT_RUNTIME_CUDA_POOLLAYOUT_H_
