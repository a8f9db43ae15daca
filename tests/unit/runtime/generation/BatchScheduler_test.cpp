// The in-flight batching scheduler over a fake model: however requests are
// admitted, chunked, preempted, cancelled, share cached prefixes or fork
// into samples, each sample's tokens must be those a plain loop over its
// whole context gives, and the KV pool must end empty.

#include "runtime/generation/BatchScheduler.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/generation/Drafter.h"
#include "runtime/kv/KvBlockManager.h"
#include "runtime/sampling/Sampler.h"
#include "tests/unit/runtime/generation/FakeStepRunner.h"

namespace kvjit::runtime {
namespace {

using ::kvjit::testing::FakeLogits;
using ::kvjit::testing::FakeStepRunner;
using ::kvjit::testing::RecordedStep;
using ::testing::HasSubstr;

constexpr int64_t kVocab = 16;
constexpr int64_t kBlockSize = 4;
constexpr int64_t kContext = 64;
constexpr int64_t kMaxTokensPerStep = 64;

FakeStepRunner MakeRunner(int64_t num_blocks = 64) {
  return FakeStepRunner(num_blocks, kBlockSize, kVocab, kMaxTokensPerStep);
}

absl::StatusOr<BatchScheduler> MakeScheduler(StepRunner& runner, int64_t max_batch_tokens,
                                             bool prefix_caching = true,
                                             int64_t context_length = kContext) {
  BatchSchedulerOptions options;
  options.max_batch_tokens = max_batch_tokens;
  options.context_length = context_length;
  options.enable_prefix_caching = prefix_caching;
  return BatchScheduler::Create(runner, options);
}

sampling::SamplingParams Greedy() {
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  return greedy;
}

sampling::SamplingParams Seeded(uint64_t seed, float temperature = 1.0f) {
  sampling::SamplingParams params;
  params.temperature = temperature;
  params.seed = seed;
  return params;
}

// A prompt that starts with `first` (so that a recorded step tells whose
// sequence is whose when the tests give their prompts different first
// tokens), then tokens of no pattern.
std::vector<int32_t> Prompt(int32_t first, int64_t length) {
  std::vector<int32_t> prompt = {first};
  uint32_t state = static_cast<uint32_t>(first + 1) * 2654435761u;
  while (static_cast<int64_t>(prompt.size()) < length) {
    state = state * 1664525u + 1013904223u;
    prompt.push_back(static_cast<int32_t>((state >> 16) % kVocab));
  }
  return prompt;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

bool StartsWith(const std::vector<int32_t>& tokens, const std::vector<int32_t>& prefix) {
  return tokens.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), tokens.begin());
}

struct TestRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens = 1;
  int64_t submit_at_step = 0;
  sampling::SamplingParams params = Greedy();
  int64_t num_samples = 1;
  std::vector<int32_t> stop_tokens = {};
  // The step before which the test cancels it (-1: never).
  int64_t cancel_at_step = -1;
};

// What sample `sample` of `request` must generate, computed without a cache
// or a batch: every token comes from FakeLogits over the whole context so
// far, greedy as the argmax (lowest id on ties, as the sampler breaks them),
// otherwise drawn by a sampler of its own seeded with seed + sample, whose
// penalties count the prompt and the sample's tokens so far.
SampleResult Reference(const TestRequest& request, int64_t sample = 0,
                       int64_t context_length = kContext) {
  const int64_t max_new_tokens = std::min<int64_t>(
      request.max_new_tokens, context_length - static_cast<int64_t>(request.prompt.size()));
  const bool greedy = request.params.temperature == 0;
  sampling::SamplingParams params = request.params;
  params.seed += static_cast<uint64_t>(sample);
  absl::StatusOr<sampling::Sampler> sampler = sampling::Sampler::Create(params);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  std::vector<int32_t> context = request.prompt;
  SampleResult result;
  result.finish_reason = FinishReason::kLength;
  while (static_cast<int64_t>(result.tokens.size()) < max_new_tokens) {
    const std::vector<float> logits = FakeLogits(context, kVocab);
    const int32_t token =
        greedy
            ? static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin())
            : sampler->Sample(logits, context);
    context.push_back(token);
    result.tokens.push_back(token);
    if (std::find(request.stop_tokens.begin(), request.stop_tokens.end(), token) !=
        request.stop_tokens.end()) {
      result.finish_reason = FinishReason::kEos;
      break;
    }
  }
  return result;
}

std::vector<int32_t> ReferenceGreedy(const std::vector<int32_t>& prompt, int64_t max_new_tokens) {
  return Reference({prompt, max_new_tokens}).tokens;
}

// The KV blocks one sample of the request holds at most: its last token is
// never fed back.
int64_t MostBlocks(int64_t prompt_tokens, int64_t max_new_tokens) {
  return (prompt_tokens + max_new_tokens - 1 + kBlockSize - 1) / kBlockSize;
}

::testing::AssertionResult StepUntilIdle(BatchScheduler& scheduler) {
  for (int64_t step = 0; !scheduler.Idle(); ++step) {
    if (step == 10000) return ::testing::AssertionFailure() << "still busy after 10000 steps";
    const absl::Status status = scheduler.Step();
    if (!status.ok()) return ::testing::AssertionFailure() << "step " << step << ": " << status;
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult StepTimes(BatchScheduler& scheduler, int64_t steps) {
  for (int64_t step = 0; step < steps; ++step) {
    const absl::Status status = scheduler.Step();
    if (!status.ok()) return ::testing::AssertionFailure() << "step " << step << ": " << status;
  }
  return ::testing::AssertionSuccess();
}

RequestId MustSubmit(BatchScheduler& scheduler, const TestRequest& request) {
  absl::StatusOr<RequestId> id =
      scheduler.Submit(request.prompt, request.params, request.max_new_tokens, request.stop_tokens,
                       request.num_samples);
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : -1;
}

RequestResult MustTake(BatchScheduler& scheduler, RequestId id) {
  absl::StatusOr<RequestResult> result = scheduler.TakeResult(id);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : RequestResult{};
}

// Submits and cancels each request at its step and steps until every one is
// done; the results in request order.
std::vector<RequestResult> RunRequests(
    BatchScheduler& scheduler, const std::vector<TestRequest>& requests,
    const std::function<void()>& after_step = [] {}) {
  std::vector<RequestId> ids(requests.size(), -1);
  size_t submitted = 0;
  for (int64_t step = 0; submitted < requests.size() || !scheduler.Idle(); ++step) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].submit_at_step == step) {
        ids[i] = MustSubmit(scheduler, requests[i]);
        ++submitted;
      }
      // A request that finished already is left as it is.
      if (requests[i].cancel_at_step == step && ids[i] >= 0) {
        const absl::Status cancelled = scheduler.Cancel(ids[i]);
        EXPECT_TRUE(cancelled.ok()) << cancelled;
      }
    }
    const absl::Status status = scheduler.Step();
    EXPECT_TRUE(status.ok()) << "step " << step << ": " << status;
    if (!status.ok() || step > 10000) break;
    after_step();
  }
  std::vector<RequestResult> results;
  for (RequestId id : ids) results.push_back(MustTake(scheduler, id));
  return results;
}

