// A random-weight Mistral-like model (tools/scripts/make_random_*_model.py
// --family mistral: a 32-position sliding window on both layers), from GGUF
// and from Hugging Face files, generating past its window: the compiled
// program's greedy ids and logits equal the reference evaluator's with the
// window, the runtime gives blocks behind the window back to the pool, and
// the window is no formality (full attention's logits differ).

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "gtest/gtest.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "runtime/generation/Generator.h"
#include "runtime/exec/Executable.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/e2e/LlamaCppComparison.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;

constexpr int64_t kWindow = 32;
constexpr int64_t kBlockSize = 16;
constexpr int64_t kPromptTokens = 40;
constexpr int64_t kNewTokens = 60;  // 100 positions: three windows and more
// f32 weights and cache; the kernels sum in f32, the reference in double.
constexpr double kLogitTolerance = 1e-3;

struct Format {
  const char* name;
  const char* script;  // under tools/scripts
  const char* suffix;  // of the written model
};

void PrintTo(const Format& format, std::ostream* out) { *out << format.name; }

class SlidingWindowTest : public ::testing::TestWithParam<Format> {
 protected:
  void SetUp() override {
    const Format& format = GetParam();
    model_path_ = (std::filesystem::temp_directory_path() /
                   absl::StrCat("kvjit-mistral-", ::getpid(), format.suffix))
                      .string();
    const std::string command = absl::StrCat(
        "'", KVJIT_PYTHON, "' '", KVJIT_SOURCE_DIR, "/tools/scripts/", format.script,
        "' --family mistral --sliding_window ", kWindow, " --tokenizer '", KVJIT_SOURCE_DIR,
        "/tests/data/hf_tokenizers/llama3_style.tokenizer.json' '", model_path_, "'");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  void TearDown() override { std::filesystem::remove_all(model_path_); }

  std::string model_path_;
};

TEST_P(SlidingWindowTest, GreedyIdsAndLogitsEqualTheReferenceWithTheWindow) {
  auto model = model::OpenModelFile(model_path_);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(model->config.layer_windows, std::vector<int64_t>(2, kWindow));

  codegen::CompileOptions options;
  options.block_size = kBlockSize;
  options.max_tokens_per_step = 16;  // a chunked prefill: chunks past the window too
  auto executable = testing::CompileAndLoad(model_path_, options);
  ASSERT_TRUE(executable.ok()) << executable.status();
  EXPECT_EQ((*executable)->AttentionWindow(), kWindow);
  auto runner = runtime::CpuStepRunner::Create(**executable, /*num_blocks=*/16, /*threads=*/2);
  ASSERT_TRUE(runner.ok()) << runner.status();

  std::vector<int32_t> prompt;
  for (int64_t i = 0; i < kPromptTokens; ++i) prompt.push_back(static_cast<int32_t>(7 + 37 * i % 1900));
  runtime::Generator generator(**runner, model->config.context_length);
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<float> compiled_logits;
  auto generated = generator.Generate(
      prompt, greedy, kNewTokens, [](int32_t) { return true; },
      [&](absl::Span<const float> logits) {
        compiled_logits.insert(compiled_logits.end(), logits.begin(), logits.end());
      });
  ASSERT_TRUE(generated.ok()) << generated.status();

  mlir::MLIRContext context;
  mlir::DialectRegistry registry;
  RegisterKvjitDialects(registry);
  context.appendDialectRegistry(registry);
  model::ReferenceWeights weights(*model->weights);
  auto windowed = model::BuildDecoderModule(context, model->config, *model->weights);
  ASSERT_TRUE(windowed.ok()) << windowed.status();
  reference::ReferenceEvaluator evaluator(**windowed, weights);
  std::vector<float> reference_logits;
  reference::GreedyOptions reference_options;
  reference_options.max_new_tokens = kNewTokens;
  reference_options.on_logits = [&](absl::Span<const float> logits) {
    reference_logits.insert(reference_logits.end(), logits.begin(), logits.end());
  };
  auto reference_ids = reference::GenerateGreedy(evaluator, model::kForwardFunctionName, prompt,
                                                 reference_options);
  ASSERT_TRUE(reference_ids.ok()) << reference_ids.status();
  EXPECT_EQ(generated->tokens, *reference_ids);
  EXPECT_TRUE(AllClose(compiled_logits, reference_logits, Absolute(kLogitTolerance)));

  // One sequence of 100 positions holds 7 blocks of 16 without the window;
  // with it, the 31 positions before the next query (at most 3 blocks) and a
  // step's new ones.
  EXPECT_LE(generated->metrics.peak_kv_blocks, 4);
  EXPECT_GE(generated->metrics.kv_blocks_released_by_window, 3);

  // Over the whole context the same tokens give other logits: a program that
  // ignored the window would fail the comparison above.
  model::ModelConfig full_config = model->config;
  full_config.layer_windows.clear();
  auto full = model::BuildDecoderModule(context, full_config, *model->weights);
  ASSERT_TRUE(full.ok()) << full.status();
  reference::ReferenceEvaluator full_evaluator(**full, weights);
  std::vector<int32_t> sequence = prompt;
  sequence.insert(sequence.end(), generated->tokens.begin(), generated->tokens.end() - 1);
  auto full_logits = reference::EvaluateLogits(full_evaluator, model::kForwardFunctionName, sequence);
  ASSERT_TRUE(full_logits.ok()) << full_logits.status();
  const int64_t vocab = full_logits->shape[1];
  const auto last_row = absl::MakeConstSpan(full_logits->values).last(vocab);
  EXPECT_FALSE(AllClose(absl::MakeConstSpan(compiled_logits).last(vocab), last_row, Absolute(0.05)));
}

INSTANTIATE_TEST_SUITE_P(GgufAndHuggingFace, SlidingWindowTest,
                         ::testing::Values(Format{"gguf", "make_random_gguf_model.py", ".gguf"},
                                           Format{"hf", "make_random_hf_model.py", "-hf"}),
                         [](const ::testing::TestParamInfo<Format>& info) { return info.param.name; });

}  // namespace
}  // namespace kvjit
