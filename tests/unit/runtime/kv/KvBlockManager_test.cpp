#include "runtime/kv/KvBlockManager.h"

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::kv {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

KvBlockManager MakeManager(int32_t num_blocks, int32_t block_size) {
  absl::StatusOr<KvBlockManager> manager = KvBlockManager::Create(num_blocks, block_size);
  EXPECT_TRUE(manager.ok()) << manager.status();
  return *std::move(manager);
}

std::vector<BlockId> BlocksOf(const KvBlockManager& manager, SequenceId sequence) {
  const BlockTable* table = manager.FindSequence(sequence);
  EXPECT_NE(table, nullptr) << "sequence " << sequence;
  return table != nullptr ? table->blocks : std::vector<BlockId>{};
}

int64_t TokensOf(const KvBlockManager& manager, SequenceId sequence) {
  const BlockTable* table = manager.FindSequence(sequence);
  EXPECT_NE(table, nullptr) << "sequence " << sequence;
  return table != nullptr ? table->num_tokens : -1;
}

TEST(BlocksForBudgetTest, RoundsDown) {
  EXPECT_EQ(*BlocksForBudget(1000, 100), 10);
  EXPECT_EQ(*BlocksForBudget(1099, 100), 10);
  EXPECT_EQ(*BlocksForBudget(99, 100), 0);
  // 2 × 22 layers × 4 KV heads × 64 dims × 16 tokens × 2 bytes.
  EXPECT_EQ(*BlocksForBudget(int64_t{8} << 30, 360448), 23831);
}

TEST(BlocksForBudgetTest, RejectsImpossibleSizes) {
  EXPECT_EQ(BlocksForBudget(1000, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BlocksForBudget(-1, 100).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BlocksForForkedSequencesTest, OneSequenceHoldsItsPromptAndNewTokens) {
  // 40 prompt tokens and 32 new ones, the last never cached: 71 tokens.
  EXPECT_EQ(BlocksForForkedSequences(40, 32, 1, 16), 5);
  EXPECT_EQ(BlocksForForkedSequences(48, 1, 1, 16), 3);
  EXPECT_EQ(BlocksForForkedSequences(1, 1, 1, 16), 1);
}

TEST(BlocksForForkedSequencesTest, ForksShareThePromptsWholeBlocksOnly) {
  // 2 whole prompt blocks shared; each of 4 sequences holds blocks 2..4 of
  // its own (the partly filled prompt block copied on its first write).
  EXPECT_EQ(BlocksForForkedSequences(40, 32, 4, 16), 2 + 4 * 3);
  // One new token is sampled from the prompt's logits: nothing is written.
  EXPECT_EQ(BlocksForForkedSequences(40, 1, 4, 16), 3);
}

TEST(KvBlockManagerTest, CreateRejectsEmptyOrOversizedPools) {
  EXPECT_EQ(KvBlockManager::Create(0, 16).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(KvBlockManager::Create(16, 0).status().code(), absl::StatusCode::kInvalidArgument);
  absl::Status too_many_slots = KvBlockManager::Create(1 << 27, 16).status();
  EXPECT_EQ(too_many_slots.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_many_slots.message(), HasSubstr("i32 slot ids"));
}

TEST(KvBlockManagerTest, ReserveAppendsBlocksOnlyWhenTheLastIsFull) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 5).ok());
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(0, 1));
  EXPECT_EQ(TokensOf(manager, 1), 5);

  ASSERT_TRUE(manager.Reserve(1, 3).ok());
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(0, 1));
  EXPECT_EQ(TokensOf(manager, 1), 8);

  ASSERT_TRUE(manager.Reserve(1, 1).ok());
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(0, 1, 2));
  EXPECT_EQ(TokensOf(manager, 1), 9);
  EXPECT_EQ(manager.counters().blocks_in_use, 3);
  EXPECT_EQ(manager.num_free_blocks(), 5);
}

TEST(KvBlockManagerTest, ReservingNothingCreatesAnEmptySequence) {
  KvBlockManager manager = MakeManager(2, 4);
  ASSERT_TRUE(manager.Reserve(3, 0).ok());
  EXPECT_THAT(BlocksOf(manager, 3), IsEmpty());
  EXPECT_EQ(manager.num_sequences(), 1);
  EXPECT_EQ(manager.num_free_blocks(), 2);
}

TEST(KvBlockManagerTest, NegativeTokenCountIsRejected) {
  KvBlockManager manager = MakeManager(2, 4);
  absl::Status status = manager.Reserve(3, -1);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("sequence 3"));
  EXPECT_EQ(manager.num_sequences(), 0);
}

TEST(KvBlockManagerTest, SlotIsBlockTimesBlockSizePlusOffset) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 4).ok());   // block 0
  ASSERT_TRUE(manager.Reserve(2, 4).ok());   // block 1
  ASSERT_TRUE(manager.Reserve(1, 3).ok());   // block 2
  EXPECT_EQ(*manager.SlotFor(1, 0), 0);
  EXPECT_EQ(*manager.SlotFor(1, 3), 3);
  EXPECT_EQ(*manager.SlotFor(1, 4), 2 * 4 + 0);
  EXPECT_EQ(*manager.SlotFor(1, 6), 2 * 4 + 2);
  EXPECT_EQ(*manager.SlotFor(2, 1), 1 * 4 + 1);
}

