#include "runtime/schema/WeightLayout.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace kvjit::kvx {
namespace {

TEST(WeightLayoutTest, InterleavesEightRowsBlockByBlock) {
  // 16 rows of 3 blocks of 2 bytes; every block's bytes name its row and
  // block (10 * row + block, then its complement).
  constexpr int64_t kRows = 16, kBlocks = 3;
  constexpr uint64_t kBlockBytes = 2;
  std::vector<uint8_t> gguf;
  for (int row = 0; row < kRows; ++row) {
    for (int b = 0; b < kBlocks; ++b) {
      gguf.push_back(static_cast<uint8_t>(10 * row + b));
      gguf.push_back(static_cast<uint8_t>(255 - (10 * row + b)));
    }
  }
  const std::vector<uint8_t> interleaved = InterleaveRows(gguf.data(), kRows, kBlocks, kBlockBytes);
  ASSERT_EQ(interleaved.size(), gguf.size());
  // The group's first bytes: block 0 of rows 0..7, then block 1 of rows 0..7.
  EXPECT_EQ(interleaved[0], 0);
  EXPECT_EQ(interleaved[1], 255);
  EXPECT_EQ(interleaved[2], 10);
  EXPECT_EQ(interleaved[14], 70);
  EXPECT_EQ(interleaved[16], 1);
  for (int64_t row = 0; row < kRows; ++row) {
    for (int64_t b = 0; b < kBlocks; ++b) {
      const int64_t group_start = row / 8 * 8 * kBlocks * kBlockBytes;
      const int64_t at = group_start + (b * 8 + row % 8) * kBlockBytes;
      EXPECT_EQ(interleaved[at], 10 * row + b) << "row " << row << " block " << b;
      EXPECT_EQ(interleaved[at + 1], 255 - (10 * row + b)) << "row " << row << " block " << b;
    }
  }
}

TEST(WeightLayoutTest, GgufHoldsEveryWeight) {
  EXPECT_EQ(LayoutMismatch(WeightLayout::Gguf, StorageType::F32, {3}), "");
  EXPECT_EQ(LayoutMismatch(WeightLayout::Gguf, StorageType::Q6_K, {7, 256}), "");
}

TEST(WeightLayoutTest, InterleavedHoldsBlockMatricesOfWholeGroups) {
  for (StorageType storage : {StorageType::Q8_0, StorageType::Q4_0, StorageType::Q4_1, StorageType::Q5_0,
                              StorageType::Q5_1}) {
    EXPECT_EQ(LayoutMismatch(WeightLayout::RowsInterleaved8, storage, {64, 96}), "") << EnumNameStorageType(storage);
  }
  EXPECT_EQ(LayoutMismatch(WeightLayout::RowsInterleaved8, StorageType::Q4_K, {64, 256}),
            "RowsInterleaved8 holds 32-element blocks of q8_0, q4_0, q4_1, q5_0 or q5_1, not Q4_K");
  EXPECT_EQ(LayoutMismatch(WeightLayout::RowsInterleaved8, StorageType::F32, {64, 32}),
            "RowsInterleaved8 holds 32-element blocks of q8_0, q4_0, q4_1, q5_0 or q5_1, not F32");
  EXPECT_EQ(LayoutMismatch(WeightLayout::RowsInterleaved8, StorageType::Q4_1, {12, 64}),
            "RowsInterleaved8 needs a positive multiple of 8 rows, not 12");
  EXPECT_EQ(LayoutMismatch(WeightLayout::RowsInterleaved8, StorageType::Q4_1, {64}),
            "RowsInterleaved8 holds matrices, not a tensor of rank 1");
  EXPECT_EQ(LayoutMismatch(WeightLayout::RowsInterleaved8, StorageType::Q8_0, {8, 48}),
            "RowsInterleaved8 needs whole 32-element blocks per row, not 48 columns");
  EXPECT_EQ(LayoutMismatch(static_cast<WeightLayout>(7), StorageType::Q8_0, {8, 32}),
            "layout 7 is unknown to this runtime");
}

}  // namespace
}  // namespace kvjit::kvx