// Each sample is its reference; a cancelled one, what its reference starts
// with.
void ExpectReferenceOutputs(const std::vector<TestRequest>& requests,
                            const std::vector<RequestResult>& results,
                            int64_t context_length = kContext) {
  ASSERT_EQ(results.size(), requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    ASSERT_EQ(static_cast<int64_t>(results[r].samples.size()), requests[r].num_samples)
        << "request " << r;
    int64_t generated = 0;
    for (int64_t s = 0; s < requests[r].num_samples; ++s) {
      SCOPED_TRACE(absl::StrCat("request ", r, " sample ", s));
      const SampleResult expected = Reference(requests[r], s, context_length);
      const SampleResult& actual = results[r].samples[s];
      generated += static_cast<int64_t>(actual.tokens.size());
      if (actual.finish_reason == FinishReason::kCancelled) {
        EXPECT_GE(requests[r].cancel_at_step, 0) << "cancelled without being asked to";
        EXPECT_LT(actual.tokens.size(), expected.tokens.size());
        EXPECT_TRUE(StartsWith(expected.tokens, actual.tokens));
      } else {
        EXPECT_EQ(actual.tokens, expected.tokens);
        EXPECT_EQ(actual.finish_reason, expected.finish_reason);
      }
    }
    EXPECT_EQ(results[r].metrics.prompt_tokens, static_cast<int64_t>(requests[r].prompt.size()));
    EXPECT_EQ(results[r].metrics.generated_tokens, generated) << "request " << r;
  }
}

// Prompt and generated tokens, each computed once: the cost of the requests
// with no preemption, prefix cache or cancellation.
int64_t TokensComputedOnce(const std::vector<TestRequest>& requests) {
  int64_t tokens = 0;
  for (const TestRequest& request : requests) {
    tokens += static_cast<int64_t>(request.prompt.size()) +
              request.num_samples * (request.max_new_tokens - 1);
  }
  return tokens;
}

// Whether a recorded sequence is the request's: its cache starts with the
// prompt, or holds the start of it while the prompt is prefilled in chunks.
bool IsOf(const kvjit::testing::RecordedSequence& sequence, const std::vector<int32_t>& prompt) {
  return !sequence.context.empty() &&
         (StartsWith(sequence.context, prompt) || StartsWith(prompt, sequence.context));
}

// The step's tokens of the sequences of the request with `prompt`.
int64_t TokensFor(const RecordedStep& step, const std::vector<int32_t>& prompt) {
  int64_t tokens = 0;
  for (const auto& sequence : step.sequences) {
    if (IsOf(sequence, prompt)) tokens += sequence.new_tokens;
  }
  return tokens;
}

void ExpectEveryBlockFree(const BatchScheduler& scheduler) {
  EXPECT_TRUE(scheduler.Idle());
  const kv::KvBlockManager& blocks = scheduler.kv_blocks();
  EXPECT_EQ(blocks.num_free_blocks(), blocks.num_blocks());
  EXPECT_EQ(blocks.counters().blocks_in_use, 0);
  EXPECT_EQ(blocks.counters().blocks_shared, 0);
  EXPECT_EQ(blocks.num_sequences(), 0);
}

TEST(BatchSchedulerTest, RequestsJoinTheBatchWhileOthersRun) {
  FakeStepRunner runner = MakeRunner();
  runner.RecordSteps();
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, kMaxTokensPerStep);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const std::vector<TestRequest> requests = {
      {Prompt(1, 5), 10}, {Prompt(2, 3), 6}, {Prompt(3, 7), 4}};
  std::vector<RequestId> ids = {MustSubmit(*scheduler, requests[0])};
  ASSERT_TRUE(StepTimes(*scheduler, 3));
  ids.push_back(MustSubmit(*scheduler, requests[1]));
  ASSERT_TRUE(StepTimes(*scheduler, 1));
  // The running request's decode and the newcomer's whole prompt, together.
  const RecordedStep& joined = runner.recorded_steps().back();
  ASSERT_EQ(joined.sequences.size(), 2u);
  EXPECT_TRUE(StartsWith(joined.sequences[0].context, requests[0].prompt));
  EXPECT_EQ(joined.sequences[0].new_tokens, 1);
  EXPECT_TRUE(StartsWith(joined.sequences[1].context, requests[1].prompt));
  EXPECT_EQ(joined.sequences[1].new_tokens, 3);
  ASSERT_TRUE(StepTimes(*scheduler, 1));
  ids.push_back(MustSubmit(*scheduler, requests[2]));
  ASSERT_TRUE(StepUntilIdle(*scheduler));

  // Nobody waited for anybody: the three took the steps of the first alone.
  EXPECT_EQ(scheduler->counters().steps, 10);
  EXPECT_EQ(runner.steps(), 10);
  EXPECT_EQ(scheduler->counters().computed_tokens, TokensComputedOnce(requests));
  // Steps 1, 4 and 6 carry a prompt; the others decode alone: steps 2 and 3
  // one token, 5 two, 7 to 9 three, 10 one.
  EXPECT_EQ(scheduler->counters().decode_steps, 7);
  EXPECT_EQ(scheduler->counters().decode_step_tokens, 14);
  EXPECT_GT(scheduler->counters().decode_step_seconds, 0.0);
  std::vector<RequestResult> results;
  for (RequestId id : ids) results.push_back(MustTake(*scheduler, id));
  ExpectReferenceOutputs(requests, results);
  for (size_t r = 0; r < requests.size(); ++r) {
    SCOPED_TRACE(absl::StrCat("request ", r));
    const RequestMetrics& metrics = results[r].metrics;
    EXPECT_EQ(metrics.peak_kv_blocks,
              MostBlocks(requests[r].prompt.size(), requests[r].max_new_tokens));
    EXPECT_EQ(metrics.preemptions, 0);
    EXPECT_EQ(metrics.prefix_cached_tokens, 0);
    EXPECT_GE(metrics.time_to_first_token_s, 0);
    EXPECT_GE(metrics.time_per_output_token_s, 0);
  }
  ExpectEveryBlockFree(*scheduler);
}

