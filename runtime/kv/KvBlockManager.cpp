#include "runtime/kv/KvBlockManager.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::kv {
namespace {

// The hash a block's tokens chain onto when no block comes before them.
constexpr uint64_t kEmptyPrefixHash = 0x6b766a6974707265;  // "kvjitpre"

// splitmix64's finalizer: every input bit reaches every output bit.
uint64_t Mix(uint64_t value) {
  value ^= value >> 30;
  value *= 0xbf58476d1ce4e5b9;
  value ^= value >> 27;
  value *= 0x94d049bb133111eb;
  return value ^ (value >> 31);
}

uint64_t ChainedBlockHash(uint64_t prefix_hash, absl::Span<const int32_t> tokens) {
  uint64_t hash = Mix(prefix_hash);
  for (int32_t token : tokens) hash = Mix(hash ^ static_cast<uint32_t>(token));
  return hash;
}

}  // namespace

absl::StatusOr<int64_t> BlocksForBudget(int64_t budget_bytes, int64_t block_bytes) {
  if (block_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("a KV block of ", block_bytes, " bytes is not possible"));
  }
  if (budget_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("a KV memory budget of ", budget_bytes, " bytes is not possible"));
  }
  return budget_bytes / block_bytes;
}

int64_t BlocksForForkedSequences(int64_t prompt_tokens, int64_t new_tokens, int64_t sequences,
                                 int64_t block_size) {
  const int64_t shared_prompt_blocks = prompt_tokens / block_size;
  const int64_t cached_tokens = prompt_tokens + std::max<int64_t>(new_tokens, 1) - 1;
  const int64_t blocks_per_sequence =
      (cached_tokens + block_size - 1) / block_size - shared_prompt_blocks;
  const int64_t writing_sequences = new_tokens > 1 ? sequences : 1;
  return shared_prompt_blocks + writing_sequences * blocks_per_sequence;
}

int64_t BlocksForWindowedSequence(int64_t prompt_tokens, int64_t tokens_per_step, int64_t window,
                                  int64_t block_size) {
  // The blocks from the one holding position `begin` to the one holding
  // end - 1: released blocks are whole ones.
  auto spanned = [&](int64_t begin, int64_t end) {
    return (end + block_size - 1) / block_size - begin / block_size;
  };
  // A step at position n holds the step's tokens and what the release after
  // the step before left: positions from n - window + 1 on.
  int64_t most = 0;
  for (int64_t n = 0; n < prompt_tokens; n += tokens_per_step) {
    const int64_t count = std::min(tokens_per_step, prompt_tokens - n);
    most = std::max(most, spanned(std::max<int64_t>(0, n - window + 1), n + count));
  }
  // A new token and the window - 1 positions before it, at their worst
  // alignment to the blocks.
  return std::max(most, (window + 2 * block_size - 2) / block_size);
}

absl::StatusOr<KvBlockManager> KvBlockManager::Create(int32_t num_blocks, int32_t block_size) {
  if (num_blocks <= 0 || block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("a KV pool needs at least one block of at least one token; got ",
                                                   num_blocks, " blocks of ", block_size, " tokens"));
  }
  if (int64_t{num_blocks} * block_size > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("a KV pool of ", num_blocks, " blocks of ", block_size,
                                                   " tokens has more slots than the step function's i32 slot ids "
                                                   "can number"));
  }
  return KvBlockManager(num_blocks, block_size);
}

bool KvBlockManager::MustCopyLastBlock(const BlockTable& table, int64_t new_tokens) const {
  return new_tokens > 0 && table.num_tokens % block_size_ != 0 && pool_.ReferenceCount(table.blocks.back()) > 1;
}

int64_t KvBlockManager::BlocksNeededAfter(const BlockTable& table, int64_t new_tokens) const {
  const int64_t room_in_last_block = static_cast<int64_t>(table.blocks.size()) * block_size_ - table.num_tokens;
  const int64_t overflow_tokens = std::max<int64_t>(new_tokens - room_in_last_block, 0);
  const int64_t new_blocks = overflow_tokens / block_size_ + (overflow_tokens % block_size_ != 0 ? 1 : 0);
  return new_blocks + (MustCopyLastBlock(table, new_tokens) ? 1 : 0);
}