TEST(KvBlockManagerTest, SlotForUnreservedPositionNamesTheSequence) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(5, 3).ok());
  absl::Status past_end = manager.SlotFor(5, 3).status();
  EXPECT_EQ(past_end.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(past_end.message(), AllOf(HasSubstr("sequence 5"), HasSubstr("position 3"), HasSubstr("holds 3")));
  EXPECT_EQ(manager.SlotFor(5, -1).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(manager.SlotFor(6, 0).status().code(), absl::StatusCode::kNotFound);
}

TEST(KvBlockManagerTest, ReserveThatDoesNotFitChangesNothingAndExplains) {
  KvBlockManager manager = MakeManager(4, 4);
  ASSERT_TRUE(manager.Reserve(7, 6).ok());
  absl::Status status = manager.Reserve(7, 11);
  ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  // 6 + 11 = 17 tokens need 5 blocks; the sequence holds 2, 2 are free.
  EXPECT_THAT(status.message(), AllOf(HasSubstr("sequence 7"), HasSubstr("11 more tokens"),
                                      HasSubstr("need 3 blocks"), HasSubstr("2 of 4 blocks are free")));
  EXPECT_THAT(BlocksOf(manager, 7), ElementsAre(0, 1));
  EXPECT_EQ(TokensOf(manager, 7), 6);
  EXPECT_EQ(manager.num_free_blocks(), 2);

  ASSERT_TRUE(manager.Reserve(7, 10).ok());
  EXPECT_EQ(manager.num_free_blocks(), 0);
}

TEST(KvBlockManagerTest, FailedFirstReserveLeavesNoSequence) {
  KvBlockManager manager = MakeManager(2, 4);
  EXPECT_EQ(manager.Reserve(9, 9).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(manager.FindSequence(9), nullptr);
  EXPECT_EQ(manager.num_free_blocks(), 2);
}

TEST(KvBlockManagerTest, FreeReturnsTheBlocks) {
  KvBlockManager manager = MakeManager(4, 4);
  ASSERT_TRUE(manager.Reserve(1, 8).ok());
  ASSERT_TRUE(manager.Reserve(2, 1).ok());
  ASSERT_TRUE(manager.Free(1).ok());
  EXPECT_EQ(manager.num_free_blocks(), 3);
  EXPECT_EQ(manager.FindSequence(1), nullptr);
  absl::Status again = manager.Free(1);
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(again.message(), HasSubstr("sequence 1"));
}

TEST(KvBlockManagerTest, ForkSharesEveryBlock) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 6).ok());
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  EXPECT_THAT(BlocksOf(manager, 2), ElementsAre(0, 1));
  EXPECT_EQ(TokensOf(manager, 2), 6);
  EXPECT_EQ(manager.ReferenceCount(0), 2);
  EXPECT_EQ(manager.ReferenceCount(1), 2);
  KvBlockCounters counters = manager.counters();
  EXPECT_EQ(counters.blocks_in_use, 2);
  EXPECT_EQ(counters.blocks_shared, 2);
  EXPECT_EQ(counters.blocks_copied, 0);
}

TEST(KvBlockManagerTest, ForkErrorsNameBothSequences) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 2).ok());
  ASSERT_TRUE(manager.Reserve(2, 2).ok());
  absl::Status no_parent = manager.Fork(3, 4);
  EXPECT_EQ(no_parent.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(no_parent.message(), HasSubstr("sequence 3 into 4"));
  absl::Status child_exists = manager.Fork(1, 2);
  EXPECT_EQ(child_exists.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(child_exists.message(), HasSubstr("sequence 2 exists"));
  EXPECT_EQ(manager.ReferenceCount(0), 1);
}

TEST(KvBlockManagerTest, ChildAppendingToSharedPartialBlockCopiesIt) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 6).ok());  // blocks 0 (full), 1 (2 of 4)
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  EXPECT_EQ(*manager.BlocksNeeded(2, 1), 1);
  ASSERT_TRUE(manager.Reserve(2, 1).ok());

  EXPECT_THAT(manager.TakePendingCopies(), ElementsAre(BlockCopy{1, 2}));
  EXPECT_THAT(manager.TakePendingCopies(), IsEmpty());
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(0, 1));
  EXPECT_THAT(BlocksOf(manager, 2), ElementsAre(0, 2));
  EXPECT_EQ(*manager.SlotFor(2, 6), 2 * 4 + 2);
  EXPECT_EQ(manager.ReferenceCount(1), 1);
  KvBlockCounters counters = manager.counters();
  EXPECT_EQ(counters.blocks_shared, 1);
  EXPECT_EQ(counters.blocks_copied, 1);
  EXPECT_EQ(counters.blocks_in_use, 3);

  // The parent's block 1 is its own again: appending writes in place.
  ASSERT_TRUE(manager.Reserve(1, 1).ok());
  EXPECT_THAT(manager.TakePendingCopies(), IsEmpty());
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(0, 1));
}

TEST(KvBlockManagerTest, UsageOfAGroupCountsSharedBlocksOnce) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 6).ok());  // blocks 0, 1
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  ASSERT_TRUE(manager.Reserve(2, 3).ok());  // 0 shared; 1 copied to 2; 3 new
  ASSERT_TRUE(manager.Reserve(5, 2).ok());  // outside the group
  const std::vector<SequenceId> group = {1, 2, 7};  // 7 does not exist
  const GroupBlockUsage usage = manager.UsageOf(group);
  EXPECT_EQ(usage.distinct, 4);
  EXPECT_EQ(usage.total, 5);
  EXPECT_EQ(usage.shared, 1);
  EXPECT_EQ(manager.UsageOf({}).distinct, 0);
}

