// The scheduler thread over a fake model: each choice's streamed text is what
// the scheduler generates for it, stop strings cut it, log-probabilities
// come from the logits it was drawn from, an abandoned request leaves the
// batch with its blocks, and a full queue refuses more.

#include "tools/serve/SchedulerThread.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/sampling/Sampler.h"
#include "tests/unit/runtime/generation/FakeStepRunner.h"
#include "tools/serve/ApiError.h"
#include "tools/serve/OpenAiResponses.h"

namespace kvjit::serve {
namespace {

using ::kvjit::testing::FakeLogits;
using ::kvjit::testing::FakeStepRunner;
using ::testing::HasSubstr;

constexpr int64_t kVocab = 16;
constexpr int64_t kBlockSize = 4;
constexpr int64_t kContext = 64;

// Token t is the letter 'a' + t.
class LetterCodec final : public TextCodec {
 public:
  absl::StatusOr<std::vector<int32_t>> EncodePrompt(absl::string_view text) const override {
    std::vector<int32_t> tokens;
    for (char c : text) tokens.push_back(c - 'a');
    return tokens;
  }
  absl::StatusOr<std::vector<int32_t>> EncodeChat(absl::Span<const ChatMessage> messages,
                                                  const nlohmann::ordered_json&) const override {
    std::string text;
    for (const ChatMessage& message : messages) text += message.content;
    return EncodePrompt(text);
  }
  std::string Decode(absl::Span<const int32_t> tokens) const override {
    std::string text;
    for (int32_t token : tokens) text += TokenBytes(token);
    return text;
  }
  std::string TokenBytes(int32_t token) const override { return std::string(1, 'a' + token); }
  std::unique_ptr<TokenTextStream> NewTextStream() const override {
    class Letters final : public TokenTextStream {
     public:
      std::string Push(int32_t token) override { return std::string(1, 'a' + token); }
      std::string Flush() override { return ""; }
    };
    return std::make_unique<Letters>();
  }
  std::vector<int32_t> EndOfGenerationTokens() const override { return {}; }
  int32_t vocab_size() const override { return kVocab; }
  ToolCallFormat tool_call_format() const override { return ToolCallFormat::kHermes; }
  absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> CompileGrammar(
      const grammar::GrammarSpec&) const override {
    return absl::FailedPreconditionError("the fake vocabulary compiles no grammar");
  }
};

// FakeStepRunner taking a millisecond a step, so that a request of many
// tokens is still running when the test acts on it.
class SlowStepRunner final : public runtime::StepRunner {
 public:
  explicit SlowStepRunner(int64_t num_blocks) : runner_(num_blocks, kBlockSize, kVocab, 64) {}
  int64_t num_blocks() const override { return runner_.num_blocks(); }
  int64_t vocab_size() const override { return runner_.vocab_size(); }
  int64_t max_tokens_per_step() const override { return runner_.max_tokens_per_step(); }
  int64_t block_size() const override { return runner_.block_size(); }
  absl::Status CopyBlock(int64_t source, int64_t destination) override {
    return runner_.CopyBlock(source, destination);
  }
  absl::StatusOr<absl::Span<const float>> Run(const runtime::StepInputs& inputs) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return runner_.Run(inputs);
  }

 private:
  FakeStepRunner runner_;
};

// What a request's choices got, once it finished.
struct Outcome {
  std::vector<ChoiceText> choices;
  RequestUsage usage;
  absl::Status error;
};

Outcome WaitForOutcome(RequestStream& stream, int64_t num_choices) {
  Outcome outcome;
  outcome.choices.resize(num_choices);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    RequestStream::Update update = stream.Wait(std::chrono::milliseconds(50));
    for (const ChoiceDelta& delta : update.deltas) outcome.choices[delta.index].Add(delta);
    outcome.error = update.error;
    outcome.usage = update.usage;
    if (update.finished()) return outcome;
  }
  outcome.error = absl::DeadlineExceededError("the request did not finish");
  return outcome;
}

class SchedulerThreadTest : public ::testing::Test {
 protected:
  void StartSchedulerThread(int64_t num_blocks = 64, int64_t max_queued = 16) {
    runner_ = std::make_unique<SlowStepRunner>(num_blocks);
    SchedulerThreadOptions options;
    options.max_batch_tokens = 8;
    options.context_length = kContext;
    options.max_queued = max_queued;
    auto started = SchedulerThread::Start(*runner_, codec_, options, metrics_);
    ASSERT_TRUE(started.ok()) << started.status();
    scheduler_thread_ = *std::move(started);
  }

