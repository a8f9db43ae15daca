#ifndef KVJIT_RUNTIME_KV_KVBLOCKMANAGER_H_
#define KVJIT_RUNTIME_KV_KVBLOCKMANAGER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/kv/BlockPool.h"

namespace kvjit::kv {

// A request's sequence (one per request, one per beam or parallel sample).
using SequenceId = int64_t;

// Where a sequence's tokens live: token i is in blocks[i / block_size] at
// offset i % block_size.
struct BlockTable {
  std::vector<BlockId> blocks;
  int64_t num_tokens = 0;
};

// A block the runtime must copy, whole, before the step's kernels write the
// cache: copy-on-write gave a sequence a private copy of a shared block.
struct BlockCopy {
  BlockId source;
  BlockId destination;
  bool operator==(const BlockCopy& other) const {
    return source == other.source && destination == other.destination;
  }
};

struct KvBlockCounters {
  int32_t blocks_in_use = 0;
  int32_t peak_blocks_in_use = 0;
  // Blocks held by more than one sequence right now.
  int32_t blocks_shared = 0;
  // Copy-on-write copies since the manager was created.
  int64_t blocks_copied = 0;
};

// How many blocks of `block_bytes` fit in `budget_bytes` (rounded down); an
// InvalidArgument error for a block size that is not positive or a negative
// budget.
absl::StatusOr<int64_t> BlocksForBudget(int64_t budget_bytes, int64_t block_bytes);

// The paged KV cache's bookkeeping (vLLM's block manager): a pool of
// `num_blocks` blocks of `block_size` token slots, and each sequence's block
// table. Sequences forked from one another share blocks until one of them
// writes into a shared, partly filled block, which it then copies.
class KvBlockManager {
 public:
  // num_blocks and block_size must be positive, and every slot id must fit
  // the step function's i32 slot mapping.
  static absl::StatusOr<KvBlockManager> Create(int32_t num_blocks, int32_t block_size);

  // Makes room for `new_tokens` more tokens at the end of `sequence` and
  // counts them in its table, taking blocks from the pool as needed; a
  // sequence comes into being at its first Reserve. All or nothing: when the
  // pool cannot hold them, a ResourceExhausted error names the sequence, the
  // tokens and blocks needed and the blocks free, and nothing changes.
  // Appending to a shared, partly filled last block queues a BlockCopy.
  absl::Status Reserve(SequenceId sequence, int64_t new_tokens);

  // The blocks Reserve(sequence, new_tokens) would take from the pool (0 for
  // an unknown sequence and no tokens), so a scheduler can plan a step
  // without trying it.
  absl::StatusOr<int64_t> BlocksNeeded(SequenceId sequence, int64_t new_tokens) const;

  // The cache slot of `position` in `sequence`: block * block_size + offset.
  // An OutOfRange error names the sequence when the position has not been
  // reserved.
  absl::StatusOr<int32_t> SlotFor(SequenceId sequence, int64_t position) const;

  // Drops the sequence and its references to its blocks; blocks no other
  // sequence holds return to the pool.
  absl::Status Free(SequenceId sequence);

  // Makes `child` a sequence with the same tokens as `parent`, sharing every
  // block (beam search, parallel samples). The child must not exist yet.
  absl::Status Fork(SequenceId parent, SequenceId child);

  // The copies queued by Reserve since the last call, in the order they must
  // run (a later copy may read a block an earlier one writes). Taking them
  // clears the queue.
  std::vector<BlockCopy> TakePendingCopies();

  // Null when the sequence does not exist; valid until the next Reserve,
  // Fork or Free.
  const BlockTable* FindSequence(SequenceId sequence) const;

  KvBlockCounters counters() const;
  int32_t num_free_blocks() const { return pool_.num_free(); }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t block_size() const { return block_size_; }
  int64_t num_sequences() const { return static_cast<int64_t>(tables_.size()); }
  // A block's number of holders (0 when free); for tests and diagnostics.
  int32_t ReferenceCount(BlockId block) const { return pool_.ReferenceCount(block); }

 private:
  KvBlockManager(int32_t num_blocks, int32_t block_size) : pool_(num_blocks), block_size_(block_size) {}

  // Blocks Reserve takes for `new_tokens` more tokens after `table`,
  // counting the private copy of a shared, partly filled last block.
  int64_t BlocksNeededAfter(const BlockTable& table, int64_t new_tokens) const;
  bool MustCopyLastBlock(const BlockTable& table, int64_t new_tokens) const;

  BlockPool pool_;
  int32_t block_size_;
  absl::flat_hash_map<SequenceId, BlockTable> tables_;
  std::vector<BlockCopy> pending_copies_;
  int64_t blocks_copied_ = 0;
};

}  // namespace kvjit::kv

#endif  // KVJIT_RUNTIME_KV_KVBLOCKMANAGER_H_