TEST(KvBlockManagerTest, FreeingTheCopysOwnerDropsTheQueuedCopy) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 6).ok());
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  ASSERT_TRUE(manager.Fork(1, 3).ok());
  ASSERT_TRUE(manager.Reserve(2, 1).ok());  // queues 1 -> 2
  ASSERT_TRUE(manager.Reserve(3, 1).ok());  // queues 1 -> 3
  // Freed before its copy ran (a step that failed to form): block 2 goes back
  // to the pool, and a copy into it would corrupt its next owner.
  ASSERT_TRUE(manager.Free(2).ok());
  EXPECT_THAT(manager.TakePendingCopies(), ElementsAre(BlockCopy{1, 3}));
}

TEST(KvBlockManagerTest, ParentAppendingToSharedPartialBlockCopiesIt) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 6).ok());
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  ASSERT_TRUE(manager.Reserve(1, 3).ok());  // fills the copy of block 1, opens a new block
  EXPECT_THAT(manager.TakePendingCopies(), ElementsAre(BlockCopy{1, 2}));
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(0, 2, 3));
  EXPECT_THAT(BlocksOf(manager, 2), ElementsAre(0, 1));
  EXPECT_EQ(manager.counters().blocks_copied, 1);
}

TEST(KvBlockManagerTest, SharedFullBlockIsNeverCopied) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 8).ok());
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  ASSERT_TRUE(manager.Reserve(2, 1).ok());
  ASSERT_TRUE(manager.Reserve(1, 1).ok());
  EXPECT_THAT(manager.TakePendingCopies(), IsEmpty());
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(0, 1, 3));
  EXPECT_THAT(BlocksOf(manager, 2), ElementsAre(0, 1, 2));
  EXPECT_EQ(manager.counters().blocks_shared, 2);
  EXPECT_EQ(manager.counters().blocks_copied, 0);
}

TEST(KvBlockManagerTest, CopyOnWriteNeedsAFreeBlock) {
  KvBlockManager manager = MakeManager(2, 4);
  ASSERT_TRUE(manager.Reserve(1, 6).ok());
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  absl::Status status = manager.Reserve(2, 1);
  ASSERT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), AllOf(HasSubstr("sequence 2"), HasSubstr("need 1 blocks")));
  EXPECT_THAT(manager.TakePendingCopies(), IsEmpty());
  EXPECT_THAT(BlocksOf(manager, 2), ElementsAre(0, 1));
  EXPECT_EQ(manager.ReferenceCount(1), 2);
  EXPECT_EQ(manager.counters().blocks_copied, 0);
}

TEST(KvBlockManagerTest, CopiesOfCopiesAreQueuedInOrder) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 2).ok());
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  ASSERT_TRUE(manager.Reserve(2, 1).ok());  // 0 -> 1
  ASSERT_TRUE(manager.Fork(2, 3).ok());
  ASSERT_TRUE(manager.Reserve(3, 1).ok());  // 1 -> 2 reads what the first copy wrote
  EXPECT_THAT(manager.TakePendingCopies(), ElementsAre(BlockCopy{0, 1}, BlockCopy{1, 2}));
}

TEST(KvBlockManagerTest, FreeingAForkedFamilyLeavesThePoolEmpty) {
  KvBlockManager manager = MakeManager(16, 4);
  ASSERT_TRUE(manager.Reserve(1, 10).ok());
  for (SequenceId beam : {2, 3, 4}) {
    ASSERT_TRUE(manager.Fork(1, beam).ok());
    ASSERT_TRUE(manager.Reserve(beam, 3).ok());
  }
  // Three beams: the shared prefix once (3 blocks), then per beam a copy of
  // the partial block and one more block.
  EXPECT_EQ(manager.counters().blocks_in_use, 3 + 3 * 2);
  EXPECT_EQ(manager.counters().peak_blocks_in_use, 9);
  for (SequenceId sequence : {3, 1, 4, 2}) ASSERT_TRUE(manager.Free(sequence).ok());
  EXPECT_EQ(manager.num_free_blocks(), 16);
  EXPECT_EQ(manager.counters().blocks_shared, 0);
  EXPECT_EQ(manager.counters().peak_blocks_in_use, 9);
  for (BlockId block = 0; block < 16; ++block) EXPECT_EQ(manager.ReferenceCount(block), 0);
}

std::vector<int32_t> Iota(int32_t first, int32_t count) {
  std::vector<int32_t> tokens(count);
  for (int32_t i = 0; i < count; ++i) tokens[i] = first + i;
  return tokens;
}

// Reserves `tokens` for a new sequence after its cached prefix, and reports
// them all as computed.
int64_t StartCached(KvBlockManager& manager, SequenceId sequence, const std::vector<int32_t>& tokens) {
  absl::StatusOr<int64_t> adopted = manager.AdoptCachedPrefix(sequence, tokens);
  EXPECT_TRUE(adopted.ok()) << adopted.status();
  const int64_t reused = adopted.ok() ? *adopted : 0;
  EXPECT_TRUE(manager.Reserve(sequence, static_cast<int64_t>(tokens.size()) - reused).ok());
  EXPECT_TRUE(manager.CacheFullBlocks(sequence, tokens).ok());
  return reused;
}

