#include "runtime/kv/BlockPool.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::kv {

BlockPool::BlockPool(int32_t num_blocks) : reference_counts_(std::max(num_blocks, 0), 0) {
  free_blocks_.reserve(reference_counts_.size());
  for (BlockId block = this->num_blocks() - 1; block >= 0; --block) free_blocks_.push_back(block);
}

absl::StatusOr<std::vector<BlockId>> BlockPool::Allocate(int32_t count) {
  if (count < 0) return absl::InvalidArgumentError(absl::StrCat("cannot allocate ", count, " KV blocks"));
  if (count > num_free()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("wanted ", count, " KV blocks, ", num_free(), " of ", num_blocks(), " are free"));
  }
  std::vector<BlockId> blocks(free_blocks_.end() - count, free_blocks_.end());
  std::reverse(blocks.begin(), blocks.end());
  free_blocks_.resize(free_blocks_.size() - count);
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
  if (++reference_counts_[block] == 2) ++num_shared_;
  return absl::OkStatus();
}

absl::Status BlockPool::Release(BlockId block) {
  KVJIT_RETURN_IF_ERROR(CheckInUse(block, "release"));
  const int32_t remaining = --reference_counts_[block];
  if (remaining == 1) --num_shared_;
  if (remaining == 0) free_blocks_.push_back(block);
  return absl::OkStatus();
}

}  // namespace kvjit::kv
