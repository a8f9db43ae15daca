#include "runtime/cuda/DecodePadding.h"

#include "runtime/exec/StepValidation.h"
#include "runtime/schema/StepContract.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::cuda {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

// Three sequences decoding one token each, with block tables of two columns.
runtime::StepInputs ThreeSequenceDecode() {
  runtime::StepInputs step;
  step.tokens() = {11, 12, 13};
  step.positions() = {20, 5, 31};
  step.seq_starts() = {0, 1, 2, 3};
  step.context_lens() = {21, 6, 32};
  step.slot_mapping() = {4 * 16 + 4, 7 * 16 + 5, 9 * 16 + 15};
  step.block_tables() = {3, 4, 7, 0, 8, 9};
  step.max_blocks = 2;
  step.logits_rows() = {0, 1, 2};
  return step;
}

TEST(DecodeBucketsTest, BucketsArePowersOfTwoUpToTheLargest) {
  EXPECT_THAT(DecodeBuckets(64).buckets(), ElementsAre(1, 2, 4, 8, 16, 32, 64));
  EXPECT_THAT(DecodeBuckets(48).buckets(), ElementsAre(1, 2, 4, 8, 16, 32));
  EXPECT_TRUE(DecodeBuckets(0).buckets().empty());
}

TEST(DecodeBucketsTest, APureDecodeStepTakesTheSmallestBucketThatHoldsIt) {
  const DecodeBuckets buckets(64);
  runtime::StepInputs step = ThreeSequenceDecode();
  EXPECT_EQ(buckets.BucketFor(step, 8), 4);
  step.tokens().resize(1);
  step.positions().resize(1);
  step.slot_mapping().resize(1);
  step.seq_starts() = {0, 1};
  step.context_lens() = {21};
  step.block_tables() = {3, 4};
  step.logits_rows() = {0};
  EXPECT_EQ(buckets.BucketFor(step, 8), 1);
}

TEST(DecodeBucketsTest, PrefillAndMixedStepsHaveNoBucket) {
  const DecodeBuckets buckets(64);
  runtime::StepInputs step = ThreeSequenceDecode();
  step.seq_starts() = {0, 0, 2, 3};  // two tokens for the second sequence, none for the first
  EXPECT_EQ(buckets.BucketFor(step, 8), std::nullopt);
  step = ThreeSequenceDecode();
  step.tokens().push_back(14);
  EXPECT_EQ(buckets.BucketFor(step, 8), std::nullopt);
}

TEST(DecodeBucketsTest, StepsBeyondTheLargestBucketOrTheColumnsHaveNoBucket) {
  EXPECT_EQ(DecodeBuckets(2).BucketFor(ThreeSequenceDecode(), 8), std::nullopt);
  EXPECT_EQ(DecodeBuckets(0).BucketFor(ThreeSequenceDecode(), 8), std::nullopt);
  EXPECT_EQ(DecodeBuckets(64).BucketFor(ThreeSequenceDecode(), 1), std::nullopt);
}

TEST(PadDecodeStepTest, RealSequencesKeepTheirInputsAndPaddingUsesThePaddingBlock) {
  const int32_t padding_block = 10;
  const runtime::StepInputs padded =
      PadDecodeStep(ThreeSequenceDecode(), /*bucket=*/4, /*columns=*/3, padding_block, 16);
  EXPECT_THAT(padded.tokens(), ElementsAre(11, 12, 13, 0));
  EXPECT_THAT(padded.positions(), ElementsAre(20, 5, 31, 0));
  EXPECT_THAT(padded.seq_starts(), ElementsAre(0, 1, 2, 3, 4));
  EXPECT_THAT(padded.context_lens(), ElementsAre(21, 6, 32, 1));
  EXPECT_THAT(padded.slot_mapping(), ElementsAre(4 * 16 + 4, 7 * 16 + 5, 9 * 16 + 15, 160));
  EXPECT_EQ(padded.max_blocks, 3);
  EXPECT_THAT(padded.block_tables(), ElementsAreArray({3, 4, 10, 7, 0, 10, 8, 9, 10, 10, 10, 10}));
  EXPECT_THAT(padded.logits_rows(), ElementsAre(0, 1, 2, 3));
}

TEST(PadDecodeStepTest, FewerLogitsRowsKeepTheirOrderFirst) {
  runtime::StepInputs step = ThreeSequenceDecode();
  step.logits_rows() = {2};
  const runtime::StepInputs padded = PadDecodeStep(step, 4, 2, 10, 16);
  EXPECT_THAT(padded.logits_rows(), ElementsAre(2, 1, 2, 3));
}

// Padding follows the step contract's table: every input takes the size its
// dims give at the bucket's sizes, and the padded step is one a runner
// accepts whose pool holds the padding block.
TEST(PadDecodeStepTest, EveryInputTakesItsSizeAtTheBucketAndTheStepStaysValid) {
  const int32_t padding_block = 10;
  const runtime::StepInputs padded =
      PadDecodeStep(ThreeSequenceDecode(), /*bucket=*/8, /*columns=*/4, padding_block, 16);
  const runtime::StepSizes bucket_sizes = {8, 8, 8, 4};
  for (const kvx::StepInputSpec& spec : kvx::kStepInputs) {
    SCOPED_TRACE(spec.name);
    EXPECT_EQ(static_cast<int64_t>(padded[spec.input].size()),
              runtime::StepInputElements(spec.input, bucket_sizes));
  }
  runtime::StepLimits limits;
  limits.max_tokens = 8;
  limits.max_columns = 4;
  limits.vocab_size = 100;
  limits.num_blocks = padding_block + 1;
  limits.block_size = 16;
  EXPECT_TRUE(runtime::ValidateStep(padded, limits).ok());
}

}  // namespace
}  // namespace kvjit::cuda
