#include "runtime/kv/BlockPool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::kv {

BlockPool::BlockPool(int32_t num_blocks)
    : reference_counts_(std::max(num_blocks, 0), 0),
      cacheable_(reference_counts_.size(), false),
      evictable_position_(reference_counts_.size()) {
  free_blocks_.reserve(reference_counts_.size());
  for (BlockId block = this->num_blocks() - 1; block >= 0; --block) free_blocks_.push_back(block);
}

absl::StatusOr<std::vector<BlockId>> BlockPool::Allocate(int32_t count) {
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("cannot allocate ", count, " KV blocks"));
  if (count > num_free()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("wanted ", count, " KV blocks, ", num_free(), " of ", num_blocks(), " are free"));
  }
  const int32_t blank = std::min(count, static_cast<int32_t>(free_blocks_.size()));
  std::vector<BlockId> blocks(free_blocks_.end() - blank, free_blocks_.end());
  std::reverse(blocks.begin(), blocks.end());
  free_blocks_.resize(free_blocks_.size() - blank);
  while (static_cast<int32_t>(blocks.size()) < count) {
    const BlockId evicted = evictable_blocks_.front();
    evictable_blocks_.pop_front();
    cacheable_[evicted] = false;
    blocks.push_back(evicted);
  }
  for (BlockId block : blocks) reference_counts_[block] = 1;
  peak_in_use_ = std::max(peak_in_use_, num_in_use());
  return blocks;
}

absl::Status BlockPool::CheckInUse(BlockId block, const char* operation) const {
  if (block < 0 || block >= num_blocks()) {
    return absl::OutOfRangeError(
        absl::StrCat("cannot ", operation, " KV block ", block, ": the pool has blocks 0..", num_blocks() - 1));
  }
  if (reference_counts_[block] == 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot ", operation, " KV block ", block, ": it is free"));
  }
  return absl::OkStatus();
}

absl::Status BlockPool::AddReference(BlockId block) {
  KVJIT_RETURN_IF_ERROR(CheckInUse(block, "add a reference to"));
  if (++reference_counts_[block] == 2) {
    peak_shared_ = std::max(peak_shared_, ++num_shared_);
  }
  return absl::OkStatus();
}

absl::Status BlockPool::Release(BlockId block) {
  KVJIT_RETURN_IF_ERROR(CheckInUse(block, "release"));
  const int32_t remaining = --reference_counts_[block];
  if (remaining == 1) --num_shared_;
  if (remaining == 0) {
    if (cacheable_[block]) {
      evictable_position_[block] = evictable_blocks_.insert(evictable_blocks_.end(), block);
    } else {
      free_blocks_.push_back(block);
    }
  }
  return absl::OkStatus();
}

absl::Status BlockPool::MarkCacheable(BlockId block) {
  KVJIT_RETURN_IF_ERROR(CheckInUse(block, "mark cacheable"));
  cacheable_[block] = true;
  return absl::OkStatus();
}

bool BlockPool::IsEvictable(BlockId block) const {
  return block >= 0 && block < num_blocks() && reference_counts_[block] == 0 && cacheable_[block];
}

absl::Status BlockPool::Revive(BlockId block) {
  if (!IsEvictable(block)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot revive KV block ", block, ": it is not a cached block held by no one"));
  }
  evictable_blocks_.erase(evictable_position_[block]);
  reference_counts_[block] = 1;
  peak_in_use_ = std::max(peak_in_use_, num_in_use());
  return absl::OkStatus();
}

}  // namespace kvjit::kv