TEST(BatchSchedulerTest, ARequestWaitsWhileItsFirstChunkDoesNotFitTheFreeBlocks) {
  // The first request fills 4 of 6 blocks with its prompt and a 5th with its
  // tokens; the second's prompt needs 3.
  FakeStepRunner runner = MakeRunner(/*num_blocks=*/6);
  runner.RecordSteps();
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, kMaxTokensPerStep);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const std::vector<TestRequest> requests = {{Prompt(1, 16), 4}, {Prompt(2, 12), 2}};
  const RequestId holder = MustSubmit(*scheduler, requests[0]);
  const RequestId waiter = MustSubmit(*scheduler, requests[1]);
  ASSERT_TRUE(StepTimes(*scheduler, 1));
  ASSERT_EQ(runner.recorded_steps().size(), 1u);
  EXPECT_EQ(runner.recorded_steps()[0].sequences.size(), 1u);
  EXPECT_EQ(TokensFor(runner.recorded_steps()[0], requests[0].prompt), 16);
  EXPECT_EQ(scheduler->kv_blocks().num_free_blocks(), 2);
  EXPECT_EQ(scheduler->TakeResult(waiter).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(StepUntilIdle(*scheduler));

  // It joined the step after the first request left, and took nobody's
  // blocks.
  int64_t last_holder_step = -1;
  int64_t first_waiter_step = -1;
  for (size_t i = 0; i < runner.recorded_steps().size(); ++i) {
    const RecordedStep& step = runner.recorded_steps()[i];
    if (TokensFor(step, requests[0].prompt) > 0) last_holder_step = static_cast<int64_t>(i);
    if (TokensFor(step, requests[1].prompt) > 0 && first_waiter_step < 0) {
      first_waiter_step = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(last_holder_step, 3);
  EXPECT_EQ(first_waiter_step, 4);
  EXPECT_EQ(scheduler->counters().preemptions, 0);
  ExpectReferenceOutputs(requests, {MustTake(*scheduler, holder), MustTake(*scheduler, waiter)});
  ExpectEveryBlockFree(*scheduler);
}

TEST(BatchSchedulerTest, NoStepCarriesMoreTokensThanTheBudget) {
  const std::vector<TestRequest> requests = {{Prompt(1, 9), 6, 0},
                                             {Prompt(2, 3), 8, 0},
                                             {Prompt(3, 14), 3, 1},
                                             {Prompt(4, 1), 5, 2},
                                             {Prompt(5, 6), 4, 4}};
  for (int64_t budget : {1, 3, 5, 8}) {
    SCOPED_TRACE(absl::StrCat("budget ", budget));
    FakeStepRunner runner = MakeRunner();
    runner.RecordSteps();
    absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, budget);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    ExpectReferenceOutputs(requests, RunRequests(*scheduler, requests));
    int64_t seen_tokens = 0;
    bool budget_filled = false;
    for (const RecordedStep& step : runner.recorded_steps()) {
      EXPECT_GE(step.tokens(), 1);
      EXPECT_LE(step.tokens(), budget);
      budget_filled |= step.tokens() == budget;
      seen_tokens += step.tokens();
    }
    EXPECT_TRUE(budget_filled) << "no step used the whole budget";
    EXPECT_EQ(seen_tokens, scheduler->counters().computed_tokens);
    // The pool holds them all, so the budget only spreads the work.
    EXPECT_EQ(seen_tokens, TokensComputedOnce(requests));
    EXPECT_EQ(scheduler->counters().steps, static_cast<int64_t>(runner.recorded_steps().size()));
    ExpectEveryBlockFree(*scheduler);
  }
}

TEST(BatchSchedulerTest, APromptLongerThanTheBudgetIsPrefilledInChunksToTheSameTokens) {
  const TestRequest request = {Prompt(3, 23), 5};
  std::vector<std::vector<int32_t>> outputs;
  for (int64_t budget : {int64_t{4}, kMaxTokensPerStep}) {
    SCOPED_TRACE(absl::StrCat("budget ", budget));
    FakeStepRunner runner = MakeRunner();
    runner.RecordSteps();
    absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, budget);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    const RequestId id = MustSubmit(*scheduler, request);
    ASSERT_TRUE(StepUntilIdle(*scheduler));
    std::vector<int64_t> chunks;
    for (const RecordedStep& step : runner.recorded_steps()) chunks.push_back(step.tokens());
    if (budget == 4) {
      EXPECT_EQ(chunks, (std::vector<int64_t>{4, 4, 4, 4, 4, 3, 1, 1, 1, 1}));
    } else {
      EXPECT_EQ(chunks, (std::vector<int64_t>{23, 1, 1, 1, 1}));
    }
    const RequestResult result = MustTake(*scheduler, id);
    ExpectReferenceOutputs({request}, {result});
    outputs.push_back(result.samples.empty() ? std::vector<int32_t>{} : result.samples[0].tokens);
    ExpectEveryBlockFree(*scheduler);
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

TEST(BatchSchedulerTest, DecodesAndPrefillChunksShareSteps) {
  FakeStepRunner runner = MakeRunner();
  runner.RecordSteps();
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, /*max_batch_tokens=*/6);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const std::vector<TestRequest> requests = {{Prompt(1, 3), 12, 0}, {Prompt(2, 20), 3, 2}};
  ExpectReferenceOutputs(requests, RunRequests(*scheduler, requests));
  const std::vector<RecordedStep>& steps = runner.recorded_steps();
  ASSERT_EQ(steps.size(), 12u);
  // The decode goes first and never waits for the prefill, which takes the
  // rest of the budget, 5 tokens a step.
  for (size_t i = 2; i < 6; ++i) {
    SCOPED_TRACE(absl::StrCat("step ", i));
    ASSERT_EQ(steps[i].sequences.size(), 2u);
    EXPECT_TRUE(IsOf(steps[i].sequences[0], requests[0].prompt));
    EXPECT_EQ(steps[i].sequences[0].new_tokens, 1);
    EXPECT_TRUE(IsOf(steps[i].sequences[1], requests[1].prompt));
    EXPECT_EQ(steps[i].sequences[1].new_tokens, 5);
    EXPECT_EQ(steps[i].sequences[1].context.size(), 5 * (i - 1));
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(TokensFor(steps[i], requests[0].prompt), i == 0 ? 3 : 1) << "step " << i;
  }
  ExpectEveryBlockFree(*scheduler);
}

TEST(BatchSchedulerTest, AShortPoolPreemptsByRecomputeAndKeepsEveryOutput) {
  // Each could take 7 or 8 of the 10 blocks alone.
  const std::vector<TestRequest> requests = {
      {Prompt(1, 10), 20, 0}, {Prompt(2, 7), 20, 0}, {Prompt(3, 9), 18, 0}, {Prompt(4, 5), 22, 2}};
  for (bool prefix_caching : {false, true}) {
    for (int64_t budget : {int64_t{7}, kMaxTokensPerStep}) {
      SCOPED_TRACE(absl::StrCat("prefix caching ", prefix_caching, ", budget ", budget));
      FakeStepRunner runner = MakeRunner(/*num_blocks=*/10);
      runner.RecordSteps();
      absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, budget, prefix_caching);
      ASSERT_TRUE(scheduler.ok()) << scheduler.status();
      const std::vector<RequestResult> results = RunRequests(*scheduler, requests);
      ExpectReferenceOutputs(requests, results);
      int64_t preemptions = 0;
      int64_t prefix_cached_tokens = 0;
      for (const RequestResult& result : results) {
        preemptions += result.metrics.preemptions;
        prefix_cached_tokens += result.metrics.prefix_cached_tokens;
      }
      EXPECT_GT(preemptions, 0);
      EXPECT_EQ(scheduler->counters().preemptions, preemptions);
      EXPECT_EQ(prefix_cached_tokens, scheduler->kv_blocks().counters().prefix_hit_tokens);
      // A recompute computes again what the preempted sequence had, but for
      // whole blocks the prefix cache kept (the prompts share none, so every
      // hit is a recompute finding its own blocks).
      if (prefix_caching) {
        EXPECT_GT(prefix_cached_tokens, 0);
        EXPECT_GE(scheduler->counters().computed_tokens, TokensComputedOnce(requests));
      } else {
        EXPECT_GT(scheduler->counters().computed_tokens, TokensComputedOnce(requests));
      }
      for (const RecordedStep& step : runner.recorded_steps()) EXPECT_LE(step.tokens(), budget);
      EXPECT_LE(scheduler->kv_blocks().counters().peak_blocks_in_use, 10);
      ExpectEveryBlockFree(*scheduler);
    }
  }
}

