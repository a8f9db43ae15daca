// fuse-projections end to end: stories260K and SmolLM2 compiled with and
// without the pass give the same greedy ids and the same logits on the CPU,
// and the fused executable reads its concatenated weights from a sidecar.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "codegen/driver/Compiler.h"
#include "gtest/gtest.h"
#include "passes/Pipeline.h"
#include "runtime/exec/Executable.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/e2e/SameGreedyRun.h"

namespace kvjit {
namespace {

class FuseProjectionsEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("kvjit-fuse-projections-" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  // `model` compiled with the default pipeline, or with fuse-projections
  // left out; both verified against the reference evaluator.
  std::unique_ptr<runtime::Executable> Compile(const std::string& model, bool fuse_projections) {
    codegen::CompileOptions options;
    options.cache_dtype = "f16";
    options.max_tokens_per_step = 64;
    options.verification = codegen::Verification::kOn;
    options.build_pipeline = [&](mlir::OpPassManager& pm) {
      KvjitPipelineOptions pipeline;
      pipeline.cacheElementType = options.cache_dtype;
      pipeline.maxTokensPerStep = options.max_tokens_per_step;
      pipeline.fuseProjections = fuse_projections;
      BuildKvjitPipeline(pm, pipeline);
    };
    const std::string kvx =
        (directory_ / (fuse_projections ? "fused.kvx" : "unfused.kvx")).string();
    absl::Status compiled = codegen::CompileModel(model, kvx, options, nullptr);
    EXPECT_TRUE(compiled.ok()) << compiled;
    if (!compiled.ok()) return nullptr;
    auto executable = runtime::Executable::Load(kvx);
    EXPECT_TRUE(executable.ok()) << executable.status();
    return executable.ok() ? *std::move(executable) : nullptr;
  }

  static int64_t Linears(const runtime::Executable& executable) {
    int64_t count = 0;
    for (const kvx::Instruction* instruction : *executable.program().instructions()) {
      count += instruction->op() == kvx::OpCode::Linear;
    }
    return count;
  }

  // Per layer, Q/K/V and gate/up each become one Linear, whose weights are
  // in a sidecar, the executable's second weight file; the greedy ids and
  // every logit are the same (each output is the same row times the same
  // activations, only in a longer matrix).
  void CheckModel(const std::string& model, const std::vector<int32_t>& prompt) {
    std::unique_ptr<runtime::Executable> fused = Compile(model, true);
    std::unique_ptr<runtime::Executable> unfused = Compile(model, false);
    ASSERT_TRUE(fused && unfused);
    const int64_t layers = fused->config().num_layers();
    EXPECT_EQ(Linears(*fused), Linears(*unfused) - 3 * layers);
    ASSERT_EQ(fused->root().weight_files()->size(), 2u);
    EXPECT_EQ(unfused->root().weight_files()->size(), 1u);
    // The sidecar lies beside the executable that names it; one without
    // made weights has none.
    EXPECT_EQ(fused->root().weight_files()->Get(1)->path()->str(),
              std::filesystem::absolute(directory_ / "fused.kvw").lexically_normal().string());
    EXPECT_TRUE(std::filesystem::exists(directory_ / "fused.kvw"));
    EXPECT_FALSE(std::filesystem::exists(directory_ / "unfused.kvw"));

    testing::ExpectSameGreedyRun(*fused, *unfused, prompt, 24);
  }

  std::filesystem::path directory_;
};

TEST_F(FuseProjectionsEndToEndTest, StoriesGivesTheSameGreedyTextAndLogits) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
  CheckModel(path, {1, 403, 407, 261, 378, 10, 200, 31});
}

TEST_F(FuseProjectionsEndToEndTest, SmolLM2GivesTheSameGreedyTextAndLogits) {
  const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) GTEST_SKIP() << "SmolLM2 not found: run tools/scripts/fetch_model.sh";
  CheckModel(path, {1, 4093, 314, 253, 1345, 28, 2752, 436, 2270, 30});
}

}  // namespace
}  // namespace kvjit
