// In-flight batching over stories260K: however requests are packed, chunked
// or preempted, each one's greedy tokens must be those it gets running alone.

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/engine/Generator.h"
#include "runtime/engine/Scheduler.h"
#include "runtime/exec/StepRunner.h"
#include "tests/unit/e2e/CompiledStoriesFixture.h"

namespace kvjit {
namespace {

struct TestRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens;
  int64_t submit_at_step;
};

class SchedulerTest : public CompiledStoriesTest {
 protected:
  std::vector<int32_t> Encode(const std::string& text) {
    auto tokens = tokenizer_->Encode(text, true, false);
    EXPECT_TRUE(tokens.ok()) << tokens.status();
    return *tokens;
  }

  // Six requests of different prompts and lengths, arriving at different
  // steps; the last prompt is longer than one 64-token step.
  std::vector<TestRequest> MixedRequests() {
    std::string long_text;
    for (int i = 0; i < 8; ++i) long_text += "The dog ran to the park and played with a ball. ";
    return {
        {Encode("Once upon a time"), 40, 0},
        {Encode("Lily had a red ball"), 25, 0},
        {Encode("The cat sat"), 30, 2},
        {Encode("One day, Tom went to the big forest to look for his friend"), 20, 3},
        {Encode("Sue"), 35, 7},
        {Encode(long_text), 15, 9},
    };
  }

  static sampling::SamplingParams Greedy() {
    sampling::SamplingParams greedy;
    greedy.temperature = 0;
    return greedy;
  }

  std::vector<std::vector<int32_t>> SoloTokens(const std::vector<TestRequest>& requests) {
    auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/2);
    EXPECT_TRUE(runner.ok()) << runner.status();
    runtime::Generator generator(**runner, model_->config.context_length);
    std::vector<std::vector<int32_t>> solo;
    for (const TestRequest& request : requests) {
      auto result = generator.Generate(request.prompt, Greedy(), request.max_new_tokens,
                                       [](int32_t) { return true; });
      EXPECT_TRUE(result.ok()) << result.status();
      solo.push_back(result.ok() ? result->tokens : std::vector<int32_t>{});
    }
    return solo;
  }

  // Submits each request at its step and steps until every one is done.
  std::vector<runtime::RequestResult> RunBatched(runtime::BatchScheduler& scheduler,
                                                 const std::vector<TestRequest>& requests) {
    std::vector<runtime::RequestId> ids(requests.size());
    size_t submitted = 0;
    for (int64_t step = 0; submitted < requests.size() || !scheduler.Idle(); ++step) {
      for (size_t i = 0; i < requests.size(); ++i) {
        if (requests[i].submit_at_step != step) continue;
        auto id = scheduler.Submit(requests[i].prompt, Greedy(), requests[i].max_new_tokens, {});
        EXPECT_TRUE(id.ok()) << id.status();
        ids[i] = *id;
        ++submitted;
      }
      const absl::Status status = scheduler.Step();
      EXPECT_TRUE(status.ok()) << status;
      if (!status.ok() || step > 10000) break;
    }
    std::vector<runtime::RequestResult> results;
    for (runtime::RequestId id : ids) {
      auto result = scheduler.TakeResult(id);
      EXPECT_TRUE(result.ok()) << result.status();
      results.push_back(result.ok() ? *std::move(result) : runtime::RequestResult{});
    }
    return results;
  }

  void ExpectSoloOutputs(const std::vector<TestRequest>& requests,
                         const std::vector<runtime::RequestResult>& batched) {
    const std::vector<std::vector<int32_t>> solo = SoloTokens(requests);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(batched[i].tokens, solo[i]) << "request " << i;
      EXPECT_EQ(batched[i].finish_reason, sampling::StopReason::kLength) << "request " << i;
      EXPECT_EQ(batched[i].metrics.generated_tokens, requests[i].max_new_tokens);
      EXPECT_GT(batched[i].metrics.peak_kv_blocks, 0);
    }
  }

  absl::StatusOr<runtime::BatchScheduler> MakeScheduler(runtime::CpuStepRunner& runner,
                                                        int64_t max_batch_tokens) {
    runtime::BatchSchedulerOptions options;
    options.max_batch_tokens = max_batch_tokens;
    options.context_length = model_->config.context_length;
    return runtime::BatchScheduler::Create(runner, options);
  }
};

