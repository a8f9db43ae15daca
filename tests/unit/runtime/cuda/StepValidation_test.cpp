#include "runtime/cuda/StepValidation.h"

#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::cuda {
namespace {

using ::testing::HasSubstr;

constexpr StepLimits kLimits = {/*max_tokens=*/8, /*max_columns=*/4, /*vocab_size=*/100,
                                /*num_blocks=*/10, /*block_size=*/4};

// A prefill of 3 tokens for one sequence and a decode token for another.
runtime::StepInputs MixedStep() {
  runtime::StepInputs step;
  step.tokens = {1, 2, 3, 4};
  step.positions = {0, 1, 2, 5};
  step.seq_starts = {0, 3, 4};
  step.context_lens = {3, 6};
  step.slot_mapping = {8, 9, 10, 4 * 4 + 1};
  step.block_tables = {2, 0, 3, 4};
  step.max_blocks = 2;
  step.logits_rows = {2, 3};
  return step;
}

// Applies `change` to the mixed step and returns the validation's message.
std::string ErrorAfter(const std::function<void(runtime::StepInputs&)>& change) {
  runtime::StepInputs step = MixedStep();
  change(step);
  absl::Status status = ValidateStep(step, kLimits);
  return status.ok() ? "OK" : std::string(status.message());
}

TEST(StepValidationTest, AWellFormedStepPasses) {
  EXPECT_TRUE(ValidateStep(MixedStep(), kLimits).ok());
}

TEST(StepValidationTest, SizesMustFitTheDeviceBuffers) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.tokens.clear(); }), HasSubstr("1 to 8 tokens, got 0"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.tokens.resize(9, 1); }), HasSubstr("got 9"));
  EXPECT_THAT(ErrorAfter([](auto& s) {
                s.max_blocks = 5;
                s.block_tables.resize(10, 0);
              }),
              HasSubstr("at most 4 blocks each"));
}

TEST(StepValidationTest, SizesMustAgree) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.positions.pop_back(); }), HasSubstr("disagree in size"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.block_tables.pop_back(); }),
              HasSubstr("disagree in size"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.seq_starts.push_back(4); }),
              HasSubstr("disagree in size"));
}

TEST(StepValidationTest, IndicesMustStayInRange) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.tokens[1] = 100; }),
              HasSubstr("id 100, outside the vocabulary of 100"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.slot_mapping[0] = 40; }),
              HasSubstr("slot 40, outside the pool's 40 slots"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.block_tables[2] = 10; }),
              HasSubstr("sequence 1 block 0 is 10"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.logits_rows[0] = 4; }), HasSubstr("logits row 4"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.positions[3] = 6; }),
              HasSubstr("position 6, outside its context 0..5"));
}

TEST(StepValidationTest, ColumnsPastTheContextAreNotRead) {
  // Sequence 0's context of 3 lies in its first block; its second column
  // may hold anything.
  EXPECT_EQ(ErrorAfter([](auto& s) { s.block_tables[1] = -1; }), "OK");
}

TEST(StepValidationTest, SequenceBoundsMustRunFromZeroToTheTokens) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.seq_starts = {0, 3, 3}; }), HasSubstr("run from 0 to 4"));
  EXPECT_THAT(ErrorAfter([](auto& s) {
                s.seq_starts = {0, 5, 4};
              }),
              HasSubstr("decreases at sequence 0"));
}

TEST(StepValidationTest, AContextMustHoldTheNewTokensAndFitTheTable) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.context_lens[0] = 2; }),
              HasSubstr("sequence 0 has context length 2"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.context_lens[1] = 9; }),
              HasSubstr("sequence 1 has context length 9, outside 1..8"));
}

TEST(StepValidationTest, LogitsRowsMustBeAmongTheTokens) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.logits_rows.clear(); }),
              HasSubstr("1 to 4 logits rows, got 0"));
}

}  // namespace
}  // namespace kvjit::cuda
