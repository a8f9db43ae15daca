// BatchScheduler's hooks for serving: the token observer sees every token
// as it is drawn, with the logits it came from, and can stop a sample; the
// load accessors count running and waiting sequences; beam search runs
// alone over the scheduler's pool.

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/generation/BeamSearch.h"
#include "runtime/generation/BatchScheduler.h"
#include "tests/unit/runtime/generation/FakeStepRunner.h"

namespace kvjit::runtime {
namespace {

using ::kvjit::testing::FakeLogits;
using ::kvjit::testing::FakeStepRunner;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int64_t kVocab = 16;
constexpr int64_t kBlockSize = 4;
constexpr int64_t kContext = 64;

BatchScheduler MakeScheduler(StepRunner& runner, int64_t max_batch_tokens = 8) {
  BatchSchedulerOptions options;
  options.max_batch_tokens = max_batch_tokens;
  options.context_length = kContext;
  auto scheduler = BatchScheduler::Create(runner, options);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  return *std::move(scheduler);
}

sampling::SamplingParams Seeded(uint64_t seed) {
  sampling::SamplingParams params;
  params.seed = seed;
  return params;
}

void RunToIdle(BatchScheduler& scheduler) {
  for (int step = 0; step < 1000 && !scheduler.Idle(); ++step) {
    ASSERT_TRUE(scheduler.Step().ok());
  }
  ASSERT_TRUE(scheduler.Idle());
}

TEST(SchedulerStreamingTest, ObserverSeesEveryTokenOfEverySampleInOrder) {
  FakeStepRunner runner(64, kBlockSize, kVocab, 64);
  BatchScheduler scheduler = MakeScheduler(runner);
  // Per (request, sample): the tokens seen, each checked against the logits
  // of its context, which the fake model makes a function of the tokens.
  std::map<std::pair<RequestId, int64_t>, std::vector<int32_t>> seen;
  std::map<RequestId, std::vector<int32_t>> prompts;
  int64_t logits_mismatches = 0;
  scheduler.SetTokenObserver([&](const SampledToken& token) {
    std::vector<int32_t>& tokens = seen[{token.request, token.sample_index}];
    std::vector<int32_t> context = prompts[token.request];
    context.insert(context.end(), tokens.begin(), tokens.end());
    if (std::vector<float>(token.logits.begin(), token.logits.end()) != FakeLogits(context, kVocab)) {
      ++logits_mismatches;
    }
    tokens.push_back(token.token);
    return true;
  });
  const std::vector<int32_t> first_prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const std::vector<int32_t> second_prompt = {3, 1, 4};
  auto first = scheduler.Submit(first_prompt, Seeded(7), 9, {}, /*num_samples=*/3);
  auto second = scheduler.Submit(second_prompt, Seeded(8), 12, {});
  ASSERT_TRUE(first.ok() && second.ok());
  prompts[*first] = first_prompt;
  prompts[*second] = second_prompt;
  RunToIdle(scheduler);

  EXPECT_EQ(logits_mismatches, 0);
  auto first_result = scheduler.TakeResult(*first);
  auto second_result = scheduler.TakeResult(*second);
  ASSERT_TRUE(first_result.ok() && second_result.ok());
  ASSERT_EQ(first_result->samples.size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_THAT(seen[std::make_pair(*first, i)], ElementsAreArray(first_result->samples[i].tokens))
        << i;
  }
  EXPECT_THAT(seen[std::make_pair(*second, int64_t{0})],
              ElementsAreArray(second_result->samples[0].tokens));
  EXPECT_EQ(seen.size(), 4u);
}

TEST(SchedulerStreamingTest, ObserverStopsOneSampleAndFreesItsBlocks) {
  FakeStepRunner runner(64, kBlockSize, kVocab, 64);
  BatchScheduler scheduler = MakeScheduler(runner);
  std::vector<int32_t> tokens_seen_by_sample(2, 0);
  scheduler.SetTokenObserver([&](const SampledToken& token) {
    // Sample 1 stops at its third token, as a stop string would stop it.
    return ++tokens_seen_by_sample[token.sample_index] < 3 || token.sample_index != 1;
  });
  auto id = scheduler.Submit({1, 2, 3, 4, 5}, Seeded(3), 10, {}, /*num_samples=*/2);
  ASSERT_TRUE(id.ok());
  RunToIdle(scheduler);
  auto result = scheduler.TakeResult(*id);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->samples[0].tokens.size(), 10u);
  EXPECT_EQ(result->samples[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(result->samples[1].tokens.size(), 3u);
  EXPECT_EQ(result->samples[1].finish_reason, FinishReason::kStopped);
  EXPECT_EQ(FinishReasonName(FinishReason::kStopped), "stopped");
  EXPECT_EQ(scheduler.kv_blocks().counters().blocks_in_use, 0);
}

TEST(SchedulerStreamingTest, StopTokenWinsOverAnObserverThatStops) {
  FakeStepRunner runner(64, kBlockSize, kVocab, 64);
  BatchScheduler scheduler = MakeScheduler(runner);
  scheduler.SetTokenObserver([](const SampledToken&) { return false; });
  // Every token is a stop token, so the first one ends the sample with kEos.
  std::vector<int32_t> every_token;
  for (int32_t id = 0; id < kVocab; ++id) every_token.push_back(id);
  auto id = scheduler.Submit({1, 2, 3}, Seeded(1), 5, every_token);
  ASSERT_TRUE(id.ok());
  RunToIdle(scheduler);
  auto result = scheduler.TakeResult(*id);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->samples[0].finish_reason, FinishReason::kEos);
}

TEST(SchedulerStreamingTest, CountsRunningAndWaitingSequences) {
  // A token budget of 4 admits one 4-token prompt per step.
  FakeStepRunner runner(64, kBlockSize, kVocab, 64);
  BatchScheduler scheduler = MakeScheduler(runner, /*max_batch_tokens=*/4);
  for (int32_t first = 1; first <= 3; ++first) {
    ASSERT_TRUE(scheduler.Submit({first, 2, 3, 4}, Seeded(first), 20, {}).ok());
  }
  EXPECT_EQ(scheduler.num_waiting_sequences(), 3);
  EXPECT_EQ(scheduler.num_running_sequences(), 0);
  ASSERT_TRUE(scheduler.Step().ok());
  EXPECT_EQ(scheduler.num_running_sequences(), 1);
  EXPECT_EQ(scheduler.num_waiting_sequences(), 2);
}

TEST(SchedulerStreamingTest, BeamSearchRunsAloneOverTheSchedulersPool) {
  FakeStepRunner runner(64, kBlockSize, kVocab, 64);
  BatchScheduler scheduler = MakeScheduler(runner);
  BeamSearchParams params;
  params.num_beams = 3;
  params.num_return_sequences = 2;
  params.max_new_tokens = 6;

  // Cached blocks of an earlier request stay in the pool while the search runs.
  auto earlier = scheduler.Submit({5, 6, 7, 8, 9, 10, 11, 12}, Seeded(1), 4, {});
  ASSERT_TRUE(earlier.ok());
  auto refused = scheduler.RunBeamSearch({1, 2, 3}, params);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("beam search runs alone"));
  RunToIdle(scheduler);
  ASSERT_TRUE(scheduler.TakeResult(*earlier).ok());

