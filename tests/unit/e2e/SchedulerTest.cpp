// In-flight batching over stories260K: however requests are packed, chunked,
// preempted, share cached prefixes or fork into samples, each one's tokens
// must be those it gets running alone.

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/generation/Generator.h"
#include "runtime/generation/BatchScheduler.h"
#include "tests/unit/e2e/CompiledStoriesFixture.h"

namespace kvjit {
namespace {

struct TestRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens;
  int64_t submit_at_step;
};

using runtime::FinishReason;

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

  // The blocks one sequence of `request` holds at most.
  static int64_t MostBlocks(const TestRequest& request, int64_t block_size) {
    const int64_t cached = static_cast<int64_t>(request.prompt.size()) + request.max_new_tokens - 1;
    return (cached + block_size - 1) / block_size;
  }

  static sampling::SamplingParams Greedy() {
    sampling::SamplingParams greedy;
    greedy.temperature = 0;
    return greedy;
  }

  std::vector<std::vector<int32_t>> SoloTokens(
      const std::vector<TestRequest>& requests,
      const sampling::SamplingParams& params = Greedy()) {
    const int64_t block_size = executable_->kv_layout().block_size();
    int64_t largest = 1;
    for (const TestRequest& request : requests) largest = std::max(largest, MostBlocks(request, block_size));
    auto runner = runtime::CpuStepRunner::Create(*executable_, largest, /*threads=*/2);
    EXPECT_TRUE(runner.ok()) << runner.status();
    runtime::Generator generator(**runner, model_->config.context_length);
    std::vector<std::vector<int32_t>> solo;
    for (const TestRequest& request : requests) {
      auto result = generator.Generate(request.prompt, params, request.max_new_tokens,
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
      if (!status.ok() || step > 100000) break;
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
      ASSERT_EQ(batched[i].samples.size(), 1u) << "request " << i;
      EXPECT_EQ(batched[i].samples[0].tokens, solo[i]) << "request " << i;
      EXPECT_EQ(batched[i].samples[0].finish_reason, FinishReason::kLength) << "request " << i;
      EXPECT_EQ(batched[i].metrics.generated_tokens, requests[i].max_new_tokens);
      EXPECT_GT(batched[i].metrics.peak_kv_blocks, 0);
    }
  }

  absl::StatusOr<runtime::BatchScheduler> MakeScheduler(runtime::CpuStepRunner& runner,
                                                        int64_t max_batch_tokens,
                                                        bool prefix_caching = true) {
    runtime::BatchSchedulerOptions options;
    options.max_batch_tokens = max_batch_tokens;
    options.context_length = model_->config.context_length;
    options.enable_prefix_caching = prefix_caching;
    return runtime::BatchScheduler::Create(runner, options);
  }

  static void ExpectEveryBlockFree(const runtime::BatchScheduler& scheduler) {
    const kv::KvBlockManager& blocks = scheduler.kv_blocks();
    EXPECT_EQ(blocks.num_free_blocks(), blocks.num_blocks());
    EXPECT_EQ(blocks.counters().blocks_in_use, 0);
    EXPECT_EQ(blocks.counters().blocks_shared, 0);
    EXPECT_EQ(blocks.num_sequences(), 0);
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
  EXPECT_EQ(scheduler->counters().preemptions, preemptions);
  ExpectEveryBlockFree(*scheduler);
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
  EXPECT_EQ(result->samples[0].tokens, std::vector<int32_t>(solo.begin(), first_stop + 1));
  EXPECT_EQ(result->samples[0].finish_reason, FinishReason::kEos);
  EXPECT_EQ(scheduler->TakeResult(*id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SchedulerTest, APromptTokenOutsideTheVocabularyIsRefusedBeforeAnyStep) {
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/1);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, (*runner)->max_tokens_per_step());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  ASSERT_TRUE(scheduler->Submit(Encode("Once upon a time"), Greedy(), 4, {}).ok());
  std::vector<int32_t> prompt = Encode("Once upon a time");
  prompt[2] = static_cast<int32_t>((*runner)->vocab_size());
  auto refused = scheduler->Submit(prompt, Greedy(), 4, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(refused.status().message())
                .find("request 1: prompt token 2 is " + std::to_string((*runner)->vocab_size()) +
                      ", outside the vocabulary"),
            std::string::npos)
      << refused.status();
  // Had it been admitted, its step would fail, and every step after it.
  while (!scheduler->Idle()) ASSERT_TRUE(scheduler->Step().ok());
  EXPECT_EQ(scheduler->kv_blocks().num_free_blocks(), scheduler->kv_blocks().num_blocks());
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

TEST_F(SchedulerTest, AStopTokenOnTheFirstStepEndsTheRequestThere) {
  const std::vector<int32_t> prompt = Encode("Lily had a red ball");
  const std::vector<int32_t> solo = SoloTokens({{prompt, 5, 0}})[0];
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/16, /*threads=*/1);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, (*runner)->max_tokens_per_step());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  auto id = scheduler->Submit(prompt, Greedy(), 5, {solo[0]}, /*num_samples=*/3);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_TRUE(scheduler->Step().ok());
  EXPECT_TRUE(scheduler->Idle());
  auto result = scheduler->TakeResult(*id);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->samples.size(), 3u);
  for (const runtime::SampleResult& sample : result->samples) {
    EXPECT_EQ(sample.tokens, std::vector<int32_t>{solo[0]});
    EXPECT_EQ(sample.finish_reason, FinishReason::kEos);
  }
  ExpectEveryBlockFree(*scheduler);
}