// So that preempted work is not readmitted only to be preempted again.
TEST(BatchSchedulerTest, AStepThatPreemptsAdmitsNobody) {
  const std::vector<TestRequest> requests = {
      {Prompt(1, 10), 20, 0}, {Prompt(2, 7), 20, 0}, {Prompt(3, 9), 18, 0}, {Prompt(4, 5), 22, 2}};
  for (int64_t budget : {3, 7}) {
    SCOPED_TRACE(absl::StrCat("budget ", budget));
    FakeStepRunner runner = MakeRunner(/*num_blocks=*/10);
    runner.RecordSteps();
    // Without the prefix cache a sequence joining the batch starts at
    // position 0, so a recorded step shows who joined.
    absl::StatusOr<BatchScheduler> scheduler =
        MakeScheduler(runner, budget, /*prefix_caching=*/false);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    int64_t preemptions_before = 0;
    int64_t preempting_steps = 0;
    int64_t admissions = 0;
    const auto check_step = [&] {
      const RecordedStep& step = runner.recorded_steps().back();
      int64_t joined = 0;
      for (const auto& sequence : step.sequences) {
        joined += static_cast<int64_t>(sequence.context.size()) == sequence.new_tokens;
      }
      admissions += joined;
      if (scheduler->counters().preemptions > preemptions_before) {
        ++preempting_steps;
        EXPECT_EQ(joined, 0) << "step " << runner.recorded_steps().size() - 1;
      }
      preemptions_before = scheduler->counters().preemptions;
    };
    ExpectReferenceOutputs(requests, RunRequests(*scheduler, requests, check_step));
    EXPECT_GT(preempting_steps, 0);
    EXPECT_GT(admissions, static_cast<int64_t>(requests.size()));
    ExpectEveryBlockFree(*scheduler);
  }
}

TEST(BatchSchedulerTest, PreemptedSamplesAreRecomputedAloneAndKeepTheirDraws) {
  // A sample takes up to 8 blocks; three take 22, sharing one.
  for (bool prefix_caching : {false, true}) {
    for (const sampling::SamplingParams& params : {Greedy(), Seeded(7)}) {
      SCOPED_TRACE(
          absl::StrCat("prefix caching ", prefix_caching, ", temperature ", params.temperature));
      FakeStepRunner runner = MakeRunner(/*num_blocks=*/12);
      absl::StatusOr<BatchScheduler> scheduler =
          MakeScheduler(runner, kMaxTokensPerStep, prefix_caching);
      ASSERT_TRUE(scheduler.ok()) << scheduler.status();
      TestRequest request = {Prompt(5, 6), 24};
      request.params = params;
      request.num_samples = 3;
      const std::vector<RequestResult> results = RunRequests(*scheduler, {request});
      ExpectReferenceOutputs({request}, results);
      EXPECT_GT(results[0].metrics.preemptions, 0);
      EXPECT_EQ(scheduler->counters().preemptions, results[0].metrics.preemptions);
      EXPECT_LE(results[0].metrics.peak_kv_blocks, 12);
      ExpectEveryBlockFree(*scheduler);
    }
  }
}

TEST(BatchSchedulerTest, CancellingAWaitingRequestLeavesTheOthersAlone) {
  FakeStepRunner runner = MakeRunner(/*num_blocks=*/6);
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, kMaxTokensPerStep);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  TestRequest behind = {Prompt(3, 4), 3};
  behind.num_samples = 2;
  // The second waits for blocks (as above), the third behind it.
  const std::vector<TestRequest> kept = {{Prompt(1, 16), 4}, behind};
  const RequestId holder = MustSubmit(*scheduler, kept[0]);
  const RequestId waiter = MustSubmit(*scheduler, {Prompt(2, 12), 2});
  const RequestId follower = MustSubmit(*scheduler, kept[1]);
  ASSERT_TRUE(StepTimes(*scheduler, 1));
  EXPECT_EQ(scheduler->kv_blocks().num_free_blocks(), 2);

  ASSERT_TRUE(scheduler->Cancel(waiter).ok());
  EXPECT_EQ(scheduler->kv_blocks().num_free_blocks(), 2);
  EXPECT_EQ(scheduler->counters().cancelled_requests, 1);
  // Cancelled before it ran: each sample of a request, empty.
  TestRequest unstarted = {Prompt(4, 5), 6};
  unstarted.num_samples = 3;
  const RequestId never_run = MustSubmit(*scheduler, unstarted);
  ASSERT_TRUE(scheduler->Cancel(never_run).ok());
  for (RequestId id : {waiter, never_run}) {
    const RequestResult result = MustTake(*scheduler, id);
    ASSERT_EQ(result.samples.size(), id == waiter ? 1u : 3u);
    for (const SampleResult& sample : result.samples) {
      EXPECT_TRUE(sample.tokens.empty());
      EXPECT_EQ(sample.finish_reason, FinishReason::kCancelled);
      EXPECT_EQ(FinishReasonName(sample.finish_reason), "cancelled");
    }
    EXPECT_EQ(result.metrics.generated_tokens, 0);
    EXPECT_EQ(scheduler->Cancel(id).code(), absl::StatusCode::kNotFound);
  }
  ASSERT_TRUE(StepUntilIdle(*scheduler));
  ExpectReferenceOutputs(kept, {MustTake(*scheduler, holder), MustTake(*scheduler, follower)});
  EXPECT_EQ(scheduler->counters().cancelled_requests, 2);
  ExpectEveryBlockFree(*scheduler);
}

