// Speculative decoding in the in-flight batching scheduler: however many
// requests decode beside each other, arrive while others run, fork into
// samples or stop in the middle of a step's accepted drafts, greedy output
// is token for token that without drafts, the rejected drafts' blocks go
// back to the pool, and the counters add up. On stories260K and, where it
// was fetched, SmolLM2.

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/driver/Compiler.h"
#include "gtest/gtest.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/generation/BatchScheduler.h"
#include "runtime/generation/Drafter.h"
#include "runtime/generation/ModelDrafter.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/e2e/LlamaCppComparison.h"

namespace kvjit {
namespace {

using runtime::FinishReason;

struct TestRequest {
  std::vector<int32_t> prompt;
  int64_t max_new_tokens;
  int64_t submit_at_step;
  int64_t num_samples = 1;
};

struct Speculation {
  runtime::Drafter* drafter = nullptr;
  int64_t draft_tokens = 0;
  int64_t max_batch = 64;
};

struct BatchRun {
  std::vector<runtime::RequestResult> results;
  runtime::SchedulerCounters counters;
  kv::KvBlockCounters kv;
};

sampling::SamplingParams Greedy() {
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  return greedy;
}

// A prompt that repeats a `period`-token phrase, so that the n-gram lookup
// finds drafts; `variant` changes the phrase.
std::vector<int32_t> CopyHeavyPrompt(int32_t vocab, int64_t variant, int64_t period, int64_t length) {
  std::vector<int32_t> prompt = {1};
  for (int64_t i = 0; i < length; ++i) {
    prompt.push_back(static_cast<int32_t>(3 + (11 * (i % period) + 29 * variant) % (vocab - 3)));
  }
  return prompt;
}

// `count` copy-heavy requests of different lengths, one arriving per step.
std::vector<TestRequest> StaggeredRequests(int32_t vocab, int64_t count, int64_t new_tokens) {
  std::vector<TestRequest> requests;
  for (int64_t i = 0; i < count; ++i) {
    requests.push_back(
        {CopyHeavyPrompt(vocab, i, 5 + i % 4, 24 + 3 * i), new_tokens + i % 5, i});
  }
  return requests;
}

void ExpectEveryBlockFree(const runtime::BatchScheduler& scheduler) {
  const kv::KvBlockManager& blocks = scheduler.kv_blocks();
  EXPECT_EQ(blocks.num_free_blocks(), blocks.num_blocks());
  EXPECT_EQ(blocks.counters().blocks_in_use, 0);
  EXPECT_EQ(blocks.num_sequences(), 0);
}

// Sees each token with the index of its request in the test's list.
using IndexedObserver = std::function<bool(size_t request_index, const runtime::SampledToken&)>;

// Submits each request at its step and steps until all are done; every
// block must be back in the pool at the end.
BatchRun RunBatched(runtime::StepRunner& runner, int64_t context_length,
                    const std::vector<TestRequest>& requests, const Speculation& speculation,
                    const IndexedObserver& observer = nullptr) {
  runtime::BatchSchedulerOptions options;
  options.max_batch_tokens = runner.max_tokens_per_step();
  options.context_length = context_length;
  options.drafter = speculation.drafter;
  options.draft_tokens = speculation.draft_tokens;
  options.speculation_max_batch = speculation.max_batch;
  BatchRun run;
  auto scheduler = runtime::BatchScheduler::Create(runner, options);
  EXPECT_TRUE(scheduler.ok()) << scheduler.status();
  if (!scheduler.ok()) return run;
  std::map<runtime::RequestId, size_t> index_of;
  if (observer) {
    scheduler->SetTokenObserver([&](const runtime::SampledToken& token) {
      return observer(index_of.at(token.request), token);
    });
  }
  std::vector<runtime::RequestId> ids(requests.size());
  size_t submitted = 0;
  for (int64_t step = 0; submitted < requests.size() || !scheduler->Idle(); ++step) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].submit_at_step != step) continue;
      auto id = scheduler->Submit(requests[i].prompt, Greedy(), requests[i].max_new_tokens, {},
                                  requests[i].num_samples);
      EXPECT_TRUE(id.ok()) << id.status();
      ids[i] = id.ok() ? *id : -1;
      index_of[ids[i]] = i;
      ++submitted;
    }
    const absl::Status status = scheduler->Step();
    EXPECT_TRUE(status.ok()) << status;
    if (!status.ok() || step > 100000) return run;
  }
  for (runtime::RequestId id : ids) {
    auto result = scheduler->TakeResult(id);
    EXPECT_TRUE(result.ok()) << result.status();
    run.results.push_back(result.ok() ? *std::move(result) : runtime::RequestResult{});
  }
  run.counters = scheduler->counters();
  run.kv = scheduler->kv_blocks().counters();
  ExpectEveryBlockFree(*scheduler);
  return run;
}