TEST(KvBlockManagerPrefixTest, ASecondSequenceSharesTheFirstsWholeBlocks) {
  KvBlockManager manager = MakeManager(8, 4);
  const std::vector<int32_t> prompt = Iota(100, 10);  // blocks 0, 1 whole; 2 partial
  EXPECT_EQ(StartCached(manager, 1, prompt), 0);
  EXPECT_EQ(manager.MatchPrefix(prompt).num_tokens, 8);
  EXPECT_EQ(manager.MatchPrefix(prompt).num_evictable_blocks, 0);

  EXPECT_EQ(StartCached(manager, 2, prompt), 8);
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(0, 1, 2));
  EXPECT_THAT(BlocksOf(manager, 2), ElementsAre(0, 1, 3));
  EXPECT_EQ(TokensOf(manager, 2), 10);
  const KvBlockCounters counters = manager.counters();
  EXPECT_EQ(counters.blocks_shared, 2);
  EXPECT_EQ(counters.blocks_in_use, 4);
  EXPECT_EQ(counters.prefix_hit_blocks, 2);
  EXPECT_EQ(counters.prefix_hit_tokens, 8);
  EXPECT_EQ(counters.blocks_copied, 0);
}

TEST(KvBlockManagerPrefixTest, AMatchStopsAtTheFirstBlockThatDiffers) {
  KvBlockManager manager = MakeManager(8, 4);
  StartCached(manager, 1, Iota(0, 12));
  std::vector<int32_t> other = Iota(0, 12);
  other[5] = 99;  // the second block differs, so the third's prefix does too
  EXPECT_EQ(manager.MatchPrefix(other).num_tokens, 4);
  std::vector<int32_t> shifted = Iota(4, 8);  // block 1's tokens, but not at the start
  EXPECT_EQ(manager.MatchPrefix(shifted).num_tokens, 0);
  EXPECT_EQ(manager.MatchPrefix(Iota(0, 3)).num_tokens, 0);
}

TEST(KvBlockManagerPrefixTest, OnlyComputedWholeBlocksAreCached) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 10).ok());
  const std::vector<int32_t> tokens = Iota(0, 10);
  ASSERT_TRUE(manager.CacheFullBlocks(1, absl::MakeConstSpan(tokens).first(6)).ok());
  EXPECT_EQ(manager.MatchPrefix(tokens).num_tokens, 4);
  ASSERT_TRUE(manager.CacheFullBlocks(1, tokens).ok());
  EXPECT_EQ(manager.MatchPrefix(tokens).num_tokens, 8);
  EXPECT_EQ(manager.FindSequence(1)->num_hashed_blocks, 2);

  absl::Status too_many = manager.CacheFullBlocks(1, Iota(0, 11));
  EXPECT_EQ(too_many.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(too_many.message(), HasSubstr("sequence 1"));
  EXPECT_EQ(manager.CacheFullBlocks(2, tokens).code(), absl::StatusCode::kNotFound);
}

TEST(KvBlockManagerPrefixTest, FreedBlocksStayCachedAndFreeUntilEvicted) {
  KvBlockManager manager = MakeManager(4, 4);
  const std::vector<int32_t> prompt = Iota(0, 9);
  StartCached(manager, 1, prompt);  // blocks 0, 1 cached; 2 partial
  ASSERT_TRUE(manager.Free(1).ok());
  EXPECT_EQ(manager.num_free_blocks(), 4);
  EXPECT_EQ(manager.counters().blocks_in_use, 0);
  EXPECT_EQ(manager.counters().blocks_cached, 2);
  EXPECT_EQ(manager.MatchPrefix(prompt).num_evictable_blocks, 2);

  // Revived, the cached blocks leave the free count again.
  EXPECT_EQ(StartCached(manager, 2, prompt), 8);
  EXPECT_THAT(BlocksOf(manager, 2), ElementsAre(0, 1, 2));
  EXPECT_EQ(manager.num_free_blocks(), 1);
  EXPECT_EQ(manager.counters().blocks_cached, 0);
  ASSERT_TRUE(manager.Free(2).ok());

  // Two blank blocks (2, 3), then the cached ones, the prefix's tail first.
  ASSERT_TRUE(manager.Reserve(3, 12).ok());
  EXPECT_THAT(BlocksOf(manager, 3), ElementsAre(2, 3, 1));
  EXPECT_EQ(manager.counters().blocks_evicted, 1);
  EXPECT_EQ(manager.MatchPrefix(prompt).num_tokens, 4);
  ASSERT_TRUE(manager.Reserve(3, 4).ok());
  EXPECT_EQ(manager.counters().blocks_evicted, 2);
  EXPECT_EQ(manager.MatchPrefix(prompt).num_tokens, 0);
  ASSERT_TRUE(manager.Free(3).ok());
  EXPECT_EQ(manager.num_free_blocks(), 4);
}

