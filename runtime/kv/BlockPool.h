#ifndef KVJIT_RUNTIME_KV_BLOCKPOOL_H_
#define KVJIT_RUNTIME_KV_BLOCKPOOL_H_

#include <cstdint>
#include <list>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace kvjit::kv {

// Index of a block in the paged KV pool; the step function's block tables
// carry it as i32.
using BlockId = int32_t;

// The reference counts of a fixed set of KV blocks. Every holder (a
// sequence's block table) owns one reference, so a block shared by forked
// sequences is freed only when its last holder lets go. A block marked
// cacheable (its contents are worth keeping: the prefix cache knows them)
// does not become blank at count zero but evictable: it still counts as free,
// yet Revive can take it back with its contents until Allocate, having run
// out of blank blocks, evicts it, least recently released first (vLLM's
// prefix cache). The pool tracks ids only: the memory behind them belongs to
// the device.
class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);

  // Takes `count` free blocks, each with a count of one, or none at all: a
  // ResourceExhausted error saying how many were wanted and how many are free.
  // Blank blocks go first, then evictable ones, which lose their cacheable
  // mark.
  absl::StatusOr<std::vector<BlockId>> Allocate(int32_t count);

  // Keeps the block's contents when its last reference goes (see above); the
  // block must be in use.
  absl::Status MarkCacheable(BlockId block);
  // Takes an evictable block back with a count of one; a FailedPrecondition
  // error for a block that is not evictable.
  absl::Status Revive(BlockId block);
  bool IsEvictable(BlockId block) const;

  // A block that is free cannot gain or lose references: that is a
  // FailedPrecondition error naming the block (a bookkeeping bug upstream),
  // and the counts stay as they were.
  absl::Status AddReference(BlockId block);
  absl::Status Release(BlockId block);

  int32_t ReferenceCount(BlockId block) const { return reference_counts_[block]; }
  int32_t num_blocks() const { return static_cast<int32_t>(reference_counts_.size()); }
  // Blank and evictable blocks: what Allocate can hand out.
  int32_t num_free() const {
    return static_cast<int32_t>(free_blocks_.size() + evictable_blocks_.size());
  }
  int32_t num_evictable() const { return static_cast<int32_t>(evictable_blocks_.size()); }
  int32_t num_in_use() const { return num_blocks() - num_free(); }
  int32_t peak_in_use() const { return peak_in_use_; }
  // Blocks held by more than one reference right now.
  int32_t num_shared() const { return num_shared_; }
  int32_t peak_shared() const { return peak_shared_; }

 private:
  absl::Status CheckInUse(BlockId block, const char* operation) const;

  std::vector<int32_t> reference_counts_;
  // A stack: the block freed last is reused first. A fresh pool's stack hands
  // out 0, 1, 2, ..., so block tables in tests and dumps read predictably.
  std::vector<BlockId> free_blocks_;
  std::vector<bool> cacheable_;
  // Released cacheable blocks, least recently released first, and where each
  // one sits in the list (for Revive).
  std::list<BlockId> evictable_blocks_;
  std::vector<std::list<BlockId>::iterator> evictable_position_;
  int32_t peak_in_use_ = 0;
  int32_t num_shared_ = 0;
  int32_t peak_shared_ = 0;
};

}  // namespace kvjit::kv

#endif  // KVJIT_RUNTIME_KV_BLOCKPOOL_H_