TEST(BatchSchedulerTest, CancellingARunningRequestReturnsItsBlocksAtOnce) {
  FakeStepRunner runner = MakeRunner();
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, kMaxTokensPerStep);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const TestRequest kept = {Prompt(1, 5), 12};
  const TestRequest single = {Prompt(2, 7), 20};
  TestRequest sampled = {Prompt(3, 6), 20};
  sampled.params = Seeded(11);
  sampled.num_samples = 3;
  const RequestId kept_id = MustSubmit(*scheduler, kept);
  const RequestId single_id = MustSubmit(*scheduler, single);
  const RequestId sampled_id = MustSubmit(*scheduler, sampled);
  // Each sample has 4 tokens, the last 3 of them cached.
  ASSERT_TRUE(StepTimes(*scheduler, 4));

  // 7 + 3 tokens: 3 blocks.
  int32_t free_before = scheduler->kv_blocks().num_free_blocks();
  ASSERT_TRUE(scheduler->Cancel(single_id).ok());
  EXPECT_EQ(scheduler->kv_blocks().num_free_blocks() - free_before, 3);
  // 6 + 3 tokens a sample: the shared first block, then two blocks each (the
  // second copied on the first write).
  free_before = scheduler->kv_blocks().num_free_blocks();
  ASSERT_TRUE(scheduler->Cancel(sampled_id).ok());
  EXPECT_EQ(scheduler->kv_blocks().num_free_blocks() - free_before, 1 + 3 * 2);
  for (const auto& [id, request] :
       std::vector<std::pair<RequestId, TestRequest>>{{single_id, single}, {sampled_id, sampled}}) {
    const RequestResult result = MustTake(*scheduler, id);
    ASSERT_EQ(static_cast<int64_t>(result.samples.size()), request.num_samples);
    for (int64_t s = 0; s < request.num_samples; ++s) {
      SCOPED_TRACE(absl::StrCat("request ", id, " sample ", s));
      const std::vector<int32_t> expected = Reference(request, s).tokens;
      EXPECT_EQ(result.samples[s].tokens,
                std::vector<int32_t>(expected.begin(), expected.begin() + 4));
      EXPECT_EQ(result.samples[s].finish_reason, FinishReason::kCancelled);
    }
    EXPECT_EQ(result.metrics.generated_tokens, 4 * request.num_samples);
  }
  EXPECT_EQ(scheduler->counters().cancelled_requests, 2);

  ASSERT_TRUE(StepUntilIdle(*scheduler));
  // A finished request whose result waits keeps it.
  EXPECT_TRUE(scheduler->Cancel(kept_id).ok());
  ExpectReferenceOutputs({kept}, {MustTake(*scheduler, kept_id)});
  EXPECT_EQ(scheduler->Cancel(kept_id).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(scheduler->Cancel(12345).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(scheduler->counters().cancelled_requests, 2);
  ExpectEveryBlockFree(*scheduler);
}

TEST(BatchSchedulerTest, CancellingKeepsTheReasonOfSamplesThatHadStopped) {
  // A seed and stop token with which sample 0 stops within 3 tokens and
  // sample 1 runs past 6.
  TestRequest request = {Prompt(15, 5), 12};
  request.num_samples = 3;
  bool found = false;
  for (uint64_t seed = 0; seed < 1000 && !found; ++seed) {
    for (int32_t stop = 0; stop < kVocab && !found; ++stop) {
      request.params = Seeded(seed);
      request.stop_tokens = {stop};
      const SampleResult first = Reference(request, 0);
      found = first.finish_reason == FinishReason::kEos && first.tokens.size() <= 3 &&
              Reference(request, 1).tokens.size() > 6;
    }
  }
  ASSERT_TRUE(found);
  FakeStepRunner runner = MakeRunner();
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, kMaxTokensPerStep);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const RequestId id = MustSubmit(*scheduler, request);
  ASSERT_TRUE(StepTimes(*scheduler, 5));
  ASSERT_TRUE(scheduler->Cancel(id).ok());
  const RequestResult result = MustTake(*scheduler, id);
  ASSERT_EQ(result.samples.size(), 3u);
  for (int64_t s = 0; s < 3; ++s) {
    SCOPED_TRACE(absl::StrCat("sample ", s));
    const SampleResult expected = Reference(request, s);
    if (expected.tokens.size() <= 5) {
      EXPECT_EQ(result.samples[s].tokens, expected.tokens);
      EXPECT_EQ(result.samples[s].finish_reason, expected.finish_reason);
    } else {
      EXPECT_EQ(result.samples[s].tokens,
                std::vector<int32_t>(expected.tokens.begin(), expected.tokens.begin() + 5));
      EXPECT_EQ(result.samples[s].finish_reason, FinishReason::kCancelled);
    }
  }
  EXPECT_EQ(result.samples[0].finish_reason, FinishReason::kEos);
  EXPECT_EQ(result.samples[1].finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(scheduler->counters().cancelled_requests, 1);
  ExpectEveryBlockFree(*scheduler);
}

TEST(BatchSchedulerTest, APrefixOfWholeBlocksIsComputedOnce) {
  const std::vector<int32_t> shared = Prompt(4, 8);
  const std::vector<TestRequest> requests = {
      {Concat(shared, {1, 2, 3}), 6, 0},
      // While the first runs.
      {Concat(shared, {5, 6}), 6, 2},
      // After both finished: the blocks stayed cached. The same prompt
      // again reuses its 2 whole blocks; so does one whose 9th token is its
      // last (its logits must be computed).
      {Concat(shared, {1, 2, 3}), 6, 20},
      {Concat(shared, {7}), 6, 20},
      // Sharing less than a block shares nothing.
      {Concat(std::vector<int32_t>(shared.begin(), shared.begin() + 3), {9, 9, 9, 9, 9}), 6, 20},
  };
  const std::vector<int64_t> expected_cached = {0, 8, 8, 8, 0};
  std::vector<int64_t> computed_tokens;
  for (bool prefix_caching : {false, true}) {
    SCOPED_TRACE(absl::StrCat("prefix caching ", prefix_caching));
    FakeStepRunner runner = MakeRunner();
    absl::StatusOr<BatchScheduler> scheduler =
        MakeScheduler(runner, kMaxTokensPerStep, prefix_caching);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    const std::vector<RequestResult> results = RunRequests(*scheduler, requests);
    ExpectReferenceOutputs(requests, results);
    int64_t cached = 0;
    for (size_t r = 0; r < requests.size(); ++r) {
      EXPECT_EQ(results[r].metrics.prefix_cached_tokens, prefix_caching ? expected_cached[r] : 0)
          << "request " << r;
      cached += results[r].metrics.prefix_cached_tokens;
    }
    const kv::KvBlockCounters kv = scheduler->kv_blocks().counters();
    EXPECT_EQ(kv.prefix_hit_tokens, cached);
    if (prefix_caching) {
      EXPECT_GE(kv.peak_blocks_shared, 2);
    }
    computed_tokens.push_back(scheduler->counters().computed_tokens);
    ExpectEveryBlockFree(*scheduler);
  }
  EXPECT_EQ(computed_tokens[0], TokensComputedOnce(requests));
  EXPECT_EQ(computed_tokens[0] - computed_tokens[1], 3 * 8);
}

TEST(BatchSchedulerTest, IdenticalPromptsAdmittedTogetherGetTheSameTokens) {
  // Neither finds the other's blocks cached when both join in one step.
  const std::vector<int32_t> prompt = Prompt(6, 13);
  const std::vector<TestRequest> requests = {{prompt, 9}, {prompt, 9}, {prompt, 5, 3}};
  for (int64_t budget : {int64_t{5}, kMaxTokensPerStep}) {
    SCOPED_TRACE(absl::StrCat("budget ", budget));
    FakeStepRunner runner = MakeRunner();
    absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, budget);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    ExpectReferenceOutputs(requests, RunRequests(*scheduler, requests));
    ExpectEveryBlockFree(*scheduler);
  }
}

TEST(BatchSchedulerTest, SamplesShareOnePrefillAndEachFollowsItsSeed) {
  TestRequest request = {Prompt(6, 10), 8};
  request.params = Seeded(42, /*temperature=*/1.5f);
  // Each sample's penalties count its own tokens, not its siblings'.
  request.params.repetition_penalty = 1.3f;
  request.num_samples = 3;
  FakeStepRunner runner = MakeRunner();
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, kMaxTokensPerStep);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const std::vector<RequestResult> results = RunRequests(*scheduler, {request});
  ExpectReferenceOutputs({request}, results);
  ASSERT_EQ(results[0].samples.size(), 3u);
  EXPECT_FALSE(results[0].samples[0].tokens == results[0].samples[1].tokens &&
               results[0].samples[1].tokens == results[0].samples[2].tokens)
      << "three seeds drew the same tokens";
  // The prompt once, then every sample its own tokens.
  EXPECT_EQ(scheduler->counters().computed_tokens, 10 + 3 * 7);
  EXPECT_EQ(scheduler->counters().steps, 8);
  // The samples share the prompt's three blocks; the first two to write
  // into the partly filled third copy it, the last keeps it, and each grows
  // to 5 blocks: 2 shared and 3 of its own.
  const kv::KvBlockCounters kv = scheduler->kv_blocks().counters();
  EXPECT_EQ(kv.peak_blocks_shared, 3);
  EXPECT_EQ(kv.blocks_copied, 2);
  EXPECT_EQ(runner.copies(), 2);
  EXPECT_EQ(results[0].metrics.peak_kv_blocks, 2 + 3 * 3);
  ExpectEveryBlockFree(*scheduler);

  // The same seed gives the same samples in another batch, chunked.
  FakeStepRunner busy_runner = MakeRunner();
  absl::StatusOr<BatchScheduler> busy = MakeScheduler(busy_runner, /*max_batch_tokens=*/3);
  ASSERT_TRUE(busy.ok()) << busy.status();
  TestRequest late = request;
  late.submit_at_step = 2;
  const std::vector<TestRequest> batch = {{Prompt(7, 5), 12}, late, request};
  const std::vector<RequestResult> batched = RunRequests(*busy, batch);
  ExpectReferenceOutputs(batch, batched);
  for (size_t r = 1; r < 3; ++r) {
    for (size_t s = 0; s < 3; ++s) {
      EXPECT_EQ(batched[r].samples[s].tokens, results[0].samples[s].tokens);
    }
  }
  ExpectEveryBlockFree(*busy);
}