TEST_F(SchedulerTest, APromptThatFillsTheContextGetsOneToken) {
  const int64_t context = model_->config.context_length;
  std::vector<int32_t> prompt = Encode("Once upon a time");
  while (static_cast<int64_t>(prompt.size()) < context - 1) prompt.push_back(prompt[1 + prompt.size() % 4]);
  const std::vector<int32_t> solo = SoloTokens({{prompt, 1, 0}})[0];
  const int64_t block_size = executable_->kv_layout().block_size();
  auto runner = runtime::CpuStepRunner::Create(*executable_, context / block_size + 4, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, (*runner)->max_tokens_per_step());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  // Asking for more is cut to what the context leaves.
  const auto batched = RunBatched(*scheduler, {{prompt, 10, 0}, {Encode("The cat sat"), 8, 0}});
  ASSERT_EQ(solo.size(), 1u);
  EXPECT_EQ(batched[0].samples[0].tokens, solo);
  EXPECT_EQ(batched[0].samples[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(batched[0].metrics.prompt_tokens, context - 1);
  ExpectEveryBlockFree(*scheduler);
}

// Requests whose prompts share a long beginning: with prefix caching the
// later ones adopt the earlier ones' blocks and compute fewer tokens, and
// every output stays what it is without sharing.
TEST_F(SchedulerTest, PrefixCachingReusesBlocksAndChangesNoOutput) {
  std::string preamble;
  for (int i = 0; i < 6; ++i) preamble += "Once upon a time there was a little dog named Max. ";
  std::vector<TestRequest> requests;
  const char* endings[] = {"He liked", "One day", "Max saw a cat", "The sun", "Max ran"};
  for (int i = 0; i < 5; ++i) requests.push_back({Encode(preamble + endings[i]), 12, 3 * i});
  // The same prompt again, after the first has finished and freed its blocks.
  requests.push_back({requests[0].prompt, 12, 40});
  ASSERT_GT(requests[0].prompt.size(), 48u);

  std::vector<std::vector<runtime::RequestResult>> runs;
  std::vector<runtime::SchedulerCounters> counters;
  std::vector<kv::KvBlockCounters> kv_counters;
  for (bool prefix_caching : {false, true}) {
    auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/2);
    ASSERT_TRUE(runner.ok()) << runner.status();
    auto scheduler = MakeScheduler(**runner, /*max_batch_tokens=*/32, prefix_caching);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    runs.push_back(RunBatched(*scheduler, requests));
    counters.push_back(scheduler->counters());
    kv_counters.push_back(scheduler->kv_blocks().counters());
    ExpectEveryBlockFree(*scheduler);
  }
  ExpectSoloOutputs(requests, runs[0]);
  ExpectSoloOutputs(requests, runs[1]);
  EXPECT_EQ(kv_counters[0].prefix_hit_tokens, 0);
  EXPECT_GE(kv_counters[1].prefix_hit_tokens, 5 * 48);
  EXPECT_GT(kv_counters[1].peak_blocks_shared, 0);
  EXPECT_GT(kv_counters[1].blocks_cached, 0);
  EXPECT_EQ(counters[0].computed_tokens - counters[1].computed_tokens,
            kv_counters[1].prefix_hit_tokens);
  int64_t request_hits = 0;
  for (const auto& result : runs[1]) request_hits += result.metrics.prefix_cached_tokens;
  EXPECT_EQ(request_hits, kv_counters[1].prefix_hit_tokens);
  EXPECT_GE(runs[1][5].metrics.prefix_cached_tokens, 48);
}

TEST_F(SchedulerTest, GreedySamplesAllEqualTheGreedyOutputAndShareThePrompt) {
  const std::string sentence = "One day, Tom went to the big forest to look for his friend. ";
  const TestRequest request = {Encode(sentence + sentence + sentence), 30, 0};
  const std::vector<int32_t> solo = SoloTokens({request})[0];
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, (*runner)->max_tokens_per_step());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  auto id = scheduler->Submit(request.prompt, Greedy(), request.max_new_tokens, {}, /*num_samples=*/4);
  ASSERT_TRUE(id.ok()) << id.status();
  while (!scheduler->Idle()) ASSERT_TRUE(scheduler->Step().ok());
  auto result = scheduler->TakeResult(*id);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->samples.size(), 4u);
  for (const runtime::SampleResult& sample : result->samples) {
    EXPECT_EQ(sample.tokens, solo);
    EXPECT_EQ(sample.finish_reason, FinishReason::kLength);
  }
  EXPECT_EQ(result->metrics.generated_tokens, 4 * request.max_new_tokens);
  // The prompt's whole blocks once, then per sample its own tail.
  const int64_t block_size = (*runner)->block_size();
  const int64_t prompt_blocks = static_cast<int64_t>(request.prompt.size()) / block_size;
  EXPECT_LT(result->metrics.peak_kv_blocks, 4 * MostBlocks(request, block_size));
  ASSERT_GE(prompt_blocks, 2);
  EXPECT_GE(scheduler->kv_blocks().counters().peak_blocks_shared, prompt_blocks);
  EXPECT_GT(scheduler->kv_blocks().counters().blocks_copied, 0);
  // One prefill: the prompt, then one token per sample and step.
  EXPECT_EQ(scheduler->counters().computed_tokens,
            static_cast<int64_t>(request.prompt.size()) + 4 * (request.max_new_tokens - 1));
  ExpectEveryBlockFree(*scheduler);
}

