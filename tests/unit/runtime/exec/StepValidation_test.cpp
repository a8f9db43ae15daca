#include "runtime/exec/StepValidation.h"

#include <functional>
#include <string>

#include "absl/strings/str_cat.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::runtime {
namespace {

using ::testing::HasSubstr;

constexpr StepLimits kLimits = {/*max_tokens=*/8, /*max_columns=*/4, /*vocab_size=*/100,
                                /*num_blocks=*/10, /*block_size=*/4};

// A prefill of 3 tokens for one sequence and a decode token for another.
StepInputs MixedStep() {
  StepInputs step;
  step.tokens() = {1, 2, 3, 4};
  step.positions() = {0, 1, 2, 5};
  step.seq_starts() = {0, 3, 4};
  step.context_lens() = {3, 6};
  step.slot_mapping() = {8, 9, 10, 4 * 4 + 1};
  step.block_tables() = {2, 0, 3, 4};
  step.max_blocks = 2;
  step.logits_rows() = {2, 3};
  return step;
}

// Applies `change` to the mixed step and returns the validation's message.
std::string ErrorAfter(const std::function<void(StepInputs&)>& change) {
  StepInputs step = MixedStep();
  change(step);
  absl::Status status = ValidateStep(step, kLimits);
  return status.ok() ? "OK" : std::string(status.message());
}

TEST(StepValidationTest, AWellFormedStepPasses) {
  EXPECT_TRUE(ValidateStep(MixedStep(), kLimits).ok());
}

TEST(StepValidationTest, SizesMustFitTheDeviceBuffers) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.tokens().clear(); }), HasSubstr("1 to 8 tokens, got 0"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.tokens().resize(9, 1); }), HasSubstr("got 9"));
  EXPECT_THAT(ErrorAfter([](auto& s) {
                s.max_blocks = 5;
                s.block_tables().resize(10, 0);
              }),
              HasSubstr("at most 4 blocks each"));
}

// S sequences of one new token each, sequence s at position 0 of block s,
// with block tables of `columns` columns.
StepInputs DecodeStep(int64_t sequences, int64_t columns) {
  StepInputs step;
  step.seq_starts() = {0};
  step.max_blocks = columns;
  for (int32_t s = 0; s < sequences; ++s) {
    step.tokens().push_back(s);
    step.positions().push_back(0);
    step.seq_starts().push_back(s + 1);
    step.context_lens().push_back(1);
    step.slot_mapping().push_back(s * kLimits.block_size);
    step.block_tables().push_back(s);
    step.block_tables().resize((s + 1) * columns, 0);
    step.logits_rows().push_back(s);
  }
  return step;
}

bool CountsAStepSize(kvx::StepInput input) {
  return input == kvx::InputCounting(kvx::DimKind::Tokens) ||
         input == kvx::InputCounting(kvx::DimKind::LogitsRows) ||
         input == kvx::InputCounting(kvx::DimKind::Sequences);
}

// The sizes the step contract's table gives each input: exactly those pass,
// one value more or fewer fails, naming the input. The inputs that count T,
// L and S give their size to the others, so their bounds are the limits'
// (SizesAtTheLimitsPassAndOnePastFails).
TEST(StepValidationTest, EveryInputHasExactlyTheSizeOfItsDims) {
  const StepInputs mixed = MixedStep();
  for (const kvx::StepInputSpec& spec : kvx::kStepInputs) {
    SCOPED_TRACE(spec.name);
    EXPECT_EQ(static_cast<int64_t>(mixed[spec.input].size()),
              StepInputElements(spec.input, SizesOf(mixed)));
    if (CountsAStepSize(spec.input)) continue;
    const size_t elements = mixed[spec.input].size();
    EXPECT_THAT(ErrorAfter([&](auto& s) { s[spec.input].push_back(0); }),
                HasSubstr(absl::StrCat("disagree in size: ", spec.name, " has ", elements + 1,
                                       " values, not the ", elements)));
    EXPECT_THAT(ErrorAfter([&](auto& s) { s[spec.input].pop_back(); }),
                HasSubstr(absl::StrCat("disagree in size: ", spec.name, " has ", elements - 1,
                                       " values, not the ", elements)));
  }
}

