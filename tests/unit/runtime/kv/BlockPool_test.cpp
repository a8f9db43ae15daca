#include "runtime/kv/BlockPool.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::kv {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(BlockPoolTest, FreshPoolHandsOutBlocksInOrder) {
  BlockPool pool(5);
  absl::StatusOr<std::vector<BlockId>> first = pool.Allocate(2);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_THAT(*first, ElementsAre(0, 1));
  absl::StatusOr<std::vector<BlockId>> second = pool.Allocate(3);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_THAT(*second, ElementsAre(2, 3, 4));
  EXPECT_EQ(pool.num_free(), 0);
  EXPECT_EQ(pool.num_in_use(), 5);
  for (BlockId block = 0; block < 5; ++block) EXPECT_EQ(pool.ReferenceCount(block), 1);
}

TEST(BlockPoolTest, AllocateIsAllOrNothing) {
  BlockPool pool(4);
  ASSERT_TRUE(pool.Allocate(3).ok());
  absl::StatusOr<std::vector<BlockId>> too_many = pool.Allocate(2);
  ASSERT_EQ(too_many.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_many.status().message(), HasSubstr("wanted 2 KV blocks, 1 of 4 are free"));
  EXPECT_EQ(pool.num_free(), 1);
  EXPECT_EQ(pool.ReferenceCount(3), 0);
}

TEST(BlockPoolTest, ReleasedBlockIsReusedFirst) {
  BlockPool pool(4);
  ASSERT_TRUE(pool.Allocate(3).ok());
  ASSERT_TRUE(pool.Release(1).ok());
  absl::StatusOr<std::vector<BlockId>> again = pool.Allocate(1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(*again, ElementsAre(1));
}

TEST(BlockPoolTest, BlockIsFreedWithItsLastReference) {
  BlockPool pool(2);
  ASSERT_TRUE(pool.Allocate(1).ok());
  ASSERT_TRUE(pool.AddReference(0).ok());
  ASSERT_TRUE(pool.AddReference(0).ok());
  EXPECT_EQ(pool.ReferenceCount(0), 3);
  EXPECT_EQ(pool.num_shared(), 1);

  ASSERT_TRUE(pool.Release(0).ok());
  EXPECT_EQ(pool.num_shared(), 1);
  ASSERT_TRUE(pool.Release(0).ok());
  EXPECT_EQ(pool.num_shared(), 0);
  EXPECT_EQ(pool.num_free(), 1);
  ASSERT_TRUE(pool.Release(0).ok());
  EXPECT_EQ(pool.ReferenceCount(0), 0);
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockPoolTest, FreeBlockCannotBeReleasedOrReferenced) {
  BlockPool pool(2);
  absl::Status release = pool.Release(1);
  EXPECT_EQ(release.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(release.message(), HasSubstr("KV block 1: it is free"));
  EXPECT_EQ(pool.AddReference(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool.ReferenceCount(1), 0);
  EXPECT_EQ(pool.num_free(), 2);
}

TEST(BlockPoolTest, BlockOutsideThePoolIsAnError) {
  BlockPool pool(2);
  EXPECT_EQ(pool.Release(2).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(pool.AddReference(-1).code(), absl::StatusCode::kOutOfRange);
}

TEST(BlockPoolTest, PeakInUseRemembersTheHighWaterMark) {
  BlockPool pool(4);
  ASSERT_TRUE(pool.Allocate(3).ok());
  for (BlockId block : {0, 1, 2}) ASSERT_TRUE(pool.Release(block).ok());
  ASSERT_TRUE(pool.Allocate(1).ok());
  EXPECT_EQ(pool.num_in_use(), 1);
  EXPECT_EQ(pool.peak_in_use(), 3);
}

TEST(BlockPoolTest, CacheableBlockIsKeptEvictableAtCountZero) {
  BlockPool pool(3);
  ASSERT_TRUE(pool.Allocate(2).ok());
  ASSERT_TRUE(pool.MarkCacheable(0).ok());
  ASSERT_TRUE(pool.Release(0).ok());
  EXPECT_TRUE(pool.IsEvictable(0));
  EXPECT_EQ(pool.num_evictable(), 1);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.num_in_use(), 1);

  ASSERT_TRUE(pool.Revive(0).ok());
  EXPECT_EQ(pool.ReferenceCount(0), 1);
  EXPECT_EQ(pool.num_evictable(), 0);
  // Still cacheable: released again, it is kept again.
  ASSERT_TRUE(pool.Release(0).ok());
  EXPECT_TRUE(pool.IsEvictable(0));
}

TEST(BlockPoolTest, AllocateEvictsOnlyWhenNoBlankBlockIsLeftOldestFirst) {
  BlockPool pool(4);
  ASSERT_TRUE(pool.Allocate(3).ok());
  for (BlockId block : {2, 0}) {
    ASSERT_TRUE(pool.MarkCacheable(block).ok());
    ASSERT_TRUE(pool.Release(block).ok());
  }
  absl::StatusOr<std::vector<BlockId>> blocks = pool.Allocate(2);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_THAT(*blocks, ElementsAre(3, 2));
  EXPECT_FALSE(pool.IsEvictable(2));
  EXPECT_TRUE(pool.IsEvictable(0));
  // Evicted, block 2 lost its mark: released, it is blank.
  ASSERT_TRUE(pool.Release(2).ok());
  EXPECT_FALSE(pool.IsEvictable(2));
  EXPECT_EQ(pool.num_evictable(), 1);
}

TEST(BlockPoolTest, OnlyAnEvictableBlockCanBeRevived) {
  BlockPool pool(2);
  ASSERT_TRUE(pool.Allocate(1).ok());
  absl::Status in_use = pool.Revive(0);
  EXPECT_EQ(in_use.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(in_use.message(), HasSubstr("KV block 0"));
  EXPECT_EQ(pool.Revive(1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool.Revive(7).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(pool.MarkCacheable(1).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BlockPoolTest, PeakSharedRemembersTheMostSharedAtOnce) {
  BlockPool pool(3);
  ASSERT_TRUE(pool.Allocate(3).ok());
  for (BlockId block : {0, 1}) ASSERT_TRUE(pool.AddReference(block).ok());
  for (BlockId block : {0, 1}) ASSERT_TRUE(pool.Release(block).ok());
  ASSERT_TRUE(pool.AddReference(2).ok());
  EXPECT_EQ(pool.num_shared(), 1);
  EXPECT_EQ(pool.peak_shared(), 2);
}

}  // namespace
}  // namespace kvjit::kv