  static TokenizedRequest Request(std::vector<int32_t> prompt, int64_t max_tokens,
                                  int64_t num_choices = 1, uint64_t seed = 5) {
    TokenizedRequest request;
    request.prompt = std::move(prompt);
    request.sampling.seed = seed;
    request.num_choices = num_choices;
    request.stop.max_tokens = max_tokens;
    return request;
  }

  // The tokens a scheduler of its own generates for `request`, per sample.
  static std::vector<std::vector<int32_t>> Reference(const TokenizedRequest& request) {
    FakeStepRunner runner(64, kBlockSize, kVocab, 64);
    runtime::BatchSchedulerOptions options;
    options.max_batch_tokens = 8;
    options.context_length = kContext;
    auto scheduler = runtime::BatchScheduler::Create(runner, options);
    EXPECT_TRUE(scheduler.ok());
    auto id = scheduler->Submit(request.prompt, request.sampling, *request.stop.max_tokens,
                                request.stop.stop_token_ids, request.num_choices);
    EXPECT_TRUE(id.ok());
    while (!scheduler->Idle()) EXPECT_TRUE(scheduler->Step().ok());
    auto result = scheduler->TakeResult(*id);
    std::vector<std::vector<int32_t>> tokens;
    for (const auto& sample : result->samples) tokens.push_back(sample.tokens);
    return tokens;
  }

  std::string Letters(const std::vector<int32_t>& tokens) const { return codec_.Decode(tokens); }

  LetterCodec codec_;
  ServerMetrics metrics_;
  std::unique_ptr<SlowStepRunner> runner_;
  std::unique_ptr<SchedulerThread> scheduler_thread_;
};

TEST_F(SchedulerThreadTest, StreamsEachChoicesTokensAsText) {
  StartSchedulerThread();
  const TokenizedRequest request = Request({1, 2, 3, 4, 5, 6}, 12, /*num_choices=*/3);
  const std::vector<std::vector<int32_t>> expected = Reference(request);
  // Another request in the batch changes nothing.
  auto other = scheduler_thread_->Submit(Request({9, 8, 7}, 20));
  auto stream = scheduler_thread_->Submit(request);
  ASSERT_TRUE(stream.ok() && other.ok());
  Outcome outcome = WaitForOutcome(**stream, 3);
  ASSERT_TRUE(outcome.error.ok()) << outcome.error;
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(outcome.choices[i].text, Letters(expected[i])) << i;
    EXPECT_EQ(outcome.choices[i].finish, ChoiceFinish::kLength);
  }
  EXPECT_EQ(outcome.usage.prompt_tokens, 6);
  EXPECT_EQ(outcome.usage.completion_tokens, 36);
  EXPECT_TRUE(WaitForOutcome(**other, 1).error.ok());
}

TEST_F(SchedulerThreadTest, StopStringCutsItsChoice) {
  StartSchedulerThread();
  TokenizedRequest request = Request({1, 2, 3}, 20);
  const std::string full = Letters(Reference(request)[0]);
  request.stop.stop_strings = {full.substr(5, 2)};
  const std::string expected = full.substr(0, full.find(full.substr(5, 2)));
  auto stream = scheduler_thread_->Submit(request);
  ASSERT_TRUE(stream.ok());
  Outcome outcome = WaitForOutcome(**stream, 1);
  ASSERT_TRUE(outcome.error.ok()) << outcome.error;
  EXPECT_EQ(outcome.choices[0].text, expected);
  EXPECT_EQ(outcome.choices[0].finish, ChoiceFinish::kStop);
  EXPECT_LT(outcome.usage.completion_tokens, 20);
}

