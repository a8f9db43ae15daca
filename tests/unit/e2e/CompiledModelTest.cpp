// The compiler and the CPU runtime end to end: a model compiled into a .kvx,
// loaded and run over the paged cache, against the reference evaluator (which
// recomputes every step from scratch) and against known text.

#include <filesystem>
#include <fstream>
#include <vector>

#include "codegen/ExecutableWriter.h"
#include "codegen/driver/Compiler.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "gtest/gtest.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "nlohmann/json.hpp"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/generation/Generator.h"
#include "runtime/exec/Executable.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/e2e/CompiledStoriesFixture.h"
#include "tests/unit/e2e/LlamaCppComparison.h"

namespace kvjit {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;
using ::kvjit::testing::AllEqual;

TEST_F(CompiledStoriesTest, GreedyTextMatchesTheKnownContinuation) {
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  runtime::Generator generator(**runner, model_->config.context_length);
  auto prompt = tokenizer_->Encode("Once upon a time", true, false);
  ASSERT_TRUE(prompt.ok());
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  auto result = generator.Generate(*prompt, greedy, 64, [](int32_t) { return true; });
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<int32_t> all = *prompt;
  all.insert(all.end(), result->tokens.begin(), result->tokens.end());
  const std::string expected =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. One day, she saw a big, red ball. She wanted to play with it, but it was too high.";
  EXPECT_EQ(tokenizer_->Decode(all).substr(0, expected.size()), expected);
}

// Every step's logits against full recomputation by the reference evaluator.
// Tolerance: the CPU kernels compute in f32 (the reference accumulates in
// double); stories260K's weights are f32, so no activation quantization
// enters and the logits agree to 1e-3 absolute.
TEST_F(CompiledStoriesTest, StepLogitsEqualTheReferenceEvaluator) {
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  model::ReferenceWeights weights(*model_->weights);
  reference::ReferenceEvaluator evaluator(*forward_, weights);
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 298};
  const int64_t block_size = executable_->kv_layout().block_size();
  // A prefill of 5 tokens, then one token per step, in blocks 3, 1, 2, ...
  const std::vector<int32_t> block_table = {3, 1, 2, 0};
  int64_t cached = 0;
  for (int64_t count : {5, 1, 1, 1, 1, 1, 1}) {
    runtime::StepInputs inputs;
    for (int64_t p = cached; p < cached + count; ++p) {
      inputs.tokens().push_back(tokens[p]);
      inputs.positions().push_back(static_cast<int32_t>(p));
      inputs.slot_mapping().push_back(block_table[p / block_size] * block_size + p % block_size);
      inputs.logits_rows().push_back(static_cast<int32_t>(p - cached));
    }
    inputs.seq_starts() = {0, static_cast<int32_t>(count)};
    inputs.context_lens() = {static_cast<int32_t>(cached + count)};
    inputs.block_tables() = block_table;
    inputs.max_blocks = static_cast<int64_t>(block_table.size());
    auto logits = (*runner)->Run(inputs);
    ASSERT_TRUE(logits.ok()) << logits.status();
    cached += count;
    auto reference = reference::EvaluateLogits(
        evaluator, model::kForwardFunctionName,
        std::vector<int32_t>(tokens.begin(), tokens.begin() + cached));
    ASSERT_TRUE(reference.ok()) << reference.status();
    const int64_t vocab = reference->shape[1];
    const int64_t first_position = cached - count;
    ASSERT_TRUE(AllClose(*logits,
                         absl::MakeConstSpan(reference->values)
                             .subspan(first_position * vocab, count * vocab),
                         Absolute(1e-3)))
        << "positions from " << first_position << ", " << vocab << " logits each";
  }
}