TEST(StepValidationTest, SizesAtTheLimitsPassAndOnePastFails) {
  const int64_t most = kLimits.max_tokens, columns = kLimits.max_columns;
  EXPECT_TRUE(ValidateStep(DecodeStep(most, columns), kLimits).ok());

  EXPECT_THAT(std::string(ValidateStep(DecodeStep(most + 1, columns), kLimits).message()),
              HasSubstr("1 to 8 tokens, got 9"));
  EXPECT_THAT(std::string(ValidateStep(DecodeStep(most, columns + 1), kLimits).message()),
              HasSubstr("at most 4 blocks each, got 8 of 5"));

  StepInputs more_rows = DecodeStep(most, columns);
  more_rows.logits_rows().push_back(0);
  EXPECT_THAT(std::string(ValidateStep(more_rows, kLimits).message()),
              HasSubstr("1 to 8 logits rows, got 9"));

  // One more sequence than tokens: a sequence without new tokens.
  StepInputs more_sequences = DecodeStep(most, columns);
  more_sequences.seq_starts().push_back(static_cast<int32_t>(most));
  more_sequences.context_lens().push_back(1);
  more_sequences.block_tables().resize((most + 1) * columns, 0);
  EXPECT_THAT(std::string(ValidateStep(more_sequences, kLimits).message()),
              HasSubstr("1 to 8 sequences of at most 4 blocks each, got 9"));
}

TEST(StepValidationTest, SizesMustAgree) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.positions().pop_back(); }), HasSubstr("disagree in size"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.block_tables().pop_back(); }),
              HasSubstr("disagree in size"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.seq_starts().push_back(4); }),
              HasSubstr("disagree in size"));
}

TEST(StepValidationTest, IndicesMustStayInRange) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.tokens()[1] = 100; }),
              HasSubstr("id 100, outside the vocabulary of 100"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.slot_mapping()[0] = 40; }),
              HasSubstr("slot 40, outside the pool's 40 slots"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.block_tables()[2] = 10; }),
              HasSubstr("sequence 1 block 0 is 10"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.logits_rows()[0] = 4; }), HasSubstr("logits row 4"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.positions()[3] = 6; }),
              HasSubstr("position 6, outside its context 0..5"));
}

TEST(StepValidationTest, ColumnsPastTheContextAreNotRead) {
  // Sequence 0's context of 3 lies in its first block; its second column
  // may hold anything.
  EXPECT_EQ(ErrorAfter([](auto& s) { s.block_tables()[1] = -1; }), "OK");
}

TEST(StepValidationTest, SequenceBoundsMustRunFromZeroToTheTokens) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.seq_starts() = {0, 3, 3}; }), HasSubstr("run from 0 to 4"));
  EXPECT_THAT(ErrorAfter([](auto& s) {
                s.seq_starts() = {0, 5, 4};
              }),
              HasSubstr("decreases at sequence 0"));
}

TEST(StepValidationTest, AContextMustHoldTheNewTokensAndFitTheTable) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.context_lens()[0] = 2; }),
              HasSubstr("sequence 0 has context length 2"));
  EXPECT_THAT(ErrorAfter([](auto& s) { s.context_lens()[1] = 9; }),
              HasSubstr("sequence 1 has context length 9, outside 1..8"));
}

TEST(StepValidationTest, LogitsRowsMustBeAmongTheTokens) {
  EXPECT_THAT(ErrorAfter([](auto& s) { s.logits_rows().clear(); }),
              HasSubstr("1 to 4 logits rows, got 0"));
}

}  // namespace
}  // namespace kvjit::runtime