absl::StatusOr<int64_t> KvBlockManager::BlocksNeeded(SequenceId sequence, int64_t new_tokens) const {
  if (new_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("sequence ", sequence, ": cannot reserve ", new_tokens, " tokens"));
  }
  const BlockTable* table = FindSequence(sequence);
  return BlocksNeededAfter(table != nullptr ? *table : BlockTable{}, new_tokens);
}

absl::Status KvBlockManager::Reserve(SequenceId sequence, int64_t new_tokens) {
  KVJIT_ASSIGN_OR_RETURN(const int64_t blocks_needed, BlocksNeeded(sequence, new_tokens));
  if (blocks_needed > pool_.num_free()) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "sequence ", sequence, ": the KV pool cannot hold ", new_tokens, " more tokens: they need ", blocks_needed,
        " blocks of ", block_size_, " tokens, and ", pool_.num_free(), " of ", pool_.num_blocks(), " blocks are free"));
  }
  // Allocated before the table is looked up, so that a failed first Reserve
  // leaves no empty sequence behind.
  KVJIT_ASSIGN_OR_RETURN(const std::vector<BlockId> new_blocks,
                         pool_.Allocate(static_cast<int32_t>(blocks_needed)));
  for (BlockId block : new_blocks) ForgetContents(block);
  BlockTable& table = tables_[sequence];
  auto next_block = new_blocks.begin();
  if (MustCopyLastBlock(table, new_tokens)) {
    const BlockId shared_block = table.blocks.back();
    pending_copies_.push_back({shared_block, *next_block});
    ++blocks_copied_;
    table.blocks.back() = *next_block++;
    // Never the last reference: the block was shared.
    KVJIT_RETURN_IF_ERROR(pool_.Release(shared_block));
  }
  table.blocks.insert(table.blocks.end(), next_block, new_blocks.end());
  table.num_tokens += new_tokens;
  return absl::OkStatus();
}

absl::StatusOr<int32_t> KvBlockManager::SlotFor(SequenceId sequence, int64_t position) const {
  const BlockTable* table = FindSequence(sequence);
  if (table == nullptr) return absl::NotFoundError(absl::StrCat("no KV sequence ", sequence));
  if (position < 0 || position >= table->num_tokens) {
    return absl::OutOfRangeError(absl::StrCat("sequence ", sequence, ": position ", position,
                                              " is not reserved (the sequence holds ", table->num_tokens,
                                              " tokens)"));
  }
  const BlockId block = table->blocks[position / block_size_];
  if (block == kReleasedBlock) {
    return absl::OutOfRangeError(absl::StrCat("sequence ", sequence, ": position ", position,
                                              " is in a block released behind the attention window"));
  }
  return static_cast<int32_t>(int64_t{block} * block_size_ + position % block_size_);
}

absl::Status KvBlockManager::Free(SequenceId sequence) {
  auto found = tables_.find(sequence);
  if (found == tables_.end()) return absl::NotFoundError(absl::StrCat("cannot free KV sequence ", sequence, ": no such sequence"));
  const BlockTable table = std::move(found->second);
  tables_.erase(found);
  // Last to first, so that a cached prefix's tail is evicted before its head.
  for (auto block = table.blocks.rbegin(); block != table.blocks.rend(); ++block) {
    if (*block != kReleasedBlock) KVJIT_RETURN_IF_ERROR(pool_.Release(*block));
  }
  DropCopiesIntoFreeBlocks();
  return absl::OkStatus();
}

void KvBlockManager::DropCopiesIntoFreeBlocks() {
  // A copy still queued into a block nobody holds now would write into
  // whatever sequence gets that block next.
  pending_copies_.erase(std::remove_if(pending_copies_.begin(), pending_copies_.end(),
                                       [&](const BlockCopy& copy) {
                                         return pool_.ReferenceCount(copy.destination) == 0;
                                       }),
                        pending_copies_.end());
}

absl::Status KvBlockManager::Truncate(SequenceId sequence, int64_t num_tokens) {
  auto found = tables_.find(sequence);
  if (found == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("cannot truncate KV sequence ", sequence, ": no such sequence"));
  }
  BlockTable& table = found->second;
  if (num_tokens < 0 || num_tokens > table.num_tokens) {
    return absl::OutOfRangeError(absl::StrCat("cannot truncate KV sequence ", sequence, " to ", num_tokens,
                                              " tokens: it holds ", table.num_tokens));
  }
  const int64_t fixed_tokens = std::max(table.num_hashed_blocks, table.num_released_blocks) * block_size_;
  if (num_tokens < fixed_tokens) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot truncate KV sequence ", sequence, " to ", num_tokens, " tokens: its first ", fixed_tokens,
        " are in blocks the prefix cache knows or the attention window released"));
  }
  const size_t kept_blocks = static_cast<size_t>((num_tokens + block_size_ - 1) / block_size_);
  // Last to first, as Free gives them back.
  while (table.blocks.size() > kept_blocks) {
    KVJIT_RETURN_IF_ERROR(pool_.Release(table.blocks.back()));
    table.blocks.pop_back();
  }
  table.num_tokens = num_tokens;
  DropCopiesIntoFreeBlocks();
  return absl::OkStatus();
}