// Sample i draws with seed + i: it is what a lone request with that seed
// gets, so the same seed gives the same samples, in any batch.
TEST_F(SchedulerTest, SampledSamplesFollowTheirSeeds) {
  const TestRequest request = {Encode("Sue"), 24, 0};
  sampling::SamplingParams params;
  params.temperature = 1.0f;
  params.seed = 42;
  std::vector<std::vector<int32_t>> solo;
  for (uint64_t i = 0; i < 3; ++i) {
    sampling::SamplingParams seeded = params;
    seeded.seed += i;
    solo.push_back(SoloTokens({request}, seeded)[0]);
  }
  EXPECT_FALSE(solo[0] == solo[1] && solo[1] == solo[2]) << "three seeds gave one text";

  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, /*max_batch_tokens=*/16);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  auto first = scheduler->Submit(request.prompt, params, request.max_new_tokens, {}, 3);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(scheduler->Step().ok());
  auto second = scheduler->Submit(request.prompt, params, request.max_new_tokens, {}, 3);
  ASSERT_TRUE(second.ok()) << second.status();
  while (!scheduler->Idle()) ASSERT_TRUE(scheduler->Step().ok());
  for (runtime::RequestId id : {*first, *second}) {
    auto result = scheduler->TakeResult(id);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->samples.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(result->samples[i].tokens, solo[i]) << "sample " << i;
  }
  ExpectEveryBlockFree(*scheduler);
}

TEST_F(SchedulerTest, ForkedSamplesArePreemptedAndRecomputedEachAlone) {
  const TestRequest request = {Encode("Lily had a red ball"), 60, 0};
  const std::vector<int32_t> solo = SoloTokens({request})[0];
  auto probe = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/1, /*threads=*/1);
  ASSERT_TRUE(probe.ok()) << probe.status();
  const int64_t most_blocks = MostBlocks(request, (*probe)->block_size());
  for (bool prefix_caching : {false, true}) {
    // Room for two samples' tails, not four.
    auto runner = runtime::CpuStepRunner::Create(*executable_, 2 * most_blocks, /*threads=*/2);
    ASSERT_TRUE(runner.ok()) << runner.status();
    auto scheduler = MakeScheduler(**runner, (*runner)->max_tokens_per_step(), prefix_caching);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    auto id = scheduler->Submit(request.prompt, Greedy(), request.max_new_tokens, {}, 4);
    ASSERT_TRUE(id.ok()) << id.status();
    while (!scheduler->Idle()) ASSERT_TRUE(scheduler->Step().ok());
    auto result = scheduler->TakeResult(*id);
    ASSERT_TRUE(result.ok()) << result.status();
    for (const runtime::SampleResult& sample : result->samples) EXPECT_EQ(sample.tokens, solo);
    EXPECT_GT(result->metrics.preemptions, 0) << "prefix caching " << prefix_caching;
    ExpectEveryBlockFree(*scheduler);
  }
}