// The speculative run's tokens are the plain run's, sample for sample, and
// its counters add up: drafts counted per request sum to the scheduler's,
// and every drafted token fed and every accepted one spared a step.
void ExpectSameTokensAndCountersAddUp(const BatchRun& plain, const BatchRun& drafted) {
  ASSERT_EQ(plain.results.size(), drafted.results.size());
  int64_t request_drafted = 0, request_accepted = 0, request_verifies = 0;
  for (size_t i = 0; i < plain.results.size(); ++i) {
    const auto& expected = plain.results[i].samples;
    const auto& got = drafted.results[i].samples;
    ASSERT_EQ(got.size(), expected.size()) << "request " << i;
    for (size_t s = 0; s < got.size(); ++s) {
      EXPECT_EQ(got[s].tokens, expected[s].tokens) << "request " << i << " sample " << s;
      EXPECT_EQ(got[s].finish_reason, expected[s].finish_reason) << "request " << i;
    }
    const runtime::RequestMetrics& m = drafted.results[i].metrics;
    EXPECT_LE(m.accepted_tokens, m.drafted_tokens) << "request " << i;
    EXPECT_LE(m.verify_steps, m.drafted_tokens) << "request " << i;
    request_drafted += m.drafted_tokens;
    request_accepted += m.accepted_tokens;
    request_verifies += m.verify_steps;
  }
  const runtime::SchedulerCounters& c = drafted.counters;
  EXPECT_EQ(c.drafted_tokens, request_drafted);
  EXPECT_EQ(c.accepted_tokens, request_accepted);
  EXPECT_EQ(c.verify_steps, request_verifies);
  EXPECT_LE(c.accepted_tokens, c.drafted_tokens);
  EXPECT_EQ(plain.counters.drafted_tokens, 0);
  EXPECT_EQ(c.preemptions, 0);
  EXPECT_EQ(plain.counters.preemptions, 0);
  EXPECT_EQ((c.computed_tokens + drafted.kv.prefix_hit_tokens) -
                (plain.counters.computed_tokens + plain.kv.prefix_hit_tokens),
            c.drafted_tokens - c.accepted_tokens);
}

class SpeculativeSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = testing::SharedPath("models/stories260K.gguf");
    if (path.empty()) GTEST_SKIP() << "../shared/models/stories260K.gguf is missing";
    model_path_ = path;
    auto executable = testing::CompileAndLoad(path, codegen::CompileOptions());
    ASSERT_TRUE(executable.ok()) << executable.status();
    executable_ = *std::move(executable);
    auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/192, /*threads=*/2);
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = *std::move(runner);
  }

  // A draft model that is the target itself, with a pool of its own: every
  // draft is the target's own choice.
  std::unique_ptr<runtime::ModelDrafter> SelfDrafter() {
    auto draft = testing::CompileAndLoad(model_path_, codegen::CompileOptions());
    EXPECT_TRUE(draft.ok()) << draft.status();
    if (!draft.ok()) return nullptr;
    auto draft_runner = runtime::CpuStepRunner::Create(**draft, /*num_blocks=*/384, /*threads=*/2);
    EXPECT_TRUE(draft_runner.ok()) << draft_runner.status();
    if (!draft_runner.ok()) return nullptr;
    auto drafter = runtime::ModelDrafter::WithOwnCache(*std::move(draft), *std::move(draft_runner));
    EXPECT_TRUE(drafter.ok()) << drafter.status();
    return drafter.ok() ? *std::move(drafter) : nullptr;
  }

  int32_t vocab() const { return static_cast<int32_t>(runner_->vocab_size()); }
  int64_t context() const { return executable_->config().context_length(); }

  std::string model_path_;
  std::unique_ptr<runtime::Executable> executable_;
  std::unique_ptr<runtime::StepRunner> runner_;
};

TEST_F(SpeculativeSchedulerTest, NgramDraftsLeaveGreedyOutputUnchangedAt1And4And16Requests) {
  int64_t accepted = 0;
  for (const int64_t count : {1, 4, 16}) {
    SCOPED_TRACE(::testing::Message() << count << " requests");
    const std::vector<TestRequest> requests = StaggeredRequests(vocab(), count, 40);
    const BatchRun plain = RunBatched(*runner_, context(), requests, {});
    runtime::NgramDrafter drafter(2, 3);
    const BatchRun drafted = RunBatched(*runner_, context(), requests, {&drafter, 4});
    ExpectSameTokensAndCountersAddUp(plain, drafted);
    EXPECT_GT(drafted.counters.verify_steps, 0);
    accepted += drafted.counters.accepted_tokens;
  }
  EXPECT_GT(accepted, 0) << "the copying prompts were meant to have drafts taken";
}