TEST(KvBlockManagerPrefixTest, AdoptingNeedsANewSequence) {
  KvBlockManager manager = MakeManager(8, 4);
  StartCached(manager, 1, Iota(0, 8));
  absl::StatusOr<int64_t> existing = manager.AdoptCachedPrefix(1, Iota(0, 8));
  EXPECT_EQ(existing.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(existing.status().message(), HasSubstr("sequence 1"));
  absl::StatusOr<int64_t> nothing = manager.AdoptCachedPrefix(2, Iota(50, 8));
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_EQ(*nothing, 0);
  EXPECT_EQ(manager.FindSequence(2), nullptr);
}

TEST(KvBlockManagerPrefixTest, ABlockComputedTwiceIsCachedOnce) {
  KvBlockManager manager = MakeManager(8, 4);
  const std::vector<int32_t> prompt = Iota(0, 8);
  // Both prefill before either is cached, as two requests in one step do.
  ASSERT_TRUE(manager.Reserve(1, 8).ok());
  ASSERT_TRUE(manager.Reserve(2, 8).ok());
  ASSERT_TRUE(manager.CacheFullBlocks(1, prompt).ok());
  ASSERT_TRUE(manager.CacheFullBlocks(2, prompt).ok());
  ASSERT_TRUE(manager.Free(1).ok());
  ASSERT_TRUE(manager.Free(2).ok());
  EXPECT_EQ(manager.counters().blocks_cached, 2);
  EXPECT_EQ(StartCached(manager, 3, Iota(0, 9)), 8);
  // The duplicates went back blank; the last one freed is reused first.
  EXPECT_THAT(BlocksOf(manager, 3), ElementsAre(0, 1, 2));
}

TEST(KvBlockManagerPrefixTest, AForkedChildExtendsTheCachedChain) {
  KvBlockManager manager = MakeManager(8, 4);
  StartCached(manager, 1, Iota(0, 6));
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  std::vector<int32_t> child = Iota(0, 6);
  for (int32_t token : {70, 71}) child.push_back(token);
  ASSERT_TRUE(manager.Reserve(2, 2).ok());  // copies the shared partial block
  ASSERT_TRUE(manager.CacheFullBlocks(2, child).ok());
  EXPECT_THAT(manager.TakePendingCopies(), ElementsAre(BlockCopy{1, 2}));
  EXPECT_EQ(manager.MatchPrefix(child).num_tokens, 8);
  std::vector<int32_t> parent = Iota(0, 8);
  EXPECT_EQ(manager.MatchPrefix(parent).num_tokens, 4);
}

// Random Reserve / Fork / Free against a model that plays the device: every
// token writes a unique stamp into its slot (after the pending copies run),
// and every sequence must read back exactly the stamps of its own history.
// Writing through a shared block instead of copying it would show up as a
// sibling's stamp; leaked or doubly held blocks as wrong reference counts.
class KvBlockManagerStressTest : public ::testing::Test {
 protected:
  static constexpr int32_t kNumBlocks = 24;
  static constexpr int32_t kBlockSize = 4;

  void ApplyPendingCopies() {
    for (const BlockCopy& copy : manager_.TakePendingCopies()) {
      for (int32_t offset = 0; offset < kBlockSize; ++offset) {
        device_slots_[copy.destination * kBlockSize + offset] = device_slots_[copy.source * kBlockSize + offset];
      }
    }
  }

  // Reference counts and sharing as the sequences' tables imply them.
  std::vector<int32_t> HoldersPerBlock() const {
    std::vector<int32_t> holders(kNumBlocks, 0);
    for (const auto& [sequence, stamps] : expected_stamps_) {
      for (BlockId block : BlocksOf(manager_, sequence)) ++holders[block];
    }
    return holders;
  }

  int64_t ModelBlocksNeeded(SequenceId sequence, int64_t new_tokens) const {
    auto found = expected_stamps_.find(sequence);
    const int64_t tokens = found != expected_stamps_.end() ? static_cast<int64_t>(found->second.size()) : 0;
    const auto blocks_for = [](int64_t n) { return (n + kBlockSize - 1) / kBlockSize; };
    int64_t needed = blocks_for(tokens + new_tokens) - blocks_for(tokens);
    if (new_tokens > 0 && tokens % kBlockSize != 0 &&
        HoldersPerBlock()[BlocksOf(manager_, sequence).back()] > 1) {
      ++needed;
    }
    return needed;
  }

  void Reserve(SequenceId sequence, int64_t new_tokens) {
    const int64_t needed = ModelBlocksNeeded(sequence, new_tokens);
    EXPECT_EQ(*manager_.BlocksNeeded(sequence, new_tokens), needed);
    const bool should_fit = needed <= manager_.num_free_blocks();
    absl::Status status = manager_.Reserve(sequence, new_tokens);
    if (!should_fit) {
      EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
      ++reservations_refused_;
      return;
    }
    ASSERT_TRUE(status.ok()) << status;
    ApplyPendingCopies();
    std::vector<uint64_t>& stamps = expected_stamps_[sequence];
    for (int64_t i = 0; i < new_tokens; ++i) {
      const int64_t position = static_cast<int64_t>(stamps.size());
      stamps.push_back(++last_stamp_);
      device_slots_[*manager_.SlotFor(sequence, position)] = stamps.back();
    }
  }

  void CheckInvariants() {
    const std::vector<int32_t> holders = HoldersPerBlock();
    int32_t in_use = 0;
    int32_t shared = 0;
    for (BlockId block = 0; block < kNumBlocks; ++block) {
      ASSERT_EQ(manager_.ReferenceCount(block), holders[block]) << "block " << block;
      in_use += holders[block] > 0 ? 1 : 0;
      shared += holders[block] > 1 ? 1 : 0;
    }
    const KvBlockCounters counters = manager_.counters();
    ASSERT_EQ(counters.blocks_in_use, in_use);
    ASSERT_EQ(counters.blocks_shared, shared);
    ASSERT_EQ(manager_.num_free_blocks(), kNumBlocks - in_use);
    ASSERT_GE(counters.peak_blocks_in_use, in_use);
    ASSERT_EQ(manager_.num_sequences(), static_cast<int64_t>(expected_stamps_.size()));
    for (const auto& [sequence, stamps] : expected_stamps_) {
      const BlockTable* table = manager_.FindSequence(sequence);
      ASSERT_NE(table, nullptr);
      ASSERT_EQ(table->num_tokens, static_cast<int64_t>(stamps.size()));
      ASSERT_EQ(static_cast<int64_t>(table->blocks.size()), (table->num_tokens + kBlockSize - 1) / kBlockSize);
      for (size_t position = 0; position < stamps.size(); ++position) {
        ASSERT_EQ(device_slots_[*manager_.SlotFor(sequence, position)], stamps[position])
            << "sequence " << sequence << " position " << position;
      }
    }
  }

  KvBlockManager manager_ = MakeManager(kNumBlocks, kBlockSize);
  std::vector<uint64_t> device_slots_ = std::vector<uint64_t>(kNumBlocks * kBlockSize, 0);
  std::map<SequenceId, std::vector<uint64_t>> expected_stamps_;
  uint64_t last_stamp_ = 0;
  int64_t reservations_refused_ = 0;
};

TEST_F(KvBlockManagerStressTest, RandomReserveForkFreeMatchesTheModel) {
  std::mt19937_64 random(20240611);
  const auto below = [&random](uint64_t bound) { return static_cast<int64_t>(random() % bound); };
  SequenceId next_sequence = 0;
  for (int step = 0; step < 20000; ++step) {
    // Frees outnumber new sequences and forks a little, so the population
    // hovers around the pool's capacity instead of pinning it full.
    const int64_t action = below(20);
    if (expected_stamps_.empty() || action < 3) {
      Reserve(next_sequence++, below(12));
    } else {
      auto existing = expected_stamps_.begin();
      std::advance(existing, below(expected_stamps_.size()));
      const SequenceId sequence = existing->first;
      if (action < 12) {
        Reserve(sequence, below(4) == 0 ? below(9) : 1);
      } else if (action < 15) {
        ASSERT_TRUE(manager_.Fork(sequence, next_sequence).ok());
        expected_stamps_[next_sequence] = expected_stamps_[sequence];
        ++next_sequence;
      } else {
        ASSERT_TRUE(manager_.Free(sequence).ok());
        expected_stamps_.erase(sequence);
      }
    }
    ASSERT_NO_FATAL_FAILURE(CheckInvariants()) << "after step " << step;
  }
  EXPECT_GT(manager_.counters().blocks_copied, 100);
  EXPECT_GT(reservations_refused_, 100);
  EXPECT_EQ(manager_.counters().peak_blocks_in_use, kNumBlocks);

  while (!expected_stamps_.empty()) {
    ASSERT_TRUE(manager_.Free(expected_stamps_.begin()->first).ok());
    expected_stamps_.erase(expected_stamps_.begin());
  }
  EXPECT_EQ(manager_.num_free_blocks(), kNumBlocks);
  EXPECT_EQ(manager_.counters().blocks_shared, 0);
  for (BlockId block = 0; block < kNumBlocks; ++block) EXPECT_EQ(manager_.ReferenceCount(block), 0);
}

// Random sequences over a three-token alphabet (so prefixes recur) that
// adopt cached prefixes, grow, fork and free, against a model of the
// device: every slot holds a hash of its token's whole prefix, as real keys
// and values depend on it. A sequence must read back its own prefixes'
// hashes everywhere: a block matched to the wrong prefix, or evicted and
// reused while still matched, would show another's.
class KvBlockManagerPrefixStressTest : public ::testing::Test {
 protected:
  static constexpr int32_t kNumBlocks = 24;
  static constexpr int32_t kBlockSize = 4;

  static uint64_t PrefixHash(const std::vector<int32_t>& tokens, size_t end) {
    uint64_t hash = 1469598103934665603ull;
    for (size_t i = 0; i < end; ++i) hash = (hash ^ static_cast<uint64_t>(tokens[i] + 1)) * 1099511628211ull;
    return hash;
  }

  // Computes (writes) tokens [first, end) of `sequence` and caches them.
  void Compute(SequenceId sequence, size_t first) {
    for (const BlockCopy& copy : manager_.TakePendingCopies()) {
      for (int32_t offset = 0; offset < kBlockSize; ++offset) {
        device_slots_[copy.destination * kBlockSize + offset] = device_slots_[copy.source * kBlockSize + offset];
      }
    }
    const std::vector<int32_t>& tokens = tokens_[sequence];
    for (size_t position = first; position < tokens.size(); ++position) {
      device_slots_[*manager_.SlotFor(sequence, position)] = PrefixHash(tokens, position + 1);
    }
    ASSERT_TRUE(manager_.CacheFullBlocks(sequence, tokens).ok());
  }

  void Start(SequenceId sequence, std::vector<int32_t> tokens) {
    const absl::Span<const int32_t> reusable = absl::MakeConstSpan(tokens).first(tokens.size() - 1);
    const PrefixMatch match = manager_.MatchPrefix(reusable);
    const int64_t needed = match.num_evictable_blocks + *manager_.BlocksNeeded(sequence, tokens.size() - match.num_tokens);
    if (needed > manager_.num_free_blocks()) return;
    absl::StatusOr<int64_t> adopted = manager_.AdoptCachedPrefix(sequence, reusable);
    ASSERT_TRUE(adopted.ok()) << adopted.status();
    ASSERT_EQ(*adopted, match.num_tokens);
    ASSERT_TRUE(manager_.Reserve(sequence, static_cast<int64_t>(tokens.size()) - *adopted).ok());
    tokens_[sequence] = std::move(tokens);
    Compute(sequence, static_cast<size_t>(*adopted));
  }

  void Append(SequenceId sequence, std::vector<int32_t> more) {
    if (*manager_.BlocksNeeded(sequence, more.size()) > manager_.num_free_blocks()) return;
    ASSERT_TRUE(manager_.Reserve(sequence, more.size()).ok());
    std::vector<int32_t>& tokens = tokens_[sequence];
    const size_t first = tokens.size();
    tokens.insert(tokens.end(), more.begin(), more.end());
    Compute(sequence, first);
  }

  void CheckInvariants() {
    std::vector<int32_t> holders(kNumBlocks, 0);
    for (const auto& [sequence, tokens] : tokens_) {
      for (BlockId block : BlocksOf(manager_, sequence)) ++holders[block];
      for (size_t position = 0; position < tokens.size(); ++position) {
        ASSERT_EQ(device_slots_[*manager_.SlotFor(sequence, position)], PrefixHash(tokens, position + 1))
            << "sequence " << sequence << " position " << position;
      }
    }
    int32_t in_use = 0;
    for (BlockId block = 0; block < kNumBlocks; ++block) {
      ASSERT_EQ(manager_.ReferenceCount(block), holders[block]) << "block " << block;
      in_use += holders[block] > 0 ? 1 : 0;
    }
    ASSERT_EQ(manager_.counters().blocks_in_use, in_use);
    ASSERT_EQ(manager_.num_free_blocks(), kNumBlocks - in_use);
    ASSERT_LE(manager_.counters().blocks_cached, kNumBlocks - in_use);
  }

  KvBlockManager manager_ = MakeManager(kNumBlocks, kBlockSize);
  std::vector<uint64_t> device_slots_ = std::vector<uint64_t>(kNumBlocks * kBlockSize, 0);
  std::map<SequenceId, std::vector<int32_t>> tokens_;
};

TEST_F(KvBlockManagerPrefixStressTest, RandomSequencesReadTheirOwnPrefixesEverywhere) {
  std::mt19937_64 random(20261202);
  const auto below = [&random](uint64_t bound) { return static_cast<int64_t>(random() % bound); };
  const auto random_tokens = [&](int64_t count) {
    std::vector<int32_t> tokens(count);
    for (int32_t& token : tokens) token = static_cast<int32_t>(below(3));
    return tokens;
  };
  const std::vector<int32_t> system_prompt = random_tokens(9);
  SequenceId next_sequence = 0;
  for (int step = 0; step < 20000; ++step) {
    const int64_t action = below(20);
    if (tokens_.empty() || action < 5) {
      std::vector<int32_t> tokens = below(2) == 0 ? system_prompt : std::vector<int32_t>{};
      const std::vector<int32_t> rest = random_tokens(1 + below(10));
      tokens.insert(tokens.end(), rest.begin(), rest.end());
      ASSERT_NO_FATAL_FAILURE(Start(next_sequence++, std::move(tokens)));
    } else {
      auto existing = tokens_.begin();
      std::advance(existing, below(tokens_.size()));
      const SequenceId sequence = existing->first;
      if (action < 12) {
        ASSERT_NO_FATAL_FAILURE(Append(sequence, random_tokens(below(4) == 0 ? 1 + below(8) : 1)));
      } else if (action < 14) {
        ASSERT_TRUE(manager_.Fork(sequence, next_sequence).ok());
        tokens_[next_sequence] = tokens_[sequence];
        ++next_sequence;
      } else {
        ASSERT_TRUE(manager_.Free(sequence).ok());
        tokens_.erase(sequence);
      }
    }
    ASSERT_NO_FATAL_FAILURE(CheckInvariants()) << "after step " << step;
  }
  const KvBlockCounters counters = manager_.counters();
  EXPECT_GT(counters.prefix_hit_blocks, 1000);
  EXPECT_GT(counters.blocks_evicted, 100);
  EXPECT_GT(counters.blocks_copied, 100);
  while (!tokens_.empty()) {
    ASSERT_TRUE(manager_.Free(tokens_.begin()->first).ok());
    tokens_.erase(tokens_.begin());
  }
  EXPECT_EQ(manager_.num_free_blocks(), kNumBlocks);
  EXPECT_GT(manager_.counters().blocks_cached, 0);
}

TEST(KvBlockManagerWindowTest, ReleasesOnlyWholeBlocksBeforeThePosition) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 10).ok());  // blocks 0, 1, 2 (2 of 4)
  ASSERT_TRUE(manager.ReleaseBlocksBefore(1, 7).ok());  // block 0 lies before 7, block 1 (4..7) does not
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(kReleasedBlock, 1, 2));
  EXPECT_EQ(manager.FindSequence(1)->num_released_blocks, 1);
  EXPECT_EQ(TokensOf(manager, 1), 10);
  EXPECT_EQ(manager.num_free_blocks(), 6);
  EXPECT_EQ(manager.ReferenceCount(0), 0);
  EXPECT_EQ(manager.counters().window_released_blocks, 1);
  EXPECT_EQ(manager.counters().blocks_in_use, 2);

  // Positions in the released block are gone; later ones keep their slots.
  const absl::StatusOr<int32_t> gone = manager.SlotFor(1, 3);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(gone.status().message(), HasSubstr("released behind the attention window"));
  EXPECT_EQ(*manager.SlotFor(1, 4), 4);

  // Again, or further back: nothing more. Past the end: up to the end.
  ASSERT_TRUE(manager.ReleaseBlocksBefore(1, 2).ok());
  ASSERT_TRUE(manager.ReleaseBlocksBefore(1, 7).ok());
  EXPECT_EQ(manager.counters().window_released_blocks, 1);
  ASSERT_TRUE(manager.ReleaseBlocksBefore(1, 100).ok());
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(kReleasedBlock, kReleasedBlock, 2));

  // Appending still works; freeing returns what is left.
  ASSERT_TRUE(manager.Reserve(1, 4).ok());
  EXPECT_THAT(BlocksOf(manager, 1), ElementsAre(kReleasedBlock, kReleasedBlock, 2, 1));
  ASSERT_TRUE(manager.Free(1).ok());
  EXPECT_EQ(manager.num_free_blocks(), 8);
  EXPECT_EQ(manager.ReleaseBlocksBefore(1, 4).code(), absl::StatusCode::kNotFound);
}

