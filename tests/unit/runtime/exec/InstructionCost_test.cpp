#include "runtime/exec/InstructionCost.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/runtime/exec/SmallProgram.h"

namespace kvjit::runtime {
namespace {

using testing::kHeadDim;
using testing::kHeads;
using testing::kHidden;
using testing::kKvHeads;
using testing::kOutFeatures;

// Three tokens of two sequences: one at positions 5 and 6 (7 cached tokens
// after the step), one at position 9 (10 cached).
const std::vector<int32_t> kPositions = {5, 6, 9};
const std::vector<int32_t> kContextLens = {7, 10};
constexpr StepSizes kSizes = {/*tokens=*/3, /*logits_rows=*/2, /*sequences=*/2, /*max_blocks=*/1};

class InstructionCostTest : public ::testing::Test {
 protected:
  const kvx::Instruction& Instruction(int index) const {
    return *executable().program()->instructions()->Get(index);
  }
  const kvx::Executable& executable() const { return *kvx::GetExecutable(buffer_.data()); }
  InstructionCost Cost(int index) const {
    return CostOf(executable(), Instruction(index), kSizes,
                  AttentionExtentOf(kPositions, kContextLens));
  }

  std::vector<uint8_t> buffer_ = testing::SmallProgram();
};

TEST_F(InstructionCostTest, ALinearReadsItsQuantizedWeightWholeAndMultipliesEveryRow) {
  const InstructionCost cost = Cost(1);
  EXPECT_EQ(cost.weight_bytes, testing::kQ4_1WeightBytes);
  EXPECT_EQ(cost.activation_bytes, (3 * kHidden + 3 * kOutFeatures) * 4);
  EXPECT_EQ(cost.kv_bytes, 0u);
  EXPECT_EQ(cost.flops, 2 * 3 * kHidden * kOutFeatures);
  EXPECT_EQ(cost.bytes(), testing::kQ4_1WeightBytes + (3 * kHidden + 3 * kOutFeatures) * 4);
}

TEST_F(InstructionCostTest, AnEmbeddingReadsOneTableRowPerToken) {
  const InstructionCost cost = Cost(0);
  EXPECT_EQ(cost.weight_bytes, 3 * kHidden * 4);
  EXPECT_EQ(cost.activation_bytes, 3 * 4 + 3 * kHidden * 4);  // the token ids and the rows
  EXPECT_EQ(cost.flops, 0u);
}

TEST_F(InstructionCostTest, AttentionReadsEachSequencesCacheAndPairsEachTokenWithItsKeys) {
  const AttentionExtent extent = AttentionExtentOf(kPositions, kContextLens);
  EXPECT_EQ(extent.query_key_pairs, 6 + 7 + 10);
  EXPECT_EQ(extent.cached_tokens, 7 + 10);
  const InstructionCost cost = Cost(2);
  EXPECT_EQ(cost.weight_bytes, 0u);
  // K and V of 17 cached tokens, 2 f16 KV heads of 16.
  EXPECT_EQ(cost.kv_bytes, 2 * 17 * kKvHeads * kHeadDim * 2);
  // The query and the result, and the i32 inputs: 3 positions, 3 sequence
  // bounds, 2 context lengths, 2 block-table entries.
  EXPECT_EQ(cost.activation_bytes, 2 * 3 * kHeads * kHeadDim * 4 + (3 + 3 + 2 + 2) * 4);
  EXPECT_EQ(cost.flops, kHeads * 23 * (4 * kHeadDim + 3) + 3 * kHeads * kHeadDim);
}

TEST_F(InstructionCostTest, CostsAddUp) {
  InstructionCost sum = Cost(0);
  sum += Cost(1);
  EXPECT_EQ(sum.weight_bytes, Cost(0).weight_bytes + Cost(1).weight_bytes);
  EXPECT_EQ(sum.flops, Cost(1).flops);
  EXPECT_EQ(sum.bytes(), Cost(0).bytes() + Cost(1).bytes());
}

}  // namespace
}  // namespace kvjit::runtime