TEST_F(SchedulerTest, CancellingMidGenerationFreesEveryBlockAtOnce) {
  const std::vector<TestRequest> requests = {{Encode("Once upon a time"), 40, 0},
                                             {Encode("The cat sat"), 20, 0}};
  const std::vector<std::vector<int32_t>> solo = SoloTokens(requests);
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/32, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, (*runner)->max_tokens_per_step());
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  auto cancelled = scheduler->Submit(requests[0].prompt, Greedy(), requests[0].max_new_tokens, {}, 3);
  auto kept = scheduler->Submit(requests[1].prompt, Greedy(), requests[1].max_new_tokens, {});
  auto never_run = scheduler->Submit(requests[1].prompt, Greedy(), 5, {}, 2);
  ASSERT_TRUE(cancelled.ok() && kept.ok() && never_run.ok());
  ASSERT_TRUE(scheduler->Cancel(*never_run).ok());
  for (int step = 0; step < 10; ++step) ASSERT_TRUE(scheduler->Step().ok());
  const int32_t in_use = scheduler->kv_blocks().counters().blocks_in_use;
  ASSERT_TRUE(scheduler->Cancel(*cancelled).ok());
  EXPECT_LT(scheduler->kv_blocks().counters().blocks_in_use, in_use);

  auto result = scheduler->TakeResult(*cancelled);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->samples.size(), 3u);
  for (const runtime::SampleResult& sample : result->samples) {
    EXPECT_EQ(sample.finish_reason, FinishReason::kCancelled);
    ASSERT_GT(sample.tokens.size(), 0u);
    ASSERT_LT(sample.tokens.size(), solo[0].size());
    EXPECT_EQ(sample.tokens, std::vector<int32_t>(solo[0].begin(), solo[0].begin() + sample.tokens.size()));
  }
  auto not_started = scheduler->TakeResult(*never_run);
  ASSERT_TRUE(not_started.ok()) << not_started.status();
  ASSERT_EQ(not_started->samples.size(), 2u);
  for (const runtime::SampleResult& sample : not_started->samples) {
    EXPECT_TRUE(sample.tokens.empty());
    EXPECT_EQ(sample.finish_reason, FinishReason::kCancelled);
  }
  EXPECT_EQ(scheduler->Cancel(*cancelled).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(scheduler->Cancel(12345).code(), absl::StatusCode::kNotFound);

  while (!scheduler->Idle()) ASSERT_TRUE(scheduler->Step().ok());
  auto finished = scheduler->TakeResult(*kept);
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(finished->samples[0].tokens, solo[1]);
  EXPECT_EQ(scheduler->counters().cancelled_requests, 2);
  ExpectEveryBlockFree(*scheduler);
}

// 64 requests of random prompts (a third sharing a beginning) and lengths,
// arriving over time, through a pool far too small for them: every one
// must finish with its solo greedy tokens, and the pool must end empty.
TEST_F(SchedulerTest, StressManyRandomRequestsThroughASmallPool) {
  std::mt19937 random(20261202);
  const int32_t vocab = static_cast<int32_t>(model_->config.vocab_size);
  const auto below = [&random](int32_t bound) { return static_cast<int32_t>(random() % bound); };
  std::vector<int32_t> shared_beginning = {1};
  for (int i = 0; i < 40; ++i) shared_beginning.push_back(3 + below(vocab - 3));
  std::vector<TestRequest> requests;
  for (int r = 0; r < 64; ++r) {
    std::vector<int32_t> prompt = r % 3 == 0 ? shared_beginning : std::vector<int32_t>{1};
    const int32_t length = 1 + below(r % 8 == 0 ? 120 : 30);
    for (int32_t i = 0; i < length; ++i) prompt.push_back(3 + below(vocab - 3));
    requests.push_back({prompt, 1 + below(40), below(60)});
  }
  const int64_t block_size = executable_->kv_layout().block_size();
  int64_t largest = 0;
  for (const TestRequest& request : requests) largest = std::max(largest, MostBlocks(request, block_size));
  auto runner = runtime::CpuStepRunner::Create(*executable_, largest + 4, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto scheduler = MakeScheduler(**runner, /*max_batch_tokens=*/48);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const auto batched = RunBatched(*scheduler, requests);
  ExpectSoloOutputs(requests, batched);
  EXPECT_GT(scheduler->counters().preemptions, 0);
  EXPECT_GT(scheduler->kv_blocks().counters().prefix_hit_tokens, 0);
  EXPECT_EQ(scheduler->kv_blocks().counters().peak_blocks_in_use, largest + 4);
  ExpectEveryBlockFree(*scheduler);
}

}  // namespace
}  // namespace kvjit
