#ifndef KVJIT_RUNTIME_CPU_GEMVROWWALK_H_
#define KVJIT_RUNTIME_CPU_GEMVROWWALK_H_

#include <cstdint>

namespace kvjit::cpu::internal {
namespace {

// A decode GEMV's walk over a thread's rows: `four(first, ahead, r)` for rows
// r..r + 3 (starting at `first`), the last one to three rows by `one(row, r)`.
// `ahead` is where the four rows eight further on start, for the kernel to ask
// for a block at a time while it reads these (the kernels' prefetch, Prefetch.h:
// the hardware prefetchers alone keep too few lines in flight for a stream
// that every weight goes through once); past the last rows there is nothing
// to ask for, and the rows at hand stand in.
//
// In an anonymous namespace, as KQuantGemmParts.h's code is: each kernel's
// translation unit, compiled for its ISA, keeps its own copy.
template <class Four, class One>
inline void WalkRowsByFours(const uint8_t* weights, int64_t row_bytes, int64_t rows, Four four, One one) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) {
    const uint8_t* first = weights + r * row_bytes;
    four(first, r + 12 <= rows ? first + 8 * row_bytes : first, r);
  }
  for (; r < rows; ++r) one(weights + r * row_bytes, r);
}

}  // namespace
}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_GEMVROWWALK_H_