TEST_F(SpeculativeSchedulerTest, ALargeBatchDoesNotSpeculateUntilItShrinks) {
  const std::vector<TestRequest> requests = StaggeredRequests(vocab(), 16, 30);
  const BatchRun plain = RunBatched(*runner_, context(), requests, {});
  runtime::NgramDrafter drafter(2, 3);
  const BatchRun wide = RunBatched(*runner_, context(), requests, {&drafter, 4, 64});
  const BatchRun narrow = RunBatched(*runner_, context(), requests, {&drafter, 4, 2});
  ExpectSameTokensAndCountersAddUp(plain, narrow);
  EXPECT_LT(narrow.counters.verify_steps, wide.counters.verify_steps);
}

TEST_F(SpeculativeSchedulerTest, ADraftExecutableThatIsTheTargetHasEveryDraftTaken) {
  const std::unique_ptr<runtime::ModelDrafter> drafter = SelfDrafter();
  ASSERT_NE(drafter, nullptr);
  for (const int64_t count : {1, 4, 16}) {
    SCOPED_TRACE(::testing::Message() << count << " requests");
    const std::vector<TestRequest> requests = StaggeredRequests(vocab(), count, 30);
    const BatchRun plain = RunBatched(*runner_, context(), requests, {});
    const BatchRun drafted = RunBatched(*runner_, context(), requests, {drafter.get(), 3});
    ExpectSameTokensAndCountersAddUp(plain, drafted);
    EXPECT_GT(drafted.counters.drafted_tokens, 0);
    EXPECT_EQ(drafted.counters.accepted_tokens, drafted.counters.drafted_tokens);
    // The scheduler forgot every sample as it finished.
    EXPECT_EQ(drafter->own_blocks_in_use(), 0);
  }
}

// The layer-skipping self-draft drafts over the scheduler's own pool: the
// scheduler asks for drafts before it reserves the step's slots, so each
// sequence holds exactly its cached tokens; the draft writes past them into
// free blocks (copying forked samples' shared blocks on write) and cuts back
// before the step. Greedy output is unchanged, alone, batched and forked,
// and every block is back at the end.
TEST_F(SpeculativeSchedulerTest, TheLayerSkippingSelfDraftSharesThePoolAndLeavesTheOutputUnchanged) {
  codegen::CompileOptions first_layers;
  first_layers.keep_layers = 3;
  auto draft = testing::CompileAndLoad(model_path_, first_layers);
  ASSERT_TRUE(draft.ok()) << draft.status();
  auto draft_runner = runtime::CpuStepRunner::CreateOverPool(
      **draft, static_cast<runtime::CpuStepRunner&>(*runner_), /*threads=*/2);
  ASSERT_TRUE(draft_runner.ok()) << draft_runner.status();
  const std::unique_ptr<runtime::ModelDrafter> drafter =
      runtime::ModelDrafter::OverTargetCache(*std::move(draft), *std::move(draft_runner), 3);
  int64_t drafted_tokens = 0;
  for (const int64_t count : {1, 4, 16}) {
    SCOPED_TRACE(::testing::Message() << count << " requests");
    const std::vector<TestRequest> requests = StaggeredRequests(vocab(), count, 30);
    const BatchRun plain = RunBatched(*runner_, context(), requests, {});
    const BatchRun drafted = RunBatched(*runner_, context(), requests, {drafter.get(), 3, 16});
    ExpectSameTokensAndCountersAddUp(plain, drafted);
    drafted_tokens += drafted.counters.drafted_tokens;
  }
  const std::vector<TestRequest> forked = {
      {CopyHeavyPrompt(vocab(), 0, 6, 40), 40, 0, /*num_samples=*/3}};
  const BatchRun plain = RunBatched(*runner_, context(), forked, {});
  const BatchRun drafted = RunBatched(*runner_, context(), forked, {drafter.get(), 3, 16});
  ExpectSameTokensAndCountersAddUp(plain, drafted);
  drafted_tokens += drafted.counters.drafted_tokens;
  EXPECT_GT(drafted_tokens, 0);
}

