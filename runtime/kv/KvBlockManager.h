#ifndef KVJIT_RUNTIME_KV_KVBLOCKMANAGER_H_
#define KVJIT_RUNTIME_KV_KVBLOCKMANAGER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/kv/BlockPool.h"

namespace kvjit::kv {

// A request's sequence (one per request, one per beam or parallel sample).
using SequenceId = int64_t;

// A block table's entry for a block ReleaseBlocksBefore gave back.
inline constexpr BlockId kReleasedBlock = -1;

// Where a sequence's tokens live: token i is in blocks[i / block_size] at
// offset i % block_size.
struct BlockTable {
  std::vector<BlockId> blocks;
  int64_t num_tokens = 0;
  // Leading blocks the prefix cache has hashed (see CacheFullBlocks).
  int64_t num_hashed_blocks = 0;
  // Leading blocks given back by ReleaseBlocksBefore; their entries are
  // kReleasedBlock.
  int64_t num_released_blocks = 0;
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
  // Blocks some sequence holds; cached blocks no sequence holds count as free.
  int32_t blocks_in_use = 0;
  int32_t peak_blocks_in_use = 0;
  // Blocks held by more than one sequence right now, and at most at once.
  int32_t blocks_shared = 0;
  int32_t peak_blocks_shared = 0;
  // Copy-on-write copies since the manager was created.
  int64_t blocks_copied = 0;
  // Blocks no sequence holds whose contents the prefix cache keeps until
  // the pool needs them.
  int32_t blocks_cached = 0;
  // Cached blocks given out again for other contents since creation.
  int64_t blocks_evicted = 0;
  // Prefix-cache hits since creation: blocks a new sequence took from the
  // cache instead of computing them, and the tokens in them.
  int64_t prefix_hit_blocks = 0;
  int64_t prefix_hit_tokens = 0;
  // Blocks ReleaseBlocksBefore returned to the pool since creation (a
  // sliding attention window moved past them); a shared block counts once,
  // when its last holder lets it go.
  int64_t window_released_blocks = 0;
};

// The blocks a group of sequences holds (a request's samples, a search's
// beams), for memory accounting.
struct GroupBlockUsage {
  int32_t distinct = 0;  // each block counted once
  int32_t total = 0;     // the sum of the tables' lengths: the cost without sharing
  int32_t shared = 0;    // blocks more than one of the group holds
};

// What the prefix cache holds of a sequence's leading tokens.
struct PrefixMatch {
  // Tokens in the matched whole blocks (a multiple of the block size).
  int64_t num_tokens = 0;
  // Matched blocks that no sequence holds: adopting them takes them out of
  // the free count.
  int64_t num_evictable_blocks = 0;
};

// How many blocks of `block_bytes` fit in `budget_bytes` (rounded down); an
// InvalidArgument error for a block size that is not positive or a negative
// budget.
absl::StatusOr<int64_t> BlocksForBudget(int64_t budget_bytes, int64_t block_bytes);

// The most blocks of `block_size` tokens that `sequences` sequences forked
// from one prompt of `prompt_tokens` may hold while each generates
// `new_tokens`: the prompt's whole blocks once, shared, and each sequence's
// own copy of every later block (the last new token is never written to the
// cache). One sequence: the blocks of its prompt and new tokens.
int64_t BlocksForForkedSequences(int64_t prompt_tokens, int64_t new_tokens, int64_t sequences,
                                 int64_t block_size);

// The most blocks of `block_size` tokens one sequence holds at once when
// its `prompt_tokens` go in steps of at most `tokens_per_step`, its new
// tokens one per step, and after each step the blocks wholly behind a
// sliding attention window of `window` positions are released
// (ReleaseBehindWindow): each step's tokens beside the window - 1
// positions before them, in blocks that need not start where those do.
// With few new tokens the run may never reach this; the caller takes the
// smaller of this and what the run fills.
int64_t BlocksForWindowedSequence(int64_t prompt_tokens, int64_t tokens_per_step, int64_t window,
                                  int64_t block_size);

// The paged KV cache's bookkeeping (vLLM's block manager): a pool of
// `num_blocks` blocks of `block_size` token slots, and each sequence's block
// table. Sequences forked from one another share blocks until one of them
// writes into a shared, partly filled block, which it then copies.
//
// Prefix caching (vLLM's automatic prefix caching), used by callers that
// report tokens through CacheFullBlocks: each whole block whose keys and
// values are computed is known by a hash of its tokens chained with the hash
// of the blocks before it, so a block stands for its whole prefix. A new
// sequence whose leading tokens match cached blocks adopts them
// (AdoptCachedPrefix) and computes only the rest. Cached blocks outlive their
// sequences: once no sequence holds one it stays, counted as free, until the
// pool has no blank block left and evicts it, least recently released first;
// a freed sequence releases its blocks last to first, so a prefix's tail is
// evicted before its head. Blocks are matched by the 64-bit chained hash and
// the block's own tokens, compared exactly.
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
  // sequence holds return to the pool (cached ones stay findable until
  // evicted), and queued copies into them are dropped.
  absl::Status Free(SequenceId sequence);

