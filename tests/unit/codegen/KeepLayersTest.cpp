// CompileOptions::keep_layers: stories260K cut after its first layers (the
// layer-skipping self-draft) compiles and passes --verify against the
// reference cut the same way; its KV cache is the first layers of the whole
// model's, so CpuStepRunner::CreateOverPool runs it over the whole model's
// pool, with logits of its own; a count past the model's layers is refused,
// naming both.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "codegen/ExecutableWriter.h"
#include "codegen/driver/Compiler.h"
#include "codegen/equivalence/EquivalenceChecker.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/exec/Executable.h"
#include "runtime/generation/Generator.h"
#include "tests/unit/common/TestPaths.h"

namespace kvjit {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kStoriesLayers = 5;

class KeepLayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::SharedPath("models/stories260K.gguf");
    if (model_.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR";
    directory_ = std::filesystem::temp_directory_path() /
                 ("kvjit-keep-layers-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override {
    if (!directory_.empty()) std::filesystem::remove_all(directory_);
  }

  std::string PathFor(int64_t keep_layers) const {
    return (directory_ / ("stories-" + std::to_string(keep_layers) + ".kvx")).string();
  }

  // stories260K compiled with `keep_layers` and --verify, then loaded.
  absl::StatusOr<std::unique_ptr<runtime::Executable>> CompileAndLoad(int64_t keep_layers) {
    codegen::CompileOptions options;
    options.keep_layers = keep_layers;
    options.verification = codegen::Verification::kOn;
    const absl::Status compiled = codegen::CompileModel(model_, PathFor(keep_layers), options, nullptr);
    if (!compiled.ok()) return compiled;
    return runtime::Executable::Load(PathFor(keep_layers));
  }

  std::string model_;
  std::filesystem::path directory_;
};

// The logits the first new token of `prompt` is sampled from.
std::vector<float> FirstLogits(runtime::StepRunner& runner, const std::vector<int32_t>& prompt) {
  runtime::Generator generator(runner, /*context_length=*/256);
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  std::vector<float> first;
  auto result = generator.Generate(
      prompt, greedy, /*max_new_tokens=*/1, [](int32_t) { return true; },
      [&](absl::Span<const float> logits) {
        if (first.empty()) first.assign(logits.begin(), logits.end());
      });
  EXPECT_TRUE(result.ok()) << result.status();
  return first;
}

TEST_F(KeepLayersTest, SelfDraftSharesTheWholeModelsPool) {
  auto whole = CompileAndLoad(0);
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto draft = CompileAndLoad(2);
  ASSERT_TRUE(draft.ok()) << draft.status();

  const kvx::KvLayout& whole_kv = (*whole)->kv_layout();
  const kvx::KvLayout& draft_kv = (*draft)->kv_layout();
  EXPECT_EQ(whole_kv.num_layers(), kStoriesLayers);
  EXPECT_EQ((*whole)->config().num_layers(), kStoriesLayers);
  EXPECT_EQ(draft_kv.num_layers(), 2u);
  EXPECT_EQ((*draft)->config().num_layers(), 2u);
  EXPECT_EQ(draft_kv.num_kv_heads(), whole_kv.num_kv_heads());
  EXPECT_EQ(draft_kv.head_dim(), whole_kv.head_dim());
  EXPECT_EQ(draft_kv.block_size(), whole_kv.block_size());
  EXPECT_EQ(draft_kv.key_type(), whole_kv.key_type());
  EXPECT_EQ(draft_kv.value_type(), whole_kv.value_type());

  auto runner = runtime::CpuStepRunner::Create(**whole, /*num_blocks=*/8, /*threads=*/1);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto draft_runner = runtime::CpuStepRunner::CreateOverPool(**draft, **runner, /*threads=*/1);
  ASSERT_TRUE(draft_runner.ok()) << draft_runner.status();

  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  const std::vector<float> whole_logits = FirstLogits(**runner, prompt);
  const std::vector<float> draft_logits = FirstLogits(**draft_runner, prompt);
  ASSERT_EQ(draft_logits.size(), whole_logits.size());
  ASSERT_FALSE(draft_logits.empty());
  float largest_difference = 0;
  for (size_t i = 0; i < draft_logits.size(); ++i) {
    ASSERT_TRUE(std::isfinite(draft_logits[i])) << "logit " << i;
    largest_difference = std::max(largest_difference, std::abs(draft_logits[i] - whole_logits[i]));
  }
  EXPECT_GT(largest_difference, 0.1f);
}

// kvjit verify of the .kvx cuts the model it re-imports as the executable's layers say.
TEST_F(KeepLayersTest, VerifyingTheExecutableCutsItsReference) {
  auto draft = CompileAndLoad(3);
  ASSERT_TRUE(draft.ok()) << draft.status();
  char* text = nullptr;
  size_t size = 0;
  std::FILE* progress = open_memstream(&text, &size);
  const absl::Status verified = codegen::VerifyExecutableFile(PathFor(3), /*threads=*/1, progress);
  std::fclose(progress);
  const std::string report(text, size);
  std::free(text);
  EXPECT_TRUE(verified.ok()) << verified << "\n" << report;
  EXPECT_THAT(report, HasSubstr("cut to its first 3 layers"));
}

TEST_F(KeepLayersTest, EveryLayerIsTheWholeModel) {
  auto all = CompileAndLoad(kStoriesLayers);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)->kv_layout().num_layers(), kStoriesLayers);
}

TEST_F(KeepLayersTest, MoreLayersThanTheModelsAreRefused) {
  codegen::CompileOptions options;
  options.keep_layers = kStoriesLayers + 1;
  const absl::Status status = codegen::CompileModel(model_, PathFor(6), options, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("keep-first-layers{layers=6} keeps more layers than @forward's 5"));
  EXPECT_FALSE(std::filesystem::exists(PathFor(6)));
}

}  // namespace
}  // namespace kvjit