absl::Status KvBlockManager::ReleaseBlocksBefore(SequenceId sequence, int64_t position) {
  auto found = tables_.find(sequence);
  if (found == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("cannot release blocks of KV sequence ", sequence, ": no such sequence"));
  }
  BlockTable& table = found->second;
  const int64_t whole_blocks = std::clamp<int64_t>(position, 0, table.num_tokens) / block_size_;
  for (int64_t index = table.num_released_blocks; index < whole_blocks; ++index) {
    const BlockId block = std::exchange(table.blocks[index], kReleasedBlock);
    KVJIT_RETURN_IF_ERROR(pool_.Release(block));
    if (pool_.ReferenceCount(block) == 0) ++window_released_blocks_;
  }
  table.num_released_blocks = std::max(table.num_released_blocks, whole_blocks);
  return absl::OkStatus();
}

absl::Status KvBlockManager::Fork(SequenceId parent, SequenceId child) {
  const BlockTable* parent_table = FindSequence(parent);
  if (parent_table == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot fork KV sequence ", parent, " into ", child, ": no such sequence"));
  }
  if (tables_.contains(child)) {
    return absl::AlreadyExistsError(
        absl::StrCat("cannot fork KV sequence ", parent, " into ", child, ": sequence ", child, " exists"));
  }
  for (BlockId block : parent_table->blocks) {
    if (block != kReleasedBlock) KVJIT_RETURN_IF_ERROR(pool_.AddReference(block));
  }
  // Copied before the insertion, which may move the parent's table.
  BlockTable child_table = *parent_table;
  tables_.emplace(child, std::move(child_table));
  return absl::OkStatus();
}

void KvBlockManager::ForgetContents(BlockId block) {
  std::optional<uint64_t>& hash = block_hashes_[block];
  if (!hash.has_value()) return;
  auto cached = cached_blocks_.find(*hash);
  if (cached != cached_blocks_.end() && cached->second == block) {
    cached_blocks_.erase(cached);
    ++blocks_evicted_;
  }
  hash.reset();
}

bool KvBlockManager::BlockHolds(BlockId block, absl::Span<const int32_t> tokens) const {
  return std::equal(tokens.begin(), tokens.end(),
                    block_tokens_.begin() + static_cast<size_t>(block) * block_size_);
}

std::vector<BlockId> KvBlockManager::FindCachedBlocks(absl::Span<const int32_t> tokens) const {
  std::vector<BlockId> blocks;
  uint64_t prefix_hash = kEmptyPrefixHash;
  for (size_t start = 0; start + block_size_ <= tokens.size(); start += block_size_) {
    const absl::Span<const int32_t> block_tokens = tokens.subspan(start, block_size_);
    prefix_hash = ChainedBlockHash(prefix_hash, block_tokens);
    auto cached = cached_blocks_.find(prefix_hash);
    if (cached == cached_blocks_.end() || !BlockHolds(cached->second, block_tokens)) break;
    blocks.push_back(cached->second);
  }
  return blocks;
}

PrefixMatch KvBlockManager::MatchPrefix(absl::Span<const int32_t> tokens) const {
  const std::vector<BlockId> blocks = FindCachedBlocks(tokens);
  PrefixMatch match;
  match.num_tokens = static_cast<int64_t>(blocks.size()) * block_size_;
  match.num_evictable_blocks =
      std::count_if(blocks.begin(), blocks.end(), [&](BlockId block) { return pool_.IsEvictable(block); });
  return match;
}