  auto shared = scheduler.RunBeamSearch({1, 2, 3, 4, 5}, params);
  ASSERT_TRUE(shared.ok()) << shared.status();
  FakeStepRunner alone_runner(64, kBlockSize, kVocab, 64);
  auto alone = BeamSearch(alone_runner, kContext).Search({1, 2, 3, 4, 5}, params);
  ASSERT_TRUE(alone.ok());
  ASSERT_EQ(shared->hypotheses.size(), alone->hypotheses.size());
  for (size_t i = 0; i < alone->hypotheses.size(); ++i) {
    EXPECT_THAT(shared->hypotheses[i].tokens, ElementsAreArray(alone->hypotheses[i].tokens));
  }
  EXPECT_EQ(scheduler.kv_blocks().counters().blocks_in_use, 0);

  // The prefix cache still serves the earlier prompt.
  auto again = scheduler.Submit({5, 6, 7, 8, 9, 10, 11, 12}, Seeded(1), 4, {});
  ASSERT_TRUE(again.ok());
  RunToIdle(scheduler);
  auto again_result = scheduler.TakeResult(*again);
  ASSERT_TRUE(again_result.ok());
  EXPECT_GT(again_result->metrics.prefix_cached_tokens, 0);
}

}  // namespace
}  // namespace kvjit::runtime
