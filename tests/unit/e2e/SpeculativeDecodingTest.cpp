// Speculative decoding by n-gram lookup gives, token for token and logit for
// logit, what decoding without drafts gives: a verify step of k + 1 tokens
// gives each row the bits a one-token step gives (the kernels are batch- and
// step-invariant with the f32 cache), and the rejected drafts' cache slots
// are cut away before the next step. Checked on stories260K, SmolLM2, and a
// random Mistral-like model whose 32-position sliding window releases blocks
// while drafts come and go; on SmolLM2 also with a q8_0 cache, which
// attention reads through the f32 path. (With the f16 cache a verify step's attention
// rounds otherwise than a one-token step's: the logits differ in their last
// bits, docs/speculative-decoding.md.)

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "codegen/driver/Compiler.h"
#include "gtest/gtest.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/generation/Drafter.h"
#include "runtime/generation/Generator.h"
#include "runtime/generation/Speculation.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/e2e/LlamaCppComparison.h"

namespace kvjit {
namespace {

struct Run {
  std::vector<int32_t> tokens;
  std::vector<float> logits;
  runtime::GenerationMetrics metrics;
};

Run Generate(runtime::StepRunner& runner, int64_t context_length,
             const std::vector<int32_t>& prompt, int64_t new_tokens,
             runtime::SpeculativeDecoding speculation) {
  runtime::NgramDrafter drafter(speculation.min_ngram, speculation.max_ngram);
  runtime::Generator generator(runner, context_length, &drafter, speculation.draft_tokens);
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  Run run;
  auto result = generator.Generate(
      prompt, greedy, new_tokens, [](int32_t) { return true; },
      [&](absl::Span<const float> logits) {
        run.logits.insert(run.logits.end(), logits.begin(), logits.end());
      });
  EXPECT_TRUE(result.ok()) << result.status();
  if (!result.ok()) return run;
  run.tokens = result->tokens;
  run.metrics = result->metrics;
  return run;
}

// A prompt that repeats itself, so that lookup finds drafts the model takes.
std::vector<int32_t> RepeatingPrompt(int32_t vocab, int64_t period, int64_t length) {
  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < length; ++i) prompt.push_back(static_cast<int32_t>(3 + (11 * (i % period)) % (vocab - 3)));
  return prompt;
}

enum class Drafts { kSomeTaken, kAllRejected };

// `drafts`: what the model makes of the lookup's drafts. A random-weight
// model does not copy its prompt, so every draft is rejected and the cache is
// cut back after every verify step; the real models take some.
void ExpectSameWithAndWithoutDrafts(runtime::StepRunner& runner, int64_t context_length,
                                    const std::vector<int32_t>& prompt, int64_t new_tokens,
                                    Drafts drafts) {
  const Run plain = Generate(runner, context_length, prompt, new_tokens, {});
  ASSERT_EQ(static_cast<int64_t>(plain.tokens.size()), new_tokens);
  int64_t verify_steps = 0;
  int64_t accepted = 0;
  for (const runtime::SpeculativeDecoding speculation :
       {runtime::SpeculativeDecoding{1, 1, 3}, runtime::SpeculativeDecoding{4, 1, 3},
        runtime::SpeculativeDecoding{7, 2, 4}}) {
    const Run drafted = Generate(runner, context_length, prompt, new_tokens, speculation);
    EXPECT_EQ(drafted.tokens, plain.tokens) << speculation.draft_tokens << " drafts";
    // Bit for bit: the same floats, not close ones.
    EXPECT_TRUE(drafted.logits == plain.logits) << speculation.draft_tokens << " drafts";
    EXPECT_LE(drafted.metrics.accepted_tokens, drafted.metrics.drafted_tokens);
    verify_steps += drafted.metrics.verify_steps;
    accepted += drafted.metrics.accepted_tokens;
  }
  EXPECT_GT(verify_steps, 0);
  if (drafts == Drafts::kSomeTaken) {
    EXPECT_GT(accepted, 0);
  } else {
    EXPECT_EQ(accepted, 0);
  }
}

TEST(SpeculativeDecodingTest, Stories260KGreedyIsUnchanged) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  ASSERT_FALSE(path.empty()) << "../shared/models/stories260K.gguf is missing";
  codegen::CompileOptions options;
  options.block_size = 16;
  auto executable = testing::CompileAndLoad(path, options);
  ASSERT_TRUE(executable.ok()) << executable.status();
  auto runner = runtime::CpuStepRunner::Create(**executable, /*num_blocks=*/32, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  // "Once upon a time": the story the model tells repeats itself within 200
  // tokens, and the lookup finds it.
  ExpectSameWithAndWithoutDrafts(**runner, 256, {1, 403, 407, 261, 378}, 200, Drafts::kSomeTaken);
}

TEST(SpeculativeDecodingTest, SmolLM2GreedyIsUnchanged) {
  const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) GTEST_SKIP() << "SmolLM2 not found: run tools/scripts/fetch_model.sh";
  auto executable = testing::CompileForComparison(path, "f32");
  ASSERT_TRUE(executable.ok()) << executable.status();
  auto runner = runtime::CpuStepRunner::Create(**executable, /*num_blocks=*/16, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  ExpectSameWithAndWithoutDrafts(**runner, 512, RepeatingPrompt(49152, 13, 60), 48, Drafts::kSomeTaken);
}

TEST(SpeculativeDecodingTest, SmolLM2WithAQ8CacheGreedyIsUnchanged) {
  const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) GTEST_SKIP() << "SmolLM2 not found: run tools/scripts/fetch_model.sh";
  auto executable = testing::CompileForComparison(path, "q8_0");
  ASSERT_TRUE(executable.ok()) << executable.status();
  auto runner = runtime::CpuStepRunner::Create(**executable, /*num_blocks=*/16, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  ExpectSameWithAndWithoutDrafts(**runner, 512, RepeatingPrompt(49152, 13, 60), 48, Drafts::kSomeTaken);
}

TEST(SpeculativeDecodingTest, SlidingWindowGreedyIsUnchanged) {
  const std::string model_path =
      (std::filesystem::temp_directory_path() / absl::StrCat("kvjit-speculative-mistral-", ::getpid(), ".gguf"))
          .string();
  const std::string command = absl::StrCat(
      "'", KVJIT_PYTHON, "' '", KVJIT_SOURCE_DIR,
      "/tools/scripts/make_random_gguf_model.py' --family mistral --sliding_window 32 --tokenizer '",
      KVJIT_SOURCE_DIR, "/tests/data/hf_tokenizers/llama3_style.tokenizer.json' '", model_path, "'");
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  codegen::CompileOptions options;
  options.block_size = 16;
  options.max_tokens_per_step = 16;
  auto executable = testing::CompileAndLoad(model_path, options);
  std::filesystem::remove(model_path);
  ASSERT_TRUE(executable.ok()) << executable.status();
  ASSERT_EQ((*executable)->AttentionWindow(), 32);
  auto runner = runtime::CpuStepRunner::Create(**executable, /*num_blocks=*/16, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  // 120 positions: the window moves past several blocks while drafts come
  // and go.
  ExpectSameWithAndWithoutDrafts(**runner, 256, RepeatingPrompt(1900, 7, 40), 80, Drafts::kAllRejected);
}

// Sampled drafts are verified by rejection sampling (its distribution is
// tested in Sampler_test); here: it runs through the model, drafts are taken
// and rejected, and a seed gives the same text every time.
TEST(SpeculativeDecodingTest, SampledDecodingVerifiesDraftsReproducibly) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  ASSERT_FALSE(path.empty()) << "../shared/models/stories260K.gguf is missing";
  auto executable = testing::CompileAndLoad(path, codegen::CompileOptions());
  ASSERT_TRUE(executable.ok()) << executable.status();
  auto runner = runtime::CpuStepRunner::Create(**executable, /*num_blocks=*/32, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  sampling::SamplingParams sampled;
  sampled.temperature = 0.5f;
  sampled.seed = 7;
  std::vector<int32_t> first_tokens;
  for (int attempt = 0; attempt < 2; ++attempt) {
    runtime::NgramDrafter drafter(2, 3);
    runtime::Generator generator(**runner, 256, &drafter, 3);
    auto result = generator.Generate({1, 403, 407, 261, 378}, sampled, 200, [](int32_t) { return true; });
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(result->tokens.size(), 200u);
    EXPECT_GT(result->metrics.accepted_tokens, 0);
    EXPECT_LT(result->metrics.accepted_tokens, result->metrics.drafted_tokens);
    if (attempt == 0) first_tokens = result->tokens;
    else EXPECT_EQ(result->tokens, first_tokens);
  }
}

}  // namespace
}  // namespace kvjit