TEST(BatchSchedulerTest, GreedySamplesAllGetTheGreedyTokens) {
  FakeStepRunner runner = MakeRunner();
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, kMaxTokensPerStep);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  TestRequest request = {Prompt(8, 9), 11};
  request.num_samples = 4;
  const std::vector<RequestResult> results = RunRequests(*scheduler, {request});
  ExpectReferenceOutputs({request}, results);
  for (const SampleResult& sample : results[0].samples) {
    EXPECT_EQ(sample.tokens, ReferenceGreedy(request.prompt, 11));
  }
  EXPECT_EQ(scheduler->counters().computed_tokens, 9 + 4 * 10);
  ExpectEveryBlockFree(*scheduler);
}

TEST(BatchSchedulerTest, MaxNewTokensEndsASampleWithLength) {
  for (int64_t max_new_tokens : {1, 2, 7}) {
    SCOPED_TRACE(absl::StrCat(max_new_tokens, " new tokens"));
    FakeStepRunner runner = MakeRunner();
    absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, kMaxTokensPerStep);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    const TestRequest request = {Prompt(9, 6), max_new_tokens};
    const std::vector<RequestResult> results = RunRequests(*scheduler, {request});
    ExpectReferenceOutputs({request}, results);
    ASSERT_EQ(results[0].samples.size(), 1u);
    EXPECT_EQ(static_cast<int64_t>(results[0].samples[0].tokens.size()), max_new_tokens);
    EXPECT_EQ(results[0].samples[0].finish_reason, FinishReason::kLength);
    EXPECT_EQ(FinishReasonName(results[0].samples[0].finish_reason), "length");
    EXPECT_EQ(scheduler->counters().steps, max_new_tokens);
    ExpectEveryBlockFree(*scheduler);
  }
}

TEST(BatchSchedulerTest, AStopTokenEndsTheSampleWithIt) {
  const std::vector<int32_t> prompt = Prompt(10, 5);
  const std::vector<int32_t> unstopped = ReferenceGreedy(prompt, 12);
  // A token that first appears late, and one that never does.
  size_t stop_at = unstopped.size();
  for (size_t i = unstopped.size(); i-- > 2;) {
    if (std::find(unstopped.begin(), unstopped.begin() + i, unstopped[i]) ==
        unstopped.begin() + i) {
      stop_at = i;
      break;
    }
  }
  ASSERT_LT(stop_at, unstopped.size()) << "every greedy token repeats an earlier one";
  int32_t absent = 0;
  while (std::find(unstopped.begin(), unstopped.end(), absent) != unstopped.end()) ++absent;
  ASSERT_LT(absent, kVocab);

  FakeStepRunner runner = MakeRunner();
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, kMaxTokensPerStep);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  TestRequest stopped = {prompt, 12};
  stopped.stop_tokens = {absent, unstopped[stop_at]};
  // Stopping on its first token, each of three samples.
  TestRequest first_token = {prompt, 12};
  first_token.stop_tokens = {unstopped[0]};
  first_token.num_samples = 3;
  const std::vector<TestRequest> requests = {stopped, first_token, {Prompt(11, 4), 3}};
  const std::vector<RequestResult> results = RunRequests(*scheduler, requests);
  ExpectReferenceOutputs(requests, results);
  EXPECT_EQ(results[0].samples[0].tokens,
            std::vector<int32_t>(unstopped.begin(), unstopped.begin() + stop_at + 1));
  EXPECT_EQ(results[0].samples[0].finish_reason, FinishReason::kEos);
  EXPECT_EQ(FinishReasonName(FinishReason::kEos), "eos");
  for (const SampleResult& sample : results[1].samples) {
    EXPECT_EQ(sample.tokens, std::vector<int32_t>{unstopped[0]});
    EXPECT_EQ(sample.finish_reason, FinishReason::kEos);
  }
  EXPECT_EQ(results[2].samples[0].finish_reason, FinishReason::kLength);
  EXPECT_EQ(scheduler->counters().steps, static_cast<int64_t>(stop_at) + 1);
  ExpectEveryBlockFree(*scheduler);
}

TEST(BatchSchedulerTest, AFullContextEndsTheSampleWithLength) {
  constexpr int64_t kShortContext = 16;
  // 4 blocks hold the context, so the cut to what the context leaves must
  // come before the pool check.
  FakeStepRunner runner = MakeRunner(/*num_blocks=*/4);
  absl::StatusOr<BatchScheduler> scheduler =
      MakeScheduler(runner, kMaxTokensPerStep, /*prefix_caching=*/true, kShortContext);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const std::vector<TestRequest> requests = {{Prompt(12, 12), 100}, {Prompt(13, 15), 9}};
  const std::vector<RequestResult> results = RunRequests(*scheduler, requests);
  ExpectReferenceOutputs(requests, results, kShortContext);
  EXPECT_EQ(results[0].samples[0].tokens.size(), 4u);
  EXPECT_EQ(results[1].samples[0].tokens.size(), 1u);
  for (const RequestResult& result : results) {
    EXPECT_EQ(result.samples[0].finish_reason, FinishReason::kLength);
  }
  ExpectEveryBlockFree(*scheduler);
}

TEST(BatchSchedulerTest, RefusesRequestsThatCannotRunAndKeepsWorking) {
  FakeStepRunner runner = MakeRunner(/*num_blocks=*/8);
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, /*max_batch_tokens=*/16);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  const TestRequest before = {Prompt(1, 6), 10};
  const RequestId before_id = MustSubmit(*scheduler, before);
  ASSERT_TRUE(StepTimes(*scheduler, 2));

  struct Case {
    std::string name;
    TestRequest request;
    absl::StatusCode code;
    std::string message;
  };
  TestRequest no_samples = {Prompt(2, 3), 4};
  no_samples.num_samples = 0;
  TestRequest bad_temperature = {Prompt(2, 3), 4};
  bad_temperature.params.temperature = -1;
  const std::vector<Case> cases = {
      {"empty prompt", {{}, 4}, absl::StatusCode::kInvalidArgument, "the prompt has no tokens"},
      {"token past the vocabulary",
       {{1, 2, kVocab}, 4},
       absl::StatusCode::kInvalidArgument,
       "prompt token 2 is 16, outside the vocabulary of 16"},
      {"negative token", {{-1, 2}, 4}, absl::StatusCode::kInvalidArgument, "prompt token 0 is -1"},
      {"prompt as long as the context",
       {Prompt(2, kContext), 4},
       absl::StatusCode::kOutOfRange,
       "the prompt's 64 tokens leave no room in the context of 64"},
      {"no new tokens",
       {Prompt(2, 3), 0},
       absl::StatusCode::kInvalidArgument,
       "max_new_tokens is 0; it must be at least 1"},
      {"no samples", no_samples, absl::StatusCode::kInvalidArgument,
       "num_samples must be at least 1, got 0"},
      {"more than the pool",
       {Prompt(2, 30), 20},
       absl::StatusCode::kResourceExhausted,
       "its 49 cached tokens would take 13 KV blocks of 4 tokens; the pool has 8"},
      {"bad sampling parameters", bad_temperature, absl::StatusCode::kInvalidArgument,
       "temperature"},
  };
  const int32_t free_blocks = scheduler->kv_blocks().num_free_blocks();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<RequestId> refused =
        scheduler->Submit(c.request.prompt, c.request.params, c.request.max_new_tokens,
                          c.request.stop_tokens, c.request.num_samples);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), c.code) << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("request "));
    EXPECT_THAT(refused.status().message(), HasSubstr(c.message));
  }
  // A refusal queues nothing and leaves no result behind.
  EXPECT_EQ(scheduler->kv_blocks().num_free_blocks(), free_blocks);
  for (RequestId id = before_id + 1; id <= before_id + static_cast<RequestId>(cases.size()); ++id) {
    EXPECT_EQ(scheduler->TakeResult(id).status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(scheduler->Cancel(id).code(), absl::StatusCode::kNotFound);
  }

  const TestRequest after = {Prompt(3, 3), 4};
  const RequestId after_id = MustSubmit(*scheduler, after);
  ASSERT_TRUE(StepUntilIdle(*scheduler));
  ExpectReferenceOutputs({before, after},
                         {MustTake(*scheduler, before_id), MustTake(*scheduler, after_id)});
  ExpectEveryBlockFree(*scheduler);
}

