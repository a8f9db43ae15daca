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
#include "runtime/generation/ModelDrafter.h"
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
             const std::vector<int32_t>& prompt, int64_t new_tokens, runtime::Drafter* drafter,
             int64_t draft_tokens) {
  runtime::Generator generator(runner, context_length, drafter, draft_tokens);
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

// The lookup's settings a test runs with.
struct LookupSettings {
  int64_t draft_tokens;
  int64_t min_ngram;
  int64_t max_ngram;
};

// `drafts`: what the model makes of the lookup's drafts. A random-weight
// model does not copy its prompt, so every draft is rejected and the cache is
// cut back after every verify step; the real models take some.
void ExpectSameWithAndWithoutDrafts(runtime::StepRunner& runner, int64_t context_length,
                                    const std::vector<int32_t>& prompt, int64_t new_tokens,
                                    Drafts drafts) {
  const Run plain = Generate(runner, context_length, prompt, new_tokens, nullptr, 0);
  ASSERT_EQ(static_cast<int64_t>(plain.tokens.size()), new_tokens);
  int64_t verify_steps = 0;
  int64_t accepted = 0;
  for (const LookupSettings speculation :
       {LookupSettings{1, 1, 3}, LookupSettings{4, 1, 3}, LookupSettings{7, 2, 4}}) {
    runtime::NgramDrafter drafter(speculation.min_ngram, speculation.max_ngram);
    const Run drafted =
        Generate(runner, context_length, prompt, new_tokens, &drafter, speculation.draft_tokens);
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

// A random Mistral-like model whose every layer slides a 32-position window,
// compiled for steps of at most 16 tokens; `seed` picks its weights.
absl::StatusOr<std::unique_ptr<runtime::Executable>> RandomSlidingWindowModel(int seed) {
  const std::string model_path =
      (std::filesystem::temp_directory_path() /
       absl::StrCat("kvjit-speculative-mistral-", ::getpid(), "-", seed, ".gguf"))
          .string();
  const std::string command = absl::StrCat(
      "'", KVJIT_PYTHON, "' '", KVJIT_SOURCE_DIR,
      "/tools/scripts/make_random_gguf_model.py' --family mistral --sliding_window 32 --seed ", seed,
      " --tokenizer '", KVJIT_SOURCE_DIR, "/tests/data/hf_tokenizers/llama3_style.tokenizer.json' '",
      model_path, "'");
  if (std::system(command.c_str()) != 0) return absl::InternalError(absl::StrCat("failed: ", command));
  codegen::CompileOptions options;
  options.block_size = 16;
  options.max_tokens_per_step = 16;
  auto executable = testing::CompileAndLoad(model_path, options);
  std::filesystem::remove(model_path);
  return executable;
}

TEST(SpeculativeDecodingTest, SlidingWindowGreedyIsUnchanged) {
  auto executable = RandomSlidingWindowModel(1);
  ASSERT_TRUE(executable.ok()) << executable.status();
  ASSERT_EQ((*executable)->AttentionWindow(), 32);
  auto runner = runtime::CpuStepRunner::Create(**executable, /*num_blocks=*/16, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  // 120 positions: the window moves past several blocks while drafts come
  // and go.
  ExpectSameWithAndWithoutDrafts(**runner, 256, RepeatingPrompt(1900, 7, 40), 80, Drafts::kAllRejected);
}

// Greedy decoding with `drafter` against decoding without, bit for bit, for
// 1, 3 and 6 drafts a step; returns the drafts made and taken over all.
std::pair<int64_t, int64_t> ExpectSameWithDraftModel(runtime::StepRunner& runner,
                                                     int64_t context_length,
                                                     const std::vector<int32_t>& prompt,
                                                     int64_t new_tokens, runtime::Drafter& drafter) {
  const Run plain = Generate(runner, context_length, prompt, new_tokens, nullptr, 0);
  int64_t drafted = 0;
  int64_t accepted = 0;
  for (const int64_t draft_tokens : {1, 3, 6}) {
    const Run run = Generate(runner, context_length, prompt, new_tokens, &drafter, draft_tokens);
    EXPECT_EQ(run.tokens, plain.tokens) << draft_tokens << " drafts";
    EXPECT_TRUE(run.logits == plain.logits) << draft_tokens << " drafts";
    drafted += run.metrics.drafted_tokens;
    accepted += run.metrics.accepted_tokens;
  }
  return {drafted, accepted};
}

// A draft executable that is the target itself, with a pool of its own:
// its most likely token is the target's at every step (the kernels give a
// draft's one-token step the bits of the target's verify row), so every
// draft is taken.
TEST(SpeculativeDecodingTest, DraftExecutableThatIsTheTargetHasEveryDraftTaken) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  ASSERT_FALSE(path.empty()) << "../shared/models/stories260K.gguf is missing";
  auto target = testing::CompileAndLoad(path, codegen::CompileOptions());
  auto draft = testing::CompileAndLoad(path, codegen::CompileOptions());
  ASSERT_TRUE(target.ok() && draft.ok());
  auto runner = runtime::CpuStepRunner::Create(**target, /*num_blocks=*/32, /*threads=*/2);
  auto draft_runner = runtime::CpuStepRunner::Create(**draft, /*num_blocks=*/48, /*threads=*/2);
  ASSERT_TRUE(runner.ok() && draft_runner.ok());
  ASSERT_TRUE(runtime::CheckSameVocabulary(**draft, **target).ok());
  auto drafter = runtime::ModelDrafter::WithOwnCache(*std::move(draft), *std::move(draft_runner));
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  const auto [drafted, accepted] =
      ExpectSameWithDraftModel(**runner, 256, {1, 403, 407, 261, 378}, 120, **drafter);
  EXPECT_GT(drafted, 100);
  EXPECT_EQ(accepted, drafted);
}

// A draft of other weights (another seed) is rejected nearly always: its
// cache is cut back to the history after each step and it feeds the
// target's tokens again, while both models' windows release blocks.
TEST(SpeculativeDecodingTest, DraftExecutableRejectedRollsItsCacheBack) {
  auto target = RandomSlidingWindowModel(1);
  auto draft = RandomSlidingWindowModel(2);
  ASSERT_TRUE(target.ok() && draft.ok());
  auto runner = runtime::CpuStepRunner::Create(**target, /*num_blocks=*/16, /*threads=*/2);
  auto draft_runner = runtime::CpuStepRunner::Create(**draft, /*num_blocks=*/24, /*threads=*/2);
  ASSERT_TRUE(runner.ok() && draft_runner.ok());
  auto drafter = runtime::ModelDrafter::WithOwnCache(*std::move(draft), *std::move(draft_runner));
  ASSERT_TRUE(drafter.ok()) << drafter.status();
  const auto [drafted, accepted] =
      ExpectSameWithDraftModel(**runner, 256, RepeatingPrompt(1900, 7, 40), 80, **drafter);
  EXPECT_GT(drafted, 0);
  EXPECT_LT(accepted, drafted);
  // The generator forgot its sequence at the end of each request.
  EXPECT_EQ((*drafter)->own_blocks_in_use(), 0);
}

// A draft over the target's own pool (the layer-skipping self-draft's way;
// here with every layer): it writes its tokens' keys and values into the
// target's blocks and cuts them away again, and the target's output is
// unchanged.
TEST(SpeculativeDecodingTest, DraftOverTheTargetsPoolLeavesItsOutputUnchanged) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  ASSERT_FALSE(path.empty()) << "../shared/models/stories260K.gguf is missing";
  auto target = testing::CompileAndLoad(path, codegen::CompileOptions());
  auto draft = testing::CompileAndLoad(path, codegen::CompileOptions());
  ASSERT_TRUE(target.ok() && draft.ok());
  auto runner = runtime::CpuStepRunner::Create(**target, /*num_blocks=*/32, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto draft_runner = runtime::CpuStepRunner::CreateOverPool(**draft, **runner, /*threads=*/2);
  ASSERT_TRUE(draft_runner.ok()) << draft_runner.status();
  EXPECT_EQ((*draft_runner)->Memory().kv_pool_bytes, 0u);
  auto drafter =
      runtime::ModelDrafter::OverTargetCache(*std::move(draft), *std::move(draft_runner), 5);
  const auto [drafted, accepted] =
      ExpectSameWithDraftModel(**runner, 256, {1, 403, 407, 261, 378}, 120, *drafter);
  EXPECT_GT(drafted, 100);
  EXPECT_EQ(accepted, drafted);
}

// The layer-skipping self-draft: the target's first layers (the
// keep-first-layers pass) over the target's pool. Its keys and values of
// those layers are the target's own, so it feeds only the newest token; its
// drafts' are cut away again, and the target's output is unchanged.
TEST(SpeculativeDecodingTest, LayerSkippingSelfDraftLeavesTheOutputUnchanged) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  ASSERT_FALSE(path.empty()) << "../shared/models/stories260K.gguf is missing";
  codegen::CompileOptions first_layers;
  first_layers.keep_layers = 3;
  auto target = testing::CompileAndLoad(path, codegen::CompileOptions());
  auto draft = testing::CompileAndLoad(path, first_layers);
  ASSERT_TRUE(target.ok() && draft.ok());
  ASSERT_EQ((*draft)->kv_layout().num_layers(), 3);
  auto runner = runtime::CpuStepRunner::Create(**target, /*num_blocks=*/32, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto draft_runner = runtime::CpuStepRunner::CreateOverPool(**draft, **runner, /*threads=*/2);
  ASSERT_TRUE(draft_runner.ok()) << draft_runner.status();
  auto drafter =
      runtime::ModelDrafter::OverTargetCache(*std::move(draft), *std::move(draft_runner), 3);
  const auto [drafted, accepted] =
      ExpectSameWithDraftModel(**runner, 256, {1, 403, 407, 261, 378}, 120, *drafter);
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0);
  EXPECT_LE(accepted, drafted);
}

// Each family's random model (tools/scripts/make_random_gguf_model.py):
// greedy decoding with drafts is bit for bit decoding without, with drafts
// the target takes (the model itself as its draft, so that every verify step
// carries 2, 4 and 7 tokens through the family's kernels) and with its
// one-layer self-draft over its own pool, whose drafts it mostly rejects.
class SpeculativeDecodingFamiliesTest : public ::testing::TestWithParam<const char*> {};

absl::StatusOr<std::unique_ptr<runtime::Executable>> RandomFamilyModel(
    const std::string& family, const codegen::CompileOptions& options) {
  const std::string model_path =
      (std::filesystem::temp_directory_path() /
       absl::StrCat("kvjit-speculative-", family, "-", ::getpid(), ".gguf"))
          .string();
  const std::string command = absl::StrCat(
      "'", KVJIT_PYTHON, "' '", KVJIT_SOURCE_DIR,
      "/tools/scripts/make_random_gguf_model.py' --family ", family, " --tokenizer '",
      KVJIT_SOURCE_DIR, "/tests/data/hf_tokenizers/llama3_style.tokenizer.json' '", model_path,
      "'");
  if (std::system(command.c_str()) != 0) return absl::InternalError(absl::StrCat("failed: ", command));
  auto executable = testing::CompileAndLoad(model_path, options);
  std::filesystem::remove(model_path);
  return executable;
}

TEST_P(SpeculativeDecodingFamiliesTest, GreedyIsUnchangedWithDraftsTakenAndRejected) {
  codegen::CompileOptions one_layer;
  one_layer.keep_layers = 1;
  auto target = RandomFamilyModel(GetParam(), codegen::CompileOptions());
  auto same = RandomFamilyModel(GetParam(), codegen::CompileOptions());
  auto first_layer = RandomFamilyModel(GetParam(), one_layer);
  ASSERT_TRUE(target.ok() && same.ok() && first_layer.ok())
      << target.status() << same.status() << first_layer.status();
  auto runner = runtime::CpuStepRunner::Create(**target, /*num_blocks=*/32, /*threads=*/2);
  auto same_runner = runtime::CpuStepRunner::Create(**same, /*num_blocks=*/48, /*threads=*/2);
  ASSERT_TRUE(runner.ok() && same_runner.ok());
  auto first_layer_runner =
      runtime::CpuStepRunner::CreateOverPool(**first_layer, **runner, /*threads=*/2);
  ASSERT_TRUE(first_layer_runner.ok()) << first_layer_runner.status();
  const std::vector<int32_t> prompt =
      RepeatingPrompt(static_cast<int32_t>((*runner)->vocab_size()), 9, 24);

  auto itself = runtime::ModelDrafter::WithOwnCache(*std::move(same), *std::move(same_runner));
  ASSERT_TRUE(itself.ok()) << itself.status();
  const auto [drafted, accepted] = ExpectSameWithDraftModel(**runner, 256, prompt, 40, **itself);
  EXPECT_GT(drafted, 60);
  EXPECT_EQ(accepted, drafted);

  auto self_draft = runtime::ModelDrafter::OverTargetCache(
      *std::move(first_layer), *std::move(first_layer_runner), 1);
  const auto [layer_drafted, layer_accepted] =
      ExpectSameWithDraftModel(**runner, 256, prompt, 40, *self_draft);
  EXPECT_GT(layer_drafted, 0);
  EXPECT_LE(layer_accepted, layer_drafted);
}

INSTANTIATE_TEST_SUITE_P(RandomModels, SpeculativeDecodingFamiliesTest,
                         ::testing::Values("llama3", "qwen2", "qwen3", "phi3", "gemma2", "gemma3",
                                           "mistral"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

TEST(SpeculativeDecodingTest, DraftOfAnotherVocabularyIsRefused) {
  auto stories = testing::CompileAndLoad(testing::SharedPath("models/stories260K.gguf"),
                                         codegen::CompileOptions());
  auto mistral = RandomSlidingWindowModel(1);
  ASSERT_TRUE(stories.ok() && mistral.ok());
  const absl::Status status = runtime::CheckSameVocabulary(**mistral, **stories);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("has a vocabulary of"), std::string::npos) << status;
  EXPECT_NE(status.message().find("a draft must share the target's vocabulary"), std::string::npos);
}

// Over a pool whose blocks store another cache type, a draft is refused,
// naming both layouts.
TEST(SpeculativeDecodingTest, DraftOverAPoolOfAnotherLayoutIsRefused) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  ASSERT_FALSE(path.empty()) << "../shared/models/stories260K.gguf is missing";
  codegen::CompileOptions f16;
  f16.cache_dtype = "f16";
  auto target = testing::CompileAndLoad(path, codegen::CompileOptions());
  auto draft = testing::CompileAndLoad(path, f16);
  ASSERT_TRUE(target.ok() && draft.ok());
  auto runner = runtime::CpuStepRunner::Create(**target, /*num_blocks=*/8, /*threads=*/1);
  ASSERT_TRUE(runner.ok());
  auto draft_runner = runtime::CpuStepRunner::CreateOverPool(**draft, **runner, /*threads=*/1);
  ASSERT_FALSE(draft_runner.ok());
  EXPECT_NE(draft_runner.status().message().find("cannot share its pool"), std::string::npos)
      << draft_runner.status();
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
