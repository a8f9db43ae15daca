#ifndef KVJIT_RUNTIME_KV_BLOCKPOOL_H_
#define KVJIT_RUNTIME_KV_BLOCKPOOL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kvjit::kv {

// Index of a block in the paged KV pool; the step function's block tables
// carry it as i32.
using BlockId = int32_t;

// The reference counts of a fixed set of KV blocks. A block is free at count
// zero; every holder (a sequence's block table, later a prefix cache) owns one
// reference, so a block shared by forked sequences is freed only when its
// last holder lets go. The pool tracks ids only: the memory behind them
// belongs to the device.
class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  // Takes `count` free blocks, each with a count of one, or none at all: a
  // ResourceExhausted error saying how many were wanted and how many are free.
  absl::StatusOr<std::vector<BlockId>> Allocate(int32_t count);

  // A block that is free cannot gain or lose references: that is a
  // FailedPrecondition error naming the block (a bookkeeping bug upstream),
  // and the counts stay as they were.
  absl::Status AddReference(BlockId block);
  absl::Status Release(BlockId block);

  int32_t ReferenceCount(BlockId block) const { return reference_counts_[block]; }
  int32_t num_blocks() const { return static_cast<int32_t>(reference_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_blocks_.size()); }
  int32_t num_in_use() const { return num_blocks() - num_free(); }
  int32_t peak_in_use() const { return peak_in_use_; }
  // Blocks held by more than one reference right now.
  int32_t num_shared() const { return num_shared_; }

 private:
  absl::Status CheckInUse(BlockId block, const char* operation) const;

  std::vector<int32_t> reference_counts_;
  // A stack: the block freed last is reused first. A fresh pool's stack hands
  // out 0, 1, 2, ..., so block tables in tests and dumps read predictably.
  std::vector<BlockId> free_blocks_;
  int32_t peak_in_use_ = 0;
  int32_t num_shared_ = 0;
};

}  // namespace kvjit::kv

#endif  // KVJIT_RUNTIME_KV_BLOCKPOOL_H_
