// Beam search on the compiled stories260K over the CPU runtime's paged cache:
// one beam is greedy decoding, more beams score at least as well, and beams
// share the prompt's KV blocks instead of each holding a copy.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/generation/BeamSearch.h"
#include "runtime/generation/Generator.h"
#include "runtime/sampling/Sampler.h"
#include "tests/unit/e2e/CompiledStoriesFixture.h"

namespace kvjit {
namespace {

class CompiledStoriesBeamSearchTest : public CompiledStoriesTest {
 protected:
  void SetUp() override {
    CompiledStoriesTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/128, /*threads=*/1);
    ASSERT_TRUE(runner.ok()) << runner.status();
    runner_ = std::move(*runner);
    for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
      if (tokenizer_->IsEndOfGeneration(id)) eos_token_ids_.push_back(id);
    }
    ASSERT_FALSE(eos_token_ids_.empty());
  }

  bool IsEos(int32_t token) const {
    return std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token) != eos_token_ids_.end();
  }

  std::vector<int32_t> Prompt(const std::string& text) {
    auto prompt = tokenizer_->Encode(text, /*add_special=*/true, /*parse_special=*/false);
    EXPECT_TRUE(prompt.ok()) << prompt.status();
    return prompt.ok() ? *prompt : std::vector<int32_t>{};
  }

  // Greedy decoding until an end token or `max_new_tokens`, with the sum of
  // the chosen tokens' log-probabilities.
  runtime::GenerationResult Greedy(const std::vector<int32_t>& prompt, int64_t max_new_tokens,
                                   bool stop_at_eos, double* sum_logprobs = nullptr) {
    runtime::Generator generator(*runner_, model_->config.context_length);
    sampling::SamplingParams greedy;
    greedy.temperature = 0;
    std::vector<float> logprobs;
    double sum = 0;
    auto result = generator.Generate(
        prompt, greedy, max_new_tokens,
        [&](int32_t token) {
          sum += logprobs[token];
          return !(stop_at_eos && IsEos(token));
        },
        [&](absl::Span<const float> logits) { logprobs = sampling::LogSoftmax(logits); });
    EXPECT_TRUE(result.ok()) << result.status();
    if (sum_logprobs != nullptr) *sum_logprobs = sum;
    return result.ok() ? *std::move(result) : runtime::GenerationResult{};
  }

  runtime::BeamSearchParams Beams(int32_t num_beams, int64_t max_new_tokens) const {
    runtime::BeamSearchParams params;
    params.request_id = "stories260K beam search";
    params.num_beams = num_beams;
    params.num_return_sequences = num_beams;
    params.max_new_tokens = max_new_tokens;
    params.eos_token_ids = eos_token_ids_;
    return params;
  }

  std::unique_ptr<runtime::CpuStepRunner> runner_;
  std::vector<int32_t> eos_token_ids_;
};

TEST_F(CompiledStoriesBeamSearchTest, OneBeamIsGreedyDecoding) {
  for (const char* text : {"Once upon a time", "The cat sat on the mat. Then"}) {
    SCOPED_TRACE(text);
    const std::vector<int32_t> prompt = Prompt(text);
    const runtime::GenerationResult greedy = Greedy(prompt, 48, /*stop_at_eos=*/true);
    runtime::BeamSearch search(*runner_, model_->config.context_length);
    auto beam = search.Search(prompt, Beams(1, 48));
    ASSERT_TRUE(beam.ok()) << beam.status();
    ASSERT_EQ(beam->hypotheses.size(), 1u);
    EXPECT_EQ(beam->hypotheses[0].tokens, greedy.tokens);
  }
}

TEST_F(CompiledStoriesBeamSearchTest, FourBeamsAreSortedAndScoreAtLeastAsWellAsGreedy) {
  const std::vector<int32_t> prompt = Prompt("Once upon a time, there was a little dog");
  constexpr int64_t kNewTokens = 24;
  double greedy_sum = 0;
  const runtime::GenerationResult greedy =
      Greedy(prompt, kNewTokens, /*stop_at_eos=*/true, &greedy_sum);
  ASSERT_FALSE(greedy.tokens.empty());
  const double length_penalty = 1.0;
  const double greedy_score =
      greedy_sum / std::pow(static_cast<double>(greedy.tokens.size()), length_penalty);

  runtime::BeamSearch search(*runner_, model_->config.context_length);
  runtime::BeamSearchParams params = Beams(4, kNewTokens);
  params.length_penalty = length_penalty;
  auto beams = search.Search(prompt, params);
  ASSERT_TRUE(beams.ok()) << beams.status();
  ASSERT_EQ(beams->hypotheses.size(), 4u);
  for (size_t i = 1; i < beams->hypotheses.size(); ++i) {
    EXPECT_GE(beams->hypotheses[i - 1].score, beams->hypotheses[i].score) << "hypothesis " << i;
    EXPECT_NE(beams->hypotheses[i - 1].tokens, beams->hypotheses[i].tokens) << "hypothesis " << i;
  }
  // The CPU kernels compute in f32; the scores agree to far better than 1e-3.
  EXPECT_GE(beams->hypotheses[0].score, greedy_score - 1e-3);
  std::printf("greedy score %.4f, best of 4 beams %.4f\n", greedy_score,
              beams->hypotheses[0].score);
}

TEST_F(CompiledStoriesBeamSearchTest, FourBeamsShareThePromptsKvBlocks) {
  std::vector<int32_t> prompt;
  while (prompt.size() < 200) {
    const std::vector<int32_t> more = Prompt(
        "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
        "park with her friends. One day, she saw a big red ball under a tree.");
    ASSERT_FALSE(more.empty());
    prompt.insert(prompt.end(), more.begin() + (prompt.empty() ? 0 : 1), more.end());
  }
  prompt.resize(200);
  constexpr int64_t kNewTokens = 32;
  // No end tokens: both generate all 32 tokens, so that their caches compare.
  const runtime::GenerationResult greedy = Greedy(prompt, kNewTokens, /*stop_at_eos=*/false);
  ASSERT_EQ(greedy.metrics.generated_tokens, kNewTokens);

  runtime::BeamSearch search(*runner_, model_->config.context_length);
  runtime::BeamSearchParams params = Beams(4, kNewTokens);
  params.eos_token_ids.clear();
  auto beams = search.Search(prompt, params);
  ASSERT_TRUE(beams.ok()) << beams.status();
  const runtime::BeamSearchStats& stats = beams->stats;
  const int64_t block_size = executable_->kv_layout().block_size();
  const double ratio = static_cast<double>(stats.peak_kv_blocks) / greedy.metrics.peak_kv_blocks;
  std::printf(
      "200-token prompt, %lld new tokens, blocks of %lld: greedy peak %d KV blocks, 4 beams peak "
      "%d (%.2fx; %d without sharing), %d shared at most, %lld copied\n",
      static_cast<long long>(kNewTokens), static_cast<long long>(block_size),
      greedy.metrics.peak_kv_blocks, stats.peak_kv_blocks, ratio, stats.peak_kv_blocks_unshared,
      stats.peak_blocks_shared, static_cast<long long>(stats.blocks_copied));
  // 4 private caches would cost 4x; shared, the beams add only their tails.
  EXPECT_LT(ratio, 2.0);
  EXPECT_GT(stats.peak_blocks_shared, 0);
  EXPECT_LT(stats.peak_kv_blocks, stats.peak_kv_blocks_unshared);
}

}  // namespace
}  // namespace kvjit