// A copied block serves attention exactly as its source does: what forked
// sequences rely on when copy-on-write gives one of them a private block.
TEST_F(CompiledStoriesTest, ACopiedKvBlockAttendsLikeItsSource) {
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/8, /*threads=*/1);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const int64_t block_size = executable_->kv_layout().block_size();
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378};
  auto step = [&](int32_t block, int64_t count) {
    runtime::StepInputs inputs;
    for (int64_t p = 0; p < count; ++p) {
      inputs.tokens().push_back(tokens[p]);
      inputs.positions().push_back(static_cast<int32_t>(p));
      inputs.slot_mapping().push_back(static_cast<int32_t>(block * block_size + p));
    }
    inputs.seq_starts() = {0, static_cast<int32_t>(count)};
    inputs.context_lens() = {static_cast<int32_t>(count)};
    inputs.block_tables() = {block};
    inputs.max_blocks = 1;
    inputs.logits_rows() = {static_cast<int32_t>(count - 1)};
    auto logits = (*runner)->Run(inputs);
    return logits.ok() ? std::vector<float>(logits->begin(), logits->end()) : std::vector<float>();
  };
  // The whole prompt into block 2; then the last token again in block 5,
  // whose first slots hold only what the copy put there.
  const std::vector<float> in_source = step(2, 5);
  ASSERT_FALSE(in_source.empty());
  ASSERT_TRUE((*runner)->CopyBlock(2, 5).ok());
  runtime::StepInputs last;
  last.tokens() = {tokens[4]};
  last.positions() = {4};
  last.slot_mapping() = {static_cast<int32_t>(5 * block_size + 4)};
  last.seq_starts() = {0, 1};
  last.context_lens() = {5};
  last.block_tables() = {5};
  last.max_blocks = 1;
  last.logits_rows() = {0};
  auto in_copy = (*runner)->Run(last);
  ASSERT_TRUE(in_copy.ok()) << in_copy.status();
  EXPECT_TRUE(AllEqual(*in_copy, in_source));
  EXPECT_EQ((*runner)->CopyBlock(2, 8).code(), absl::StatusCode::kOutOfRange);
}

TEST_F(CompiledStoriesTest, APromptLongerThanTheContextIsRefused) {
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/64, /*threads=*/1);
  ASSERT_TRUE(runner.ok()) << runner.status();
  runtime::Generator generator(**runner, /*context_length=*/8);
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  auto result = generator.Generate(std::vector<int32_t>(9, 1), greedy, 4,
                                   [](int32_t) { return true; });
  ASSERT_FALSE(result.ok());
  EXPECT_NE(std::string(result.status().message()).find("leave no room in the context of 8"),
            std::string::npos);
}

TEST_F(CompiledStoriesTest, AKvPoolTooSmallForTheRequestIsAnError) {
  auto runner = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/1, /*threads=*/1);
  ASSERT_TRUE(runner.ok()) << runner.status();
  runtime::Generator generator(**runner, model_->config.context_length);
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  auto result = generator.Generate(std::vector<int32_t>(40, 1), greedy, 4,
                                   [](int32_t) { return true; });
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
}

}  // namespace
}  // namespace kvjit

// SmolLM2-135M-Instruct Q4_1 (the README's default model, fetched by
// tools/scripts/fetch_model.sh), greedy, against llama.cpp's ids and top-5
// logits (tests/data/llamacpp/smollm2_greedy.json, made by llama-cpp-python,
// one sequence decoding one token per step). With an f16 cache kvjit's CPU
// kernels compute llama.cpp's AVX2, non-flash-attention arithmetic bit for
// bit (activation quantization, rope's FMAs, SiLU's vector exp, attention's
// f16 dot orders; see docs/numerics.md), so the ids and the logits are equal
// at every step. Without that, the 8-bit activation quantization turns
// last-bit differences into logit differences of up to about 1.
namespace kvjit {
namespace {

TEST(CompiledSmolLM2Test, GreedyIdsAndLogitsEqualLlamaCpps) {
  const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) GTEST_SKIP() << "SmolLM2 not found: run tools/scripts/fetch_model.sh";
  const std::string expected_path = testing::TestDataPath("llamacpp/smollm2_greedy.json");
  ASSERT_FALSE(expected_path.empty());
  nlohmann::json expected = nlohmann::json::parse(std::ifstream(expected_path));

  auto executable = testing::CompileLikeTheLlamaCppReference(path);
  ASSERT_TRUE(executable.ok()) << executable.status();
  auto runner = runtime::CpuStepRunner::Create(**executable, /*num_blocks=*/64, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto comparison = testing::CompareWithLlamaCpp(**runner, expected, /*context_length=*/8192);
  ASSERT_TRUE(comparison.ok()) << comparison.status();
  for (const testing::PromptComparison& prompt : comparison->prompts) {
    EXPECT_EQ(prompt.ours, prompt.llama_cpps)
        << prompt.name << "; the logits so far: "
        << AllEqual(comparison->our_logits, comparison->llama_cpp_logits).message();
  }
  EXPECT_EQ(comparison->generated_tokens, 128u);
  EXPECT_TRUE(AllEqual(comparison->our_logits, comparison->llama_cpp_logits));
}

}  // namespace
}  // namespace kvjit