TEST(BatchSchedulerTest, RefusesABudgetOrContextItCannotUse) {
  FakeStepRunner runner = MakeRunner();
  for (int64_t budget : {int64_t{0}, kMaxTokensPerStep + 1}) {
    absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, budget);
    EXPECT_EQ(scheduler.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(scheduler.status().message(), HasSubstr("max_batch_tokens must be 1 to"));
  }
  absl::StatusOr<BatchScheduler> scheduler =
      MakeScheduler(runner, kMaxTokensPerStep, /*prefix_caching=*/true, /*context_length=*/1);
  EXPECT_EQ(scheduler.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(scheduler.status().message(), HasSubstr("the context must hold"));
}

TEST(BatchSchedulerTest, HandsEachResultOverOnceAndIdlesWithoutSteps) {
  FakeStepRunner runner = MakeRunner();
  absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, kMaxTokensPerStep);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  EXPECT_TRUE(scheduler->Idle());
  ASSERT_TRUE(scheduler->Step().ok());
  EXPECT_EQ(runner.steps(), 0);
  const TestRequest request = {Prompt(14, 4), 3};
  const RequestId id = MustSubmit(*scheduler, request);
  EXPECT_FALSE(scheduler->Idle());
  EXPECT_EQ(scheduler->TakeResult(id).status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(StepUntilIdle(*scheduler));
  ExpectReferenceOutputs({request}, {MustTake(*scheduler, id)});
  EXPECT_EQ(scheduler->TakeResult(id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(scheduler->TakeResult(id + 1).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(scheduler->Step().ok());
  EXPECT_EQ(scheduler->counters().steps, 3);
  ExpectEveryBlockFree(*scheduler);
}

// Random requests (a third sharing a beginning, some of several samples,
// some sampled, some with stop tokens, some cancelled) arriving over time
// through pools far too small for them, under budgets from 1 token on:
// every sample must be its reference, no step over its budget, the pool
// empty at the end.
TEST(BatchSchedulerTest, StressRandomRequestsThroughSmallPools) {
  std::mt19937 random(20261202);
  const auto below = [&random](int64_t bound) { return static_cast<int64_t>(random() % bound); };
  int64_t preemptions = 0;
  int64_t prefix_hits = 0;
  int64_t cancelled = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t num_blocks = 2 + below(16);
    const int64_t budget = 1 + below(16);
    const bool prefix_caching = below(3) != 0;
    SCOPED_TRACE(absl::StrCat("trial ", trial, ": ", num_blocks, " blocks, budget ", budget,
                              ", prefix caching ", prefix_caching));
    const std::vector<int32_t> shared = Prompt(static_cast<int32_t>(below(kVocab)), 9);
    std::vector<TestRequest> requests;
    for (int r = 0; r < 12; ++r) {
      TestRequest request;
      if (r % 3 == 0 && num_blocks > 4) request.prompt = shared;
      const int64_t length = 1 + below(std::min<int64_t>(16, 2 * num_blocks));
      for (int64_t i = 0; i < length; ++i) {
        request.prompt.push_back(static_cast<int32_t>(below(kVocab)));
      }
      // A sample may hold the whole pool, and a quarter do.
      const int64_t most_new =
          num_blocks * kBlockSize + 1 - static_cast<int64_t>(request.prompt.size());
      request.max_new_tokens = below(4) == 0 ? most_new : std::min(1 + below(24), most_new);
      request.submit_at_step = below(30);
      if (below(3) == 0) request.params = Seeded(random());
      if (below(4) == 0) request.num_samples = 2 + below(4);
      if (below(4) == 0) request.stop_tokens = {static_cast<int32_t>(below(kVocab))};
      if (below(6) == 0) request.cancel_at_step = request.submit_at_step + below(12);
      requests.push_back(std::move(request));
    }
    FakeStepRunner runner = MakeRunner(num_blocks);
    runner.RecordSteps();
    absl::StatusOr<BatchScheduler> scheduler = MakeScheduler(runner, budget, prefix_caching);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    const std::vector<RequestResult> results = RunRequests(*scheduler, requests);
    ExpectReferenceOutputs(requests, results);
    // What each sample's cache may ever hold: its prompt and reference.
    std::vector<std::vector<int32_t>> whole_samples;
    for (const TestRequest& request : requests) {
      for (int64_t s = 0; s < request.num_samples; ++s) {
        whole_samples.push_back(Concat(request.prompt, Reference(request, s).tokens));
      }
    }
    int64_t seen_tokens = 0;
    for (const RecordedStep& step : runner.recorded_steps()) {
      EXPECT_LE(step.tokens(), budget);
      seen_tokens += step.tokens();
      // Every chunk, not only those whose logits are read, goes where its
      // sequence's block table says.
      for (const auto& sequence : step.sequences) {
        EXPECT_TRUE(std::any_of(
            whole_samples.begin(), whole_samples.end(),
            [&](const std::vector<int32_t>& whole) { return StartsWith(whole, sequence.context); }))
            << "a step's cache holds tokens no sample has";
      }
    }
    EXPECT_EQ(seen_tokens, scheduler->counters().computed_tokens);
    int64_t request_preemptions = 0;
    int64_t request_prefix_hits = 0;
    for (const RequestResult& result : results) {
      request_preemptions += result.metrics.preemptions;
      request_prefix_hits += result.metrics.prefix_cached_tokens;
      EXPECT_LE(result.metrics.peak_kv_blocks, num_blocks);
    }
    EXPECT_EQ(request_preemptions, scheduler->counters().preemptions);
    EXPECT_EQ(request_prefix_hits, scheduler->kv_blocks().counters().prefix_hit_tokens);
    preemptions += scheduler->counters().preemptions;
    prefix_hits += scheduler->kv_blocks().counters().prefix_hit_tokens;
    cancelled += scheduler->counters().cancelled_requests;
    ExpectEveryBlockFree(*scheduler);
    if (::testing::Test::HasFailure()) break;
  }
  // Or the stress did not stress.
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(prefix_hits, 0);
  EXPECT_GT(cancelled, 0);
}

// Drafts that the fake model takes in part: of each draft, the first
// `right` tokens are the greedy continuation and the rest are not, `right`
// going round 0, 1, ... max_tokens from call to call, so that steps take
// every draft, some or none. It checks the scheduler's side of Propose's
// contract and records what it was told to forget.
class FakeDrafter final : public Drafter {
 public:
  absl::string_view name() const override { return "fake"; }

  absl::StatusOr<std::vector<std::vector<int32_t>>> Propose(
      absl::Span<const DraftRequest> requests, kv::KvBlockManager& target_cache) override {
    ++calls_;
    std::vector<std::vector<int32_t>> drafts;
    for (const DraftRequest& request : requests) {
      const kv::BlockTable* table = target_cache.FindSequence(request.sequence);
      EXPECT_NE(table, nullptr) << "sequence " << request.sequence;
      if (table != nullptr) {
        EXPECT_EQ(table->num_tokens, request.cached_tokens);
      }
      EXPECT_EQ(request.cached_tokens, static_cast<int64_t>(request.history.size()) - 1);
      EXPECT_GE(request.max_tokens, 1);
      proposed_for_.insert(request.sequence);
      const int64_t right = turn_++ % (request.max_tokens + 1);
      std::vector<int32_t> context(request.history.begin(), request.history.end());
      std::vector<int32_t> draft;
      while (static_cast<int64_t>(draft.size()) < request.max_tokens) {
        const std::vector<float> logits = FakeLogits(context, kVocab);
        int32_t token =
            static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
        if (static_cast<int64_t>(draft.size()) >= right) token = (token + 1) % kVocab;
        draft.push_back(token);
        context.push_back(token);
      }
      drafts.push_back(std::move(draft));
    }
    return drafts;
  }

  absl::Status Forget(kv::SequenceId sequence) override {
    forgotten_.insert(sequence);
    return absl::OkStatus();
  }

  int64_t calls() const { return calls_; }
  const absl::flat_hash_set<kv::SequenceId>& proposed_for() const { return proposed_for_; }
  const absl::flat_hash_set<kv::SequenceId>& forgotten() const { return forgotten_; }

 private:
  int64_t calls_ = 0;
  int64_t turn_ = 0;
  absl::flat_hash_set<kv::SequenceId> proposed_for_;
  absl::flat_hash_set<kv::SequenceId> forgotten_;
};

absl::StatusOr<BatchScheduler> MakeSpeculatingScheduler(StepRunner& runner, int64_t budget,
                                                        bool prefix_caching, Drafter& drafter,
                                                        int64_t draft_tokens,
                                                        int64_t max_batch = 64) {
  BatchSchedulerOptions options;
  options.max_batch_tokens = budget;
  options.context_length = kContext;
  options.enable_prefix_caching = prefix_caching;
  options.drafter = &drafter;
  options.draft_tokens = draft_tokens;
  options.speculation_max_batch = max_batch;
  return BatchScheduler::Create(runner, options);
}

// Greedy samples that draft keep their reference tokens however requests
// are batched, preempted, cancelled, forked (their drafts written into
// blocks copied on write) and ended by stop tokens in the middle of a
// step's accepted drafts; the pool ends empty, every sample is forgotten,
// and each step carried its drafts within the budget.
TEST(BatchSchedulerTest, StressSpeculatingRequestsThroughSmallPools) {
  std::mt19937 random(20261206);
  const auto below = [&random](int64_t bound) { return static_cast<int64_t>(random() % bound); };
  int64_t accepted = 0;
  int64_t rejected = 0;
  int64_t preemptions = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t num_blocks = 3 + below(16);
    const int64_t budget = 1 + below(16);
    const bool prefix_caching = below(2) != 0;
    const int64_t draft_tokens = 1 + below(6);
    SCOPED_TRACE(absl::StrCat("trial ", trial, ": ", num_blocks, " blocks, budget ", budget,
                              ", prefix caching ", prefix_caching, ", ", draft_tokens, " drafts"));
    std::vector<TestRequest> requests;
    for (int r = 0; r < 10; ++r) {
      TestRequest request;
      request.prompt = Prompt(static_cast<int32_t>(below(kVocab)), 1 + below(2 * num_blocks));
      const int64_t most_new =
          num_blocks * kBlockSize + 1 - static_cast<int64_t>(request.prompt.size());
      request.max_new_tokens = std::max<int64_t>(1, std::min(1 + below(24), most_new));
      request.submit_at_step = below(20);
      if (below(3) == 0) request.num_samples = 2 + below(3);
      if (below(4) == 0) request.stop_tokens = {static_cast<int32_t>(below(kVocab))};
      if (below(6) == 0) request.cancel_at_step = request.submit_at_step + below(12);
      requests.push_back(std::move(request));
    }
    FakeStepRunner runner = MakeRunner(num_blocks);
    runner.RecordSteps();
    FakeDrafter drafter;
    absl::StatusOr<BatchScheduler> scheduler =
        MakeSpeculatingScheduler(runner, budget, prefix_caching, drafter, draft_tokens);
    ASSERT_TRUE(scheduler.ok()) << scheduler.status();
    const std::vector<RequestResult> results = RunRequests(*scheduler, requests);
    ExpectReferenceOutputs(requests, results);
    for (const RecordedStep& step : runner.recorded_steps()) EXPECT_LE(step.tokens(), budget);
    const SchedulerCounters& counters = scheduler->counters();
    int64_t request_drafted = 0;
    int64_t request_accepted = 0;
    for (const RequestResult& result : results) {
      EXPECT_LE(result.metrics.accepted_tokens, result.metrics.drafted_tokens);
      request_drafted += result.metrics.drafted_tokens;
      request_accepted += result.metrics.accepted_tokens;
    }
    EXPECT_EQ(request_drafted, counters.drafted_tokens);
    EXPECT_EQ(request_accepted, counters.accepted_tokens);
    EXPECT_LE(drafter.calls(), counters.steps);
    for (kv::SequenceId sequence : drafter.proposed_for()) {
      EXPECT_TRUE(drafter.forgotten().contains(sequence)) << "sequence " << sequence;
    }
    accepted += counters.accepted_tokens;
    rejected += counters.drafted_tokens - counters.accepted_tokens;
    preemptions += counters.preemptions;
    ExpectEveryBlockFree(*scheduler);
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
  EXPECT_GT(preemptions, 0);
}

TEST(BatchSchedulerTest, SpeculatesOnlyWhileFewSequencesDecode) {
  FakeStepRunner runner = MakeRunner();
  FakeDrafter drafter;
  absl::StatusOr<BatchScheduler> scheduler =
      MakeSpeculatingScheduler(runner, 64, true, drafter, 3, /*max_batch=*/2);
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();
  // Three decode together, then two: only then are drafts asked for.
  const std::vector<TestRequest> requests = {
      {Prompt(1, 5), 20}, {Prompt(2, 6), 20}, {Prompt(3, 7), 6}};
  ExpectReferenceOutputs(requests, RunRequests(*scheduler, requests, [&] {
                           if (scheduler->num_running_sequences() > 2) {
                             EXPECT_EQ(drafter.calls(), 0);
                           }
                         }));
  EXPECT_GT(drafter.calls(), 0);
  EXPECT_GT(scheduler->counters().verify_steps, 0);
}

TEST(BatchSchedulerTest, RefusesADrafterWithoutDraftTokens) {
  FakeStepRunner runner = MakeRunner();
  FakeDrafter drafter;
  for (const auto& [draft_tokens, max_batch] : {std::pair<int64_t, int64_t>{0, 8}, {3, 0}}) {
    absl::StatusOr<BatchScheduler> scheduler =
        MakeSpeculatingScheduler(runner, 64, true, drafter, draft_tokens, max_batch);
    ASSERT_FALSE(scheduler.ok());
    EXPECT_EQ(scheduler.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(scheduler.status().message(),
                HasSubstr("speculative decoding needs draft_tokens and speculation_max_batch"));
  }
}

}  // namespace
}  // namespace kvjit::runtime