TEST_F(SchedulerTest, BatchedGreedyTokensEqualEachRequestRunAlone) {
  const std::vector<TestRequest> requests = MixedRequests();
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, (*runner)->max_tokens_per_step());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const auto batched = RunBatched(*scheduler, requests);
  ExpectSoloOutputs(requests, batched);
  EXPECT_GE(batched[0].metrics.time_to_first_token_s, 0);
  EXPECT_GT(batched[0].metrics.time_per_output_token_s, 0);
  EXPECT_EQ(scheduler->kv_blocks().num_free_blocks(), scheduler->kv_blocks().num_blocks());
}

TEST_F(SchedulerTest, ChunkedPrefillUnderASmallBudgetGivesTheSameTokens) {
  const std::vector<TestRequest> requests = MixedRequests();
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, /*max_batch_tokens=*/8);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  ExpectSoloOutputs(requests, RunBatched(*scheduler, requests));
  EXPECT_EQ(scheduler->kv_blocks().num_free_blocks(), scheduler->kv_blocks().num_blocks());
}

TEST_F(SchedulerTest, AKvPoolTooSmallForTheBatchPreemptsAndStillFinishesEveryRequest) {
  const std::vector<TestRequest> requests = MixedRequests();
  auto probe = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/1, /*threads=*/1);
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int64_t block_size = (*probe)->block_size();
  // Room for the largest request alone and one block more, far from the
  // whole batch.
  int64_t largest_request_blocks = 0;
  for (const TestRequest& request : requests) {
    const int64_t cached = static_cast<int64_t>(request.prompt.size()) + request.max_new_tokens - 1;
    largest_request_blocks = std::max(largest_request_blocks, (cached + block_size - 1) / block_size);
  }
  auto runner = runtime::CpuStepRunner::Create(*executable_, largest_request_blocks + 1,
                                               /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, (*runner)->max_tokens_per_step());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const auto batched = RunBatched(*scheduler, requests);
  ExpectSoloOutputs(requests, batched);
  int32_t preemptions = 0;
  for (const auto& result : batched) preemptions += result.metrics.preemptions;
  EXPECT_GT(preemptions, 0) << "the pool of " << largest_request_blocks + 1
                            << " blocks was meant to force preemption";
  const kv::KvBlockManager& blocks = scheduler->kv_blocks();
  EXPECT_EQ(blocks.num_free_blocks(), blocks.num_blocks());
  EXPECT_EQ(blocks.counters().blocks_in_use, 0);
  EXPECT_EQ(blocks.num_sequences(), 0);
}

TEST_F(SchedulerTest, AStopTokenEndsTheRequestWithIt) {
  const std::vector<int32_t> prompt = Encode("Once upon a time");
  const std::vector<int32_t> solo = SoloTokens({{prompt, 10, 0}})[0];
  ASSERT_GE(solo.size(), 4u);
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/1);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, (*runner)->max_tokens_per_step());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  auto id = scheduler->Submit(prompt, Greedy(), 10, {solo[3]});
  ASSERT_TRUE(id.ok()) << id.status();
  while (!scheduler->Idle()) ASSERT_TRUE(scheduler->Step().ok());
  auto result = scheduler->TakeResult(*id);
  ASSERT_TRUE(result.ok()) << result.status();
  const auto first_stop = std::find(solo.begin(), solo.end(), solo[3]);
  EXPECT_EQ(result->tokens, std::vector<int32_t>(solo.begin(), first_stop + 1));
  EXPECT_EQ(result->finish_reason, sampling::StopReason::kEos);
  EXPECT_EQ(scheduler->TakeResult(*id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SchedulerTest, APromptLongerThanTheContextIsRefusedNamingTheRequest) {
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/1);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, (*runner)->max_tokens_per_step());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  ASSERT_TRUE(scheduler->Submit(Encode("Once upon a time"), Greedy(), 4, {}).ok());
  const int64_t context = model_->config.context_length;
  auto refused = scheduler->Submit(std::vector<int32_t>(context + 1, 1), Greedy(), 4, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(std::string(refused.status().message())
                .find("request 1: the prompt's " + std::to_string(context + 1) +
                      " tokens leave no room in the context of " + std::to_string(context)),
            std::string::npos)
      << refused.status();
  // The refusal leaves the other request to run.
  while (!scheduler->Idle()) ASSERT_TRUE(scheduler->Step().ok());
  EXPECT_EQ(scheduler->kv_blocks().num_free_blocks(), scheduler->kv_blocks().num_blocks());
}

}  // namespace
}  // namespace kvjit