// Samples forked from one prompt share its blocks; each writes its drafts
// into blocks of its own (copied on write) and cuts them back without
// touching its siblings'.
TEST_F(SpeculativeSchedulerTest, ForkedGreedySamplesEachKeepTheOutputWithoutDrafts) {
  const std::vector<TestRequest> requests = {
      {CopyHeavyPrompt(vocab(), 0, 6, 40), 48, 0, /*num_samples=*/3},
      {CopyHeavyPrompt(vocab(), 1, 7, 21), 33, 2, /*num_samples=*/3}};
  const BatchRun plain = RunBatched(*runner_, context(), requests, {});
  runtime::NgramDrafter drafter(2, 3);
  const BatchRun drafted = RunBatched(*runner_, context(), requests, {&drafter, 4});
  ExpectSameTokensAndCountersAddUp(plain, drafted);
  for (const runtime::RequestResult& result : drafted.results) {
    ASSERT_EQ(result.samples.size(), 3u);
    for (const runtime::SampleResult& sample : result.samples) {
      EXPECT_EQ(sample.tokens, result.samples[0].tokens);
    }
  }
  EXPECT_GT(drafted.counters.verify_steps, 0);
  EXPECT_GT(drafted.kv.blocks_copied, 0);
}

// max_tokens and the token observer end a sample wherever they fall, in the
// middle of a step's accepted drafts too (the target as its own draft has
// every draft taken): the sample keeps exactly the tokens up to there, and
// the rest of the step's go with their blocks.
TEST_F(SpeculativeSchedulerTest, ASampleEndsExactlyWhereMaxTokensOrTheObserverSays) {
  std::vector<TestRequest> requests;
  for (int64_t i = 0; i < 12; ++i) {
    requests.push_back({CopyHeavyPrompt(vocab(), i % 3, 5, 30), 3 + 2 * i, i % 4});
  }
  const BatchRun plain = RunBatched(*runner_, context(), requests, {});
  const std::unique_ptr<runtime::ModelDrafter> drafter = SelfDrafter();
  ASSERT_NE(drafter, nullptr);
  const BatchRun drafted = RunBatched(*runner_, context(), requests, {drafter.get(), 6});
  ExpectSameTokensAndCountersAddUp(plain, drafted);
  for (size_t i = 0; i < requests.size(); ++i) {
    EXPECT_EQ(static_cast<int64_t>(drafted.results[i].samples[0].tokens.size()),
              requests[i].max_new_tokens);
  }
  EXPECT_GT(drafted.counters.accepted_tokens, drafted.counters.verify_steps)
      << "steps were meant to take several drafts";

  // Request i stops itself after its (i + 2)th token.
  std::vector<int64_t> seen(requests.size(), 0);
  const BatchRun stopped =
      RunBatched(*runner_, context(), requests, {drafter.get(), 6},
                 [&](size_t index, const runtime::SampledToken&) {
                   return ++seen[index] < static_cast<int64_t>(index) + 2;
                 });
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::vector<int32_t>& full = plain.results[i].samples[0].tokens;
    const size_t kept = std::min<size_t>(i + 2, full.size());
    EXPECT_EQ(stopped.results[i].samples[0].tokens,
              std::vector<int32_t>(full.begin(), full.begin() + kept))
        << "request " << i;
    EXPECT_EQ(seen[i], static_cast<int64_t>(kept)) << "request " << i;
    if (kept < full.size()) {
      EXPECT_EQ(stopped.results[i].samples[0].finish_reason, FinishReason::kStopped);
    }
  }
}

TEST(SpeculativeSchedulerSmolLM2Test, NgramDraftsLeaveGreedyOutputUnchanged) {
  const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) GTEST_SKIP() << "SmolLM2 not found: run tools/scripts/fetch_model.sh";
  auto executable = testing::CompileForComparison(path, "f32");
  ASSERT_TRUE(executable.ok()) << executable.status();
  auto runner = runtime::CpuStepRunner::Create(**executable, /*num_blocks=*/128, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const int64_t context = 512;
  int64_t accepted = 0;
  for (const int64_t count : {1, 4, 16}) {
    SCOPED_TRACE(::testing::Message() << count << " requests");
    const std::vector<TestRequest> requests = StaggeredRequests(49152, count, 24);
    const BatchRun plain = RunBatched(**runner, context, requests, {});
    runtime::NgramDrafter drafter(2, 3);
    const BatchRun drafted = RunBatched(**runner, context, requests, {&drafter, 4});
    ExpectSameTokensAndCountersAddUp(plain, drafted);
    accepted += drafted.counters.accepted_tokens;
  }
  EXPECT_GT(accepted, 0);
}

}  // namespace
}  // namespace kvjit