// Beams share their prompt's blocks: each beam's release drops its own
// reference, and a block returns to the pool with the last of them.
TEST(KvBlockManagerWindowTest, SharedBlocksReturnWithTheirLastHolder) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 8).ok());  // blocks 0, 1
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  ASSERT_TRUE(manager.ReleaseBlocksBefore(1, 4).ok());
  EXPECT_EQ(manager.ReferenceCount(0), 1);
  EXPECT_EQ(manager.num_free_blocks(), 6);
  EXPECT_EQ(manager.counters().window_released_blocks, 0);
  EXPECT_THAT(BlocksOf(manager, 2), ElementsAre(0, 1));

  // A fork of a sequence that released blocks takes no reference to them.
  ASSERT_TRUE(manager.Fork(1, 3).ok());
  EXPECT_THAT(BlocksOf(manager, 3), ElementsAre(kReleasedBlock, 1));
  EXPECT_EQ(manager.ReferenceCount(0), 1);
  EXPECT_EQ(manager.ReferenceCount(1), 3);
  const GroupBlockUsage usage = manager.UsageOf({1, 2, 3});
  EXPECT_EQ(usage.distinct, 2);
  EXPECT_EQ(usage.total, 4);

  ASSERT_TRUE(manager.ReleaseBlocksBefore(2, 4).ok());
  EXPECT_EQ(manager.ReferenceCount(0), 0);
  EXPECT_EQ(manager.num_free_blocks(), 7);
  EXPECT_EQ(manager.counters().window_released_blocks, 1);
  for (SequenceId sequence : {1, 2, 3}) ASSERT_TRUE(manager.Free(sequence).ok());
  EXPECT_EQ(manager.num_free_blocks(), 8);
}

