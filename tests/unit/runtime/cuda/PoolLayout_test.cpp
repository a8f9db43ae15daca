#include "runtime/cuda/PoolLayout.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::cuda {
namespace {

using ::testing::HasSubstr;

TEST(PoolLayoutTest, RegionsFollowEachOtherAtTheDefaultAlignment) {
  PoolLayout layout;
  EXPECT_EQ(*layout.Reserve("weights", 1000), 0u);
  EXPECT_EQ(*layout.Reserve("arena", 10), 1024u);
  EXPECT_EQ(*layout.Reserve("inputs", 256), 1280u);
  EXPECT_EQ(layout.total_bytes(), 1536u);
}

TEST(PoolLayoutTest, ALargerAlignmentIsHonoured) {
  PoolLayout layout;
  ASSERT_TRUE(layout.Reserve("small", 1).ok());
  EXPECT_EQ(*layout.Reserve("kv", 4096, 4096), 4096u);
  EXPECT_EQ(layout.total_bytes(), 8192u);
}

TEST(PoolLayoutTest, ASmallerAlignmentIsRaisedToTheDefault) {
  PoolLayout layout;
  ASSERT_TRUE(layout.Reserve("a", 3, 4).ok());
  EXPECT_EQ(*layout.Reserve("b", 3, 4), PoolLayout::kDefaultAlignment);
}

TEST(PoolLayoutTest, AnEmptyRegionTakesNoBytes) {
  PoolLayout layout;
  ASSERT_TRUE(layout.Reserve("a", 256).ok());
  EXPECT_EQ(*layout.Reserve("empty", 0), 256u);
  EXPECT_EQ(*layout.Reserve("b", 1), 256u);
  EXPECT_EQ(layout.total_bytes(), 257u);
}

TEST(PoolLayoutTest, AnAlignmentThatIsNotAPowerOfTwoIsAnError) {
  PoolLayout layout;
  auto offset = layout.Reserve("scratch", 16, 384);
  ASSERT_FALSE(offset.ok());
  EXPECT_THAT(offset.status().message(), HasSubstr("'scratch'"));
  EXPECT_THAT(offset.status().message(), HasSubstr("384"));
  EXPECT_FALSE(layout.Reserve("zero", 16, 0).ok());
}

TEST(PoolLayoutTest, OverflowIsAnErrorAndLeavesTheLayoutAsItWas) {
  PoolLayout layout;
  ASSERT_TRUE(layout.Reserve("weights", 100).ok());
  auto offset = layout.Reserve("kv", UINT64_MAX - 10);
  ASSERT_FALSE(offset.ok());
  EXPECT_EQ(offset.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(offset.status().message(), HasSubstr("'kv'"));
  EXPECT_EQ(layout.total_bytes(), 100u);
}

TEST(PoolLayoutTest, AnAlignedOffsetPastTheAddressSpaceIsAnError) {
  PoolLayout layout;
  const uint64_t half = uint64_t{1} << 63;
  EXPECT_EQ(*layout.Reserve("first", 1, half), 0u);
  EXPECT_EQ(*layout.Reserve("second", 1, half), half);
  EXPECT_FALSE(layout.Reserve("third", 1, half).ok());
  EXPECT_EQ(layout.total_bytes(), half + 1);
}

TEST(PoolLayoutTest, TheDescriptionListsEveryRegion) {
  PoolLayout layout;
  ASSERT_TRUE(layout.Reserve("weights", 3 << 20).ok());
  ASSERT_TRUE(layout.Reserve("kv cache", 1 << 19).ok());
  EXPECT_EQ(layout.Describe(), "weights 3.0 MiB, kv cache 0.5 MiB");
}

TEST(PoolLayoutTest, TheDescriptionSumsConsecutiveRegionsOfOneName) {
  PoolLayout layout;
  ASSERT_TRUE(layout.Reserve("weights", 1 << 20).ok());
  ASSERT_TRUE(layout.Reserve("weights", 1 << 19).ok());
  ASSERT_TRUE(layout.Reserve("arena", 1 << 20).ok());
  ASSERT_TRUE(layout.Reserve("weights", 1 << 20).ok());
  EXPECT_EQ(layout.Describe(), "weights 1.5 MiB, arena 1.0 MiB, weights 1.0 MiB");
}

}  // namespace
}  // namespace kvjit::cuda
