#ifndef KVJIT_RUNTIME_CPU_PREFETCH_H_
#define KVJIT_RUNTIME_CPU_PREFETCH_H_

#include <cstdint>

namespace kvjit::cpu::internal {

// Asks for `bytes` from `p` on into the cache, a line at a time. Kernels that
// stream weights from memory ask for the next rows while they work on these:
// the hardware prefetchers alone keep too few lines in flight (they stop at
// page boundaries), and a kernel that waits on each block's first load runs
// at a fraction of the read bandwidth. Asking past the end of a mapping is
// harmless: a prefetch never faults.
inline void PrefetchLines(const uint8_t* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) __builtin_prefetch(p + line, 0, 3);
}

// PrefetchLines into L2 only (prefetcht1). A GEMV that asks, block by block,
// for the same block of rows some kilobytes ahead keeps enough lines in flight
// to read at the machine's bandwidth; asked into L1 (prefetcht0) the same
// requests ran at half of it on Zen 4, as each waited for an L1 miss buffer
// the kernel's own loads needed (docs/benchmarks.md, "Prefetching into L2").
inline void PrefetchLinesToL2(const uint8_t* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) __builtin_prefetch(p + line, 0, 2);
}

}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_PREFETCH_H_