// The prefix cache chains each block's hash onto the one before: it stops
// at a released block, and at one whose predecessor went.
TEST(KvBlockManagerWindowTest, PrefixCachingStopsAtReleasedBlocks) {
  KvBlockManager manager = MakeManager(8, 4);
  const std::vector<int32_t> tokens = Iota(0, 12);
  ASSERT_TRUE(manager.Reserve(1, 12).ok());
  ASSERT_TRUE(manager.CacheFullBlocks(1, absl::MakeConstSpan(tokens).first(4)).ok());
  ASSERT_TRUE(manager.ReleaseBlocksBefore(1, 8).ok());  // blocks 0 and 1
  ASSERT_TRUE(manager.CacheFullBlocks(1, tokens).ok());
  EXPECT_EQ(manager.FindSequence(1)->num_hashed_blocks, 1);
  // Block 0 stays findable (cached, evictable) until the pool needs it.
  EXPECT_EQ(manager.MatchPrefix(tokens).num_tokens, 4);
}

TEST(KvBlockManagerTest, TruncateGivesBackTheBlocksPastTheNewEnd) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 10).ok());  // 3 blocks
  ASSERT_EQ(manager.num_free_blocks(), 5);
  // At a block boundary the next block goes; one token into a block keeps it.
  ASSERT_TRUE(manager.Truncate(1, 8).ok());
  EXPECT_EQ(TokensOf(manager, 1), 8);
  EXPECT_EQ(BlocksOf(manager, 1).size(), 2u);
  EXPECT_EQ(manager.num_free_blocks(), 6);
  ASSERT_TRUE(manager.Truncate(1, 5).ok());
  EXPECT_EQ(BlocksOf(manager, 1).size(), 2u);
  // The sequence grows again from its new end.
  ASSERT_TRUE(manager.Reserve(1, 4).ok());
  EXPECT_EQ(TokensOf(manager, 1), 9);
  EXPECT_EQ(BlocksOf(manager, 1).size(), 3u);
  // Its whole length and nothing are both fine.
  EXPECT_TRUE(manager.Truncate(1, 9).ok());
  EXPECT_TRUE(manager.Truncate(1, 0).ok());
  EXPECT_EQ(manager.num_free_blocks(), 8);
}

