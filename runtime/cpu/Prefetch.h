#ifndef KVJIT_RUNTIME_CPU_PREFETCH_H_
#define KVJIT_RUNTIME_CPU_PREFETCH_H_

#include <algorithm>
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

// PrefetchLinesToL2 of `rows` ranges of `bytes` each, `stride` apart from
// `p` (none where either is not positive), spread over `steps` calls of
// Step(): a GEMM asks for the part of its
// rows it takes next a few lines between micro-kernel calls. Asked for all
// at once (PrefetchLines of a whole next row group, 32 KiB for eight rows of
// 2048 f16 columns), the requests stalled: the prefetch loop took a quarter
// of the f16 GEMM's time outside its micro-kernel.
class SpreadPrefetch {
 public:
  SpreadPrefetch(const uint8_t* p, int64_t stride, int64_t rows, int64_t bytes, int64_t steps)
      : p_(p), stride_(stride), rows_(bytes > 0 && rows > 0 ? rows : 0), bytes_(bytes),
        lines_per_step_(steps > 0 ? (rows_ * (bytes_ / 64 + 2) + steps - 1) / steps : 0) {
    StartRow();
  }

  void Step() {
    for (int64_t i = 0; i < lines_per_step_ && row_ < rows_; ++i) {
      __builtin_prefetch(line_, 0, 2);
      line_ += 64;
      if (line_ >= row_end_) {
        ++row_;
        StartRow();
      }
    }
  }

 private:
  // The lines of row `row_`: from the one holding its first byte to the one
  // holding its last.
  void StartRow() {
    const uint8_t* begin = p_ + row_ * stride_;
    line_ = begin - (reinterpret_cast<uintptr_t>(begin) & 63);
    row_end_ = begin + bytes_;
  }

  const uint8_t* p_;
  int64_t stride_;
  int64_t rows_;
  int64_t bytes_;
  int64_t lines_per_step_;
  int64_t row_ = 0;
  const uint8_t* line_ = nullptr;
  const uint8_t* row_end_ = nullptr;
};

// The SpreadPrefetch of a matrix's rows [next, next + rows) in GGUF's layout
// (one range of whole rows), none at or past `row_end`: the rows a GEMM takes
// after the ones at hand.
inline SpreadPrefetch SpreadPrefetchOfRows(const uint8_t* weights, int64_t row_bytes, int64_t next, int64_t rows,
                                           int64_t row_end, int64_t steps) {
  return SpreadPrefetch(weights + next * row_bytes, 0, 1, std::min(rows, row_end - next) * row_bytes, steps);
}

}  // namespace kvjit::cpu::internal

#endif  // KVJIT_RUNTIME_CPU_PREFETCH_H_