TEST_F(SchedulerThreadTest, LogprobsComeFromTheLogitsEachTokenWasDrawnFrom) {
  StartSchedulerThread();
  TokenizedRequest request = Request({4, 4, 2}, 6);
  request.top_logprobs = 3;
  const std::vector<int32_t> tokens = Reference(request)[0];
  auto stream = scheduler_thread_->Submit(request);
  ASSERT_TRUE(stream.ok());
  Outcome outcome = WaitForOutcome(**stream, 1);
  ASSERT_TRUE(outcome.error.ok()) << outcome.error;
  const std::vector<TokenLogprob>& logprobs = outcome.choices[0].logprobs;
  ASSERT_EQ(logprobs.size(), tokens.size());
  std::vector<int32_t> context = request.prompt;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<float> expected = sampling::LogSoftmax(FakeLogits(context, kVocab));
    EXPECT_EQ(logprobs[i].token, tokens[i]);
    EXPECT_FLOAT_EQ(logprobs[i].logprob, expected[tokens[i]]);
    ASSERT_EQ(logprobs[i].top.size(), 3u);
    EXPECT_GE(logprobs[i].top[0].second, logprobs[i].top[1].second);
    EXPECT_GE(logprobs[i].top[1].second, logprobs[i].top[2].second);
    context.push_back(tokens[i]);
  }
}

TEST_F(SchedulerThreadTest, AnAbandonedRequestLeavesTheBatchWithItsBlocks) {
  StartSchedulerThread();
  auto stream = scheduler_thread_->Submit(Request({1, 2, 3, 4, 5}, 60));
  ASSERT_TRUE(stream.ok());
  // Waits for its first tokens, then goes away.
  while (true) {
    RequestStream::Update update = (*stream)->Wait(std::chrono::milliseconds(50));
    ASSERT_FALSE(update.finished());
    if (!update.deltas.empty()) break;
  }
  (*stream)->Cancel();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::string metrics;
  while (std::chrono::steady_clock::now() < deadline) {
    metrics = metrics_.RenderPrometheus();
    if (metrics.find("kvjit_requests_cancelled_total 1\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_THAT(metrics, HasSubstr("kvjit_requests_cancelled_total 1\n"));
  EXPECT_THAT(metrics, HasSubstr("kvjit_kv_blocks_used 0\n"));
  EXPECT_THAT(metrics, HasSubstr("kvjit_num_requests_running 0\n"));
  // The scheduler thread goes on serving.
  auto next = scheduler_thread_->Submit(Request({3, 2, 1}, 4));
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(WaitForOutcome(**next, 1).error.ok());
}

TEST_F(SchedulerThreadTest, AFullQueueRefusesWithResourceExhausted) {
  StartSchedulerThread(/*num_blocks=*/64, /*max_queued=*/0);
  auto stream = scheduler_thread_->Submit(Request({1, 2}, 3));
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(HttpStatusFor(stream.status()), 429);
  EXPECT_THAT(std::string(stream.status().message()), HasSubstr("--max_queued"));
  EXPECT_THAT(metrics_.RenderPrometheus(), HasSubstr("kvjit_requests_rejected_total 1\n"));
}

TEST_F(SchedulerThreadTest, ARequestThePoolCanNeverHoldIsTheRequestsFault) {
  StartSchedulerThread(/*num_blocks=*/4);
  auto stream = scheduler_thread_->Submit(Request({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 30));
  ASSERT_TRUE(stream.ok());
  Outcome outcome = WaitForOutcome(**stream, 1);
  EXPECT_EQ(HttpStatusFor(outcome.error), 400) << outcome.error;
  EXPECT_THAT(std::string(outcome.error.message()), HasSubstr("KV blocks"));
}

TEST_F(SchedulerThreadTest, BeamSearchWaitsForTheBatchThenRunsAlone) {
  StartSchedulerThread();
  auto sampled = scheduler_thread_->Submit(Request({7, 7, 7}, 30));
  TokenizedRequest beam_request = Request({1, 2, 3, 4}, 8, /*num_choices=*/2);
  runtime::BeamSearchParams beam;
  beam.num_beams = 3;
  beam.num_return_sequences = 2;
  beam.max_new_tokens = 8;
  beam_request.beam_search = beam;
  auto beam_stream = scheduler_thread_->Submit(beam_request);
  ASSERT_TRUE(sampled.ok() && beam_stream.ok());

  FakeStepRunner runner(64, kBlockSize, kVocab, 64);
  auto expected = runtime::BeamSearch(runner, kContext).Search(beam_request.prompt, beam);
  ASSERT_TRUE(expected.ok());
  Outcome outcome = WaitForOutcome(**beam_stream, 2);
  ASSERT_TRUE(outcome.error.ok()) << outcome.error;
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(outcome.choices[i].text, Letters(expected->hypotheses[i].tokens)) << i;
  }
  EXPECT_TRUE(WaitForOutcome(**sampled, 1).error.ok());
}

}  // namespace
}  // namespace kvjit::serve
