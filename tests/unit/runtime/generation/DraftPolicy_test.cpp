#include "runtime/generation/Speculation.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace kvjit::runtime {
namespace {

// A CPU's step costs (CpuStepRunner::decode_step_cost): two tokens cost
// 1.55 steps, three and four about 1.9, each further group of four 1.1.
double CpuStepCost(int64_t tokens) {
  static constexpr double kCost[] = {1.0, 1.0, 1.55, 1.85, 1.9};
  return tokens <= 4 ? kCost[tokens] : 1.9 + 1.1 * static_cast<double>((tokens - 1) / 4);
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
    ASSERT_EQ(policy.DraftLength(3, cost), 3) << "step " << step;
    policy.Record(3, 3);
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

// A draft pays only while enough of it is likely to be kept: at a = 0.56
// three tokens still do (2.06 tokens for 1.9 steps), at a = 0.42 no length
// beats a plain step.
TEST(DraftPolicyTest, OnACpuADraftMostlyRejectedIsNotWorthIt) {
  DraftPolicy policy;
  const auto cost = CpuStepCost;
  EXPECT_EQ(policy.DraftLength(3, cost), 3);
  policy.Record(3, 1);  // a = 0.75: the taken token keeps 1, the replaced one takes a quarter
  EXPECT_EQ(policy.DraftLength(3, cost), 3);
  policy.Record(3, 0);  // a = 0.56
  EXPECT_EQ(policy.DraftLength(3, cost), 3);
  policy.Record(3, 0);  // a = 0.42
  EXPECT_EQ(policy.DraftLength(3, cost), 0);
  EXPECT_EQ(policy.DraftLength(3, cost), 1);  // the try after a rest of one step
  policy.Record(1, 1);                        // a = 0.57: taken
  EXPECT_EQ(policy.DraftLength(3, cost), 3);
}

// Tries the target rejects double the rest before the next, up to
// kMaxRest; taken tries make it one step again, and bring drafting back.
TEST(DraftPolicyTest, RejectedTriesDoubleTheRestUpToTheLimit) {
  DraftPolicy policy;
  const auto cost = CpuStepCost;
  policy.Record(3, 0);
  policy.Record(3, 0);
  policy.Record(3, 0);  // a = 0.42
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
  // a is 0.08 now: taken tries a step apart bring it back within a rest of
  // 16 and a few tries.
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
  policy.Record(2, 0);
  policy.Record(2, 0);  // a = 0.42
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

// After a rest, the draft tried is the shortest that pays if taken whole
// with probability 0.6: one token alone in a CPU step (1.6 tokens for 1.55
// steps), none in a batch whose next group of four tokens costs 3.3 of the
// sample's share, and one where another sample's drafts have already paid
// for the group.
TEST(DraftPolicyTest, ATryWaitsForAStepWhereItIsLikelyToPay) {
  DraftPolicy policy;
  policy.Record(3, 0);
  policy.Record(3, 0);  // a = 0.56
  const auto crowded = [](int64_t tokens) { return tokens == 1 ? 1.0 : 3.3; };
  const auto group_paid_for = [](int64_t) { return 1.0; };
  const auto cpu_alone = CpuStepCost;
  EXPECT_EQ(policy.DraftLength(3, crowded), 0);
  for (int step = 0; step < 5; ++step) ASSERT_EQ(policy.DraftLength(3, crowded), 0);
  EXPECT_EQ(policy.DraftLength(3, group_paid_for), 1);
  policy.Record(1, 0);
  for (int step = 0; step < 2; ++step) ASSERT_EQ(policy.DraftLength(3, cpu_alone), 0);
  EXPECT_EQ(policy.DraftLength(3, cpu_alone), 1);
}

}  // namespace
}  // namespace kvjit::runtime
