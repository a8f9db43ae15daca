#include "runtime/generation/Speculation.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace kvjit::runtime {
namespace {

// A CPU's step costs (CpuStepRunner::decode_step_cost's shape): the second
// token costs most of a step, the later ones less each.
double CpuStepCost(int64_t tokens) {
  static constexpr double kCost[] = {1.0, 1.0, 1.8, 2.2, 2.6};
  return tokens <= 4 ? kCost[tokens] : 2.6 + 0.4 * static_cast<double>(tokens - 4);
}

// Each token past the first costs a quarter of a one-token step.
double QuarterPerToken(int64_t tokens) { return 1.0 + 0.25 * static_cast<double>(tokens - 1); }

// A GPU's, by the reasoning of StepRunner's default: a few more tokens cost
// nothing.
double FreeTokens(int64_t) { return 1.0; }

TEST(DraftPolicyTest, ASequenceStartsDraftingAsMuchAsThereIsRoomFor) {
  DraftPolicy policy;
  const auto cost = CpuStepCost;
  EXPECT_EQ(policy.DraftLength(3, cost), 3);
  EXPECT_EQ(policy.DraftLength(1, cost), 1);
  EXPECT_EQ(policy.DraftLength(0, cost), 0);
}

TEST(DraftPolicyTest, DraftsTheTargetTakesKeepTheirLength) {
  DraftPolicy policy;
  const auto cost = CpuStepCost;
  for (int step = 0; step < 20; ++step) {
    ASSERT_EQ(policy.DraftLength(4, cost), 4) << "step " << step;
    policy.Record(4, 4);
  }
}

// The length that gives the most tokens per unit of time: at a = 0.75
// three (2.73 tokens for 1.75 steps beats 2.31 for 1.5 and 3.05 for 2), at
// a = 0.42 one (1.42 tokens for 1.25 steps beats 1.6 for 1.5).
TEST(DraftPolicyTest, TheLengthFollowsTheEstimatedAcceptance) {
  DraftPolicy policy;
  const auto cost = QuarterPerToken;
  EXPECT_EQ(policy.DraftLength(4, cost), 4);
  policy.Record(4, 0);  // a = 0.75
  EXPECT_EQ(policy.DraftLength(4, cost), 3);
  EXPECT_EQ(policy.DraftLength(2, cost), 2);  // never past the room given
  policy.Record(3, 0);
  policy.Record(3, 0);  // a = 0.42
  EXPECT_EQ(policy.DraftLength(4, cost), 1);
}

// Where the second token costs 0.8 of a step, a draft pays only when most of
// it is likely to be kept: at a = 0.75 three tokens still do (2.73 tokens
// for 2.6 steps), at a = 0.56 no length beats a plain step.
TEST(DraftPolicyTest, OnACpuADraftMostlyRejectedIsNotWorthIt) {
  DraftPolicy policy;
  const auto cost = CpuStepCost;
  EXPECT_EQ(policy.DraftLength(3, cost), 3);
  policy.Record(3, 1);  // a = 0.75: the taken token keeps 1, the replaced one takes a quarter
  EXPECT_EQ(policy.DraftLength(3, cost), 3);
  policy.Record(3, 0);  // a = 0.56
  EXPECT_EQ(policy.DraftLength(3, cost), 0);
  EXPECT_EQ(policy.DraftLength(3, cost), 1);  // the try after a rest of one step
  policy.Record(1, 1);                  // a = 0.67: taken, but not yet worth a draft
  EXPECT_EQ(policy.DraftLength(3, cost), 0);
  EXPECT_EQ(policy.DraftLength(3, cost), 1);  // the rest stays one step
  policy.Record(1, 1);                  // a = 0.75
  EXPECT_EQ(policy.DraftLength(3, cost), 3);
}

// Tries the target rejects double the rest before the next, up to
// kMaxRest; taken tries make it one step again, and bring drafting back.
TEST(DraftPolicyTest, RejectedTriesDoubleTheRestUpToTheLimit) {
  DraftPolicy policy;
  const auto cost = CpuStepCost;
  policy.Record(3, 0);
  policy.Record(3, 0);  // a = 0.56
  std::vector<int> rests;
  for (int attempt = 0; attempt < 6; ++attempt) {
    int rested = 0;
    int64_t length;
    while ((length = policy.DraftLength(3, cost)) == 0) ++rested;
    ASSERT_EQ(length, 1);
    rests.push_back(rested);
    policy.Record(1, 0);
  }
  EXPECT_EQ(rests, (std::vector<int>{1, 2, 4, 8, 16, 16}));
  // a is 0.1 now: taken tries a step apart bring it back within a rest of
  // 16 and five tries.
  int steps = 0;
  int64_t length = 0;
  while (length < 3) {
    length = policy.DraftLength(3, cost);
    ++steps;
    if (length > 0) policy.Record(length, length);
  }
  EXPECT_LE(steps, 16 + 1 + 4 * 2 + 1);
}

// A try that finds no draft (the n-gram lookup had nothing) is no evidence:
// the next rest does not grow.
TEST(DraftPolicyTest, ATryWithoutADraftDoesNotLengthenTheRest) {
  DraftPolicy policy;
  const auto cost = CpuStepCost;
  policy.Record(2, 0);
  policy.Record(2, 0);  // a = 0.56
  EXPECT_EQ(policy.DraftLength(3, cost), 0);
  EXPECT_EQ(policy.DraftLength(3, cost), 1);
  policy.Record(0, 0);
  EXPECT_EQ(policy.DraftLength(3, cost), 0);
  EXPECT_EQ(policy.DraftLength(3, cost), 1);
}

// Where a verify step's extra tokens cost nothing, any draft pays.
TEST(DraftPolicyTest, FreeVerificationAlwaysDraftsInFull) {
  DraftPolicy policy;
  const auto cost = FreeTokens;
  for (int step = 0; step < 10; ++step) {
    ASSERT_EQ(policy.DraftLength(3, cost), 3) << "step " << step;
    policy.Record(3, 0);
  }
}

// A draft model whose every token costs 0.8 of the target's step (a
// self-draft of most of the target's layers) cannot pay on a CPU even when
// the target takes every draft: it is never asked, not even tried.
TEST(DraftPolicyTest, DraftsThatCouldNeverPayAreNeverAskedFor) {
  DraftPolicy policy;
  const auto cost = [](int64_t tokens) {
    return CpuStepCost(tokens) + 0.8 * static_cast<double>(tokens - 1);
  };
  for (int step = 0; step < 40; ++step) ASSERT_EQ(policy.DraftLength(3, cost), 0) << "step " << step;
  // A cheaper draft of the same acceptance is.
  const auto cheap = [](int64_t tokens) {
    return CpuStepCost(tokens) + 0.2 * static_cast<double>(tokens - 1);
  };
  EXPECT_EQ(policy.DraftLength(3, cheap), 3);
}

}  // namespace
}  // namespace kvjit::runtime