absl::StatusOr<int64_t> KvBlockManager::AdoptCachedPrefix(SequenceId sequence,
                                                          absl::Span<const int32_t> tokens) {
  if (tables_.contains(sequence)) {
    return absl::AlreadyExistsError(
        absl::StrCat("sequence ", sequence, " exists: only a new sequence can adopt a cached prefix"));
  }
  const std::vector<BlockId> blocks = FindCachedBlocks(tokens);
  if (blocks.empty()) return 0;
  for (BlockId block : blocks) {
    KVJIT_RETURN_IF_ERROR(pool_.IsEvictable(block) ? pool_.Revive(block) : pool_.AddReference(block));
  }
  BlockTable& table = tables_[sequence];
  table.blocks = blocks;
  table.num_tokens = static_cast<int64_t>(blocks.size()) * block_size_;
  table.num_hashed_blocks = static_cast<int64_t>(blocks.size());
  prefix_hit_blocks_ += static_cast<int64_t>(blocks.size());
  return table.num_tokens;
}

absl::Status KvBlockManager::CacheFullBlocks(SequenceId sequence, absl::Span<const int32_t> tokens) {
  auto found = tables_.find(sequence);
  if (found == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("cannot cache the blocks of KV sequence ", sequence, ": no such sequence"));
  }
  BlockTable& table = found->second;
  if (static_cast<int64_t>(tokens.size()) > table.num_tokens) {
    return absl::OutOfRangeError(absl::StrCat("sequence ", sequence, ": cannot cache ", tokens.size(),
                                              " tokens, it holds ", table.num_tokens));
  }
  const int64_t full_blocks = static_cast<int64_t>(tokens.size()) / block_size_;
  int64_t index = table.num_hashed_blocks;
  for (; index < full_blocks; ++index) {
    const BlockId block = table.blocks[index];
    if (block == kReleasedBlock || (index > 0 && table.blocks[index - 1] == kReleasedBlock)) break;
    const absl::Span<const int32_t> block_tokens = tokens.subspan(index * block_size_, block_size_);
    const uint64_t prefix_hash =
        index == 0 ? kEmptyPrefixHash : *block_hashes_[table.blocks[index - 1]];
    const uint64_t hash = ChainedBlockHash(prefix_hash, block_tokens);
    if (!block_hashes_[block].has_value()) {
      block_hashes_[block] = hash;
      std::copy(block_tokens.begin(), block_tokens.end(),
                block_tokens_.begin() + static_cast<size_t>(block) * block_size_);
    }
    // A block computed twice (two sequences prefilling the same prompt at
    // once) is cached once; the other copy is freed as usual.
    if (cached_blocks_.try_emplace(hash, block).second) KVJIT_RETURN_IF_ERROR(pool_.MarkCacheable(block));
  }
  table.num_hashed_blocks = std::max(table.num_hashed_blocks, index);
  return absl::OkStatus();
}

std::vector<BlockCopy> KvBlockManager::TakePendingCopies() { return std::exchange(pending_copies_, {}); }

const BlockTable* KvBlockManager::FindSequence(SequenceId sequence) const {
  auto found = tables_.find(sequence);
  return found != tables_.end() ? &found->second : nullptr;
}

GroupBlockUsage KvBlockManager::UsageOf(absl::Span<const SequenceId> sequences) const {
  absl::flat_hash_map<BlockId, int32_t> holders;
  GroupBlockUsage usage;
  for (SequenceId sequence : sequences) {
    const BlockTable* table = FindSequence(sequence);
    if (table == nullptr) continue;
    usage.total += static_cast<int32_t>(table->blocks.size() - table->num_released_blocks);
    for (BlockId block : table->blocks) {
      if (block != kReleasedBlock) ++holders[block];
    }
  }
  usage.distinct = static_cast<int32_t>(holders.size());
  for (const auto& [block, count] : holders) usage.shared += count > 1 ? 1 : 0;
  return usage;
}

KvBlockCounters KvBlockManager::counters() const {
  KvBlockCounters counters;
  counters.blocks_in_use = pool_.num_in_use();
  counters.peak_blocks_in_use = pool_.peak_in_use();
  counters.blocks_shared = pool_.num_shared();
  counters.peak_blocks_shared = pool_.peak_shared();
  counters.blocks_copied = blocks_copied_;
  counters.blocks_cached = pool_.num_evictable();
  counters.blocks_evicted = blocks_evicted_;
  counters.prefix_hit_blocks = prefix_hit_blocks_;
  counters.prefix_hit_tokens = prefix_hit_blocks_ * block_size_;
  counters.window_released_blocks = window_released_blocks_;
  return counters;
}

}  // namespace kvjit::kv