TEST(KvBlockManagerTest, TruncateLeavesASharedBlockToItsOtherHolders) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 6).ok());
  ASSERT_TRUE(manager.Fork(1, 2).ok());
  const std::vector<BlockId> shared = BlocksOf(manager, 1);
  ASSERT_TRUE(manager.Truncate(2, 3).ok());
  EXPECT_EQ(manager.ReferenceCount(shared[1]), 1);
  EXPECT_EQ(manager.ReferenceCount(shared[0]), 2);
  // Writing after the cut into the still-shared first block copies it.
  ASSERT_TRUE(manager.Reserve(2, 1).ok());
  EXPECT_THAT(manager.TakePendingCopies(), testing::SizeIs(1));
  EXPECT_EQ(BlocksOf(manager, 1), shared);
}

TEST(KvBlockManagerTest, TruncateRefusesWhatItCannotCut) {
  KvBlockManager manager = MakeManager(8, 4);
  ASSERT_TRUE(manager.Reserve(1, 6).ok());
  EXPECT_THAT(std::string(manager.Truncate(1, 7).message()),
              HasSubstr("cannot truncate KV sequence 1 to 7 tokens: it holds 6"));
  EXPECT_EQ(manager.Truncate(1, -1).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(manager.Truncate(9, 0).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(manager.CacheFullBlocks(1, std::vector<int32_t>{1, 2, 3, 4}).ok());
  EXPECT_TRUE(manager.Truncate(1, 4).ok());
  EXPECT_THAT(std::string(manager.Truncate(1, 3).message()),
              HasSubstr("its first 4 are in blocks the prefix cache knows"));
}

}  // namespace
}  // namespace kvjit::kv