  // Cuts `sequence` back to its first `num_tokens` tokens (speculative
  // decoding's rejected drafts): blocks wholly past them are given back,
  // one reference each, and a shared last block left partly filled is
  // copied on the next Reserve as any shared block is. Tokens the prefix
  // cache knows (CacheFullBlocks) or that lie in blocks released behind
  // the attention window cannot be cut: that, a count past the sequence's
  // length or a negative one is an error naming the sequence.
  absl::Status Truncate(SequenceId sequence, int64_t num_tokens);

  // Gives back `sequence`'s blocks that lie wholly before `position` (no
  // later step reads them: the model's sliding attention window has moved
  // past them), one reference each, so that a block other sequences still
  // hold stays theirs. Positions past the sequence's tokens count as its
  // end. Their table entries become kReleasedBlock; the sequence keeps its
  // length, and SlotFor refuses positions in them. A NotFound error for an
  // unknown sequence.
  absl::Status ReleaseBlocksBefore(SequenceId sequence, int64_t position);

  // Makes `child` a sequence with the same tokens as `parent`, sharing every
  // block (beam search, parallel samples). The child must not exist yet.
  absl::Status Fork(SequenceId parent, SequenceId child);

  // The prefix cache's match for a new sequence whose leading tokens are
  // `tokens`: the longest run of whole blocks of them that are cached.
  PrefixMatch MatchPrefix(absl::Span<const int32_t> tokens) const;

  // Starts `sequence`, which must not exist, with the cached blocks
  // MatchPrefix(tokens) finds, and returns the tokens they hold (0, and no
  // sequence, when none match). The caller computes the tokens after them.
  absl::StatusOr<int64_t> AdoptCachedPrefix(SequenceId sequence, absl::Span<const int32_t> tokens);

  // Tells the prefix cache that `sequence`'s leading tokens are `tokens` and
  // that their keys and values are in the cache: every whole block among
  // them becomes findable by MatchPrefix, up to the first that was released
  // or follows a released one (its chained hash is gone with its
  // predecessor). `tokens` must not run past the
  // sequence's reserved tokens.
  absl::Status CacheFullBlocks(SequenceId sequence, absl::Span<const int32_t> tokens);

  // The copies queued by Reserve since the last call, in the order they must
  // run (a later copy may read a block an earlier one writes). Taking them
  // clears the queue.
  std::vector<BlockCopy> TakePendingCopies();

  // Null when the sequence does not exist; valid until the next Reserve,
  // Fork, AdoptCachedPrefix or Free (each may move the tables).
  const BlockTable* FindSequence(SequenceId sequence) const;

  // What `sequences` hold together; sequences that do not exist hold nothing.
  GroupBlockUsage UsageOf(absl::Span<const SequenceId> sequences) const;

  KvBlockCounters counters() const;
  int32_t num_free_blocks() const { return pool_.num_free(); }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t block_size() const { return block_size_; }
  int64_t num_sequences() const { return static_cast<int64_t>(tables_.size()); }
  // A block's number of holders (0 when free); for tests and diagnostics.
  int32_t ReferenceCount(BlockId block) const { return pool_.ReferenceCount(block); }

 private:
  KvBlockManager(int32_t num_blocks, int32_t block_size)
      : pool_(num_blocks),
        block_size_(block_size),
        block_hashes_(num_blocks),
        block_tokens_(static_cast<size_t>(num_blocks) * block_size) {}

  // The cached blocks holding the leading whole blocks of `tokens`.
  std::vector<BlockId> FindCachedBlocks(absl::Span<const int32_t> tokens) const;
  bool BlockHolds(BlockId block, absl::Span<const int32_t> tokens) const;
  // Drops what the prefix cache knew of a block Allocate handed out anew.
  void ForgetContents(BlockId block);
  // Drops queued copies into blocks Free or Truncate gave back to the pool.
  void DropCopiesIntoFreeBlocks();

  // Blocks Reserve takes for `new_tokens` more tokens after `table`,
  // counting the private copy of a shared, partly filled last block.
  int64_t BlocksNeededAfter(const BlockTable& table, int64_t new_tokens) const;
  bool MustCopyLastBlock(const BlockTable& table, int64_t new_tokens) const;

  BlockPool pool_;
  int32_t block_size_;
  absl::flat_hash_map<SequenceId, BlockTable> tables_;
  std::vector<BlockCopy> pending_copies_;
  int64_t blocks_copied_ = 0;
  // Per block: the chained hash of its tokens once hashed, and the tokens.
  std::vector<std::optional<uint64_t>> block_hashes_;
  std::vector<int32_t> block_tokens_;
  // The block MatchPrefix finds for a chained hash.
  absl::flat_hash_map<uint64_t, BlockId> cached_blocks_;
  int64_t blocks_evicted_ = 0;
  int64_t prefix_hit_blocks_ = 0;
  int64_t window_released_blocks_ = 0;
};

}  // namespace kvjit::kv

#endif  // KVJIT_RUNTIME_KV_KVBLOCKMANAGER_H_
