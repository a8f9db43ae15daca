// choose-weight-layouts end to end: stories260K and SmolLM2 compiled with
// the pass (choosing the interleaved layout for every weight that qualifies)
// and without it give the same greedy ids and the same logits, bit for bit,
// on the CPU; the f32 model's weights all keep GGUF's rows, and SmolLM2's
// interleaved weights, its tied embedding among them (both the lookup's
// table and the output projection), come from the sidecar. The CUDA target
// refuses CPU layouts.

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "codegen/driver/Compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/core/BuildConfig.h"
#include "runtime/exec/Executable.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/e2e/LlamaCppComparison.h"
#include "tests/unit/e2e/SameGreedyRun.h"

namespace kvjit {
namespace {

struct LayoutCounts {
  int64_t gguf = 0;
  int64_t interleaved_in_sidecar = 0;
};

class WeightLayoutsEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("kvjit-weight-layouts-" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  // The default passes with choose-weight-layouts choosing the layout
  // wherever it can (policy=every), or without the pass.
  static std::string Pipeline(bool with_layouts) {
    return std::string("fuse-attention,fuse-projections,") +
           (with_layouts ? "choose-weight-layouts{isa=avx512vnni policy=every}," : "") +
           "insert-kv-cache{block-size=16 cache-dtype=f16},fuse-elementwise,"
           "plan-memory{max-tokens-per-step=64}";
  }

  // `model` through Pipeline(with_layouts), verified against the reference
  // evaluator.
  std::unique_ptr<runtime::Executable> Compile(const std::string& model, bool with_layouts) {
    codegen::CompileOptions options;
    options.verification = codegen::Verification::kOn;
    options.pipeline = Pipeline(with_layouts);
    auto executable = testing::CompileAndLoad(model, options);
    EXPECT_TRUE(executable.ok()) << executable.status();
    return executable.ok() ? *std::move(executable) : nullptr;
  }

  // How many weights keep GGUF's rows, and how many are interleaved and
  // read from the sidecar (the executable's last weight file).
  static LayoutCounts Layouts(const runtime::Executable& executable) {
    LayoutCounts counts;
    const uint32_t sidecar = executable.root().weight_files()->size() - 1;
    for (const kvx::Weight* weight : *executable.root().weights()) {
      if (weight->layout() == kvx::WeightLayout::Gguf) {
        ++counts.gguf;
      } else if (weight->layout() == kvx::WeightLayout::RowsInterleaved8 && weight->file_index() == sidecar) {
        ++counts.interleaved_in_sidecar;
      }
    }
    return counts;
  }

  static const kvx::Weight* FindWeight(const runtime::Executable& executable, const std::string& name) {
    for (const kvx::Weight* weight : *executable.root().weights()) {
      if (weight->name()->str() == name) return weight;
    }
    return nullptr;
  }

  std::filesystem::path directory_;
};

// stories260K is f32: no weight qualifies, so the pass leaves every one in
// the GGUF file.
TEST_F(WeightLayoutsEndToEndTest, StoriesIsF32AndKeepsEveryWeightInGgufRows) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
  std::unique_ptr<runtime::Executable> laid_out = Compile(path, true);
  std::unique_ptr<runtime::Executable> gguf = Compile(path, false);
  ASSERT_TRUE(laid_out && gguf);
  EXPECT_EQ(Layouts(*laid_out).interleaved_in_sidecar, 0);
  EXPECT_EQ(Layouts(*laid_out).gguf, static_cast<int64_t>(laid_out->root().weights()->size()));
  // The prompt runs through the GEMM (on a CPU with AVX-512 VNNI), the
  // decode steps through the GEMV.
  testing::ExpectSameGreedyRun(*laid_out, *gguf, {1, 403, 407, 261, 378, 10, 200, 31}, 24);
}

// SmolLM2 Q4_1 (its output projection is the tied Q8_0 embedding): each
// layer's four linears (q/k/v and gate/up fused, o, down) are interleaved,
// and so is the tied embedding, which every step reads twice, as the
// lookup's table and as the output projection.
TEST_F(WeightLayoutsEndToEndTest, SmolLM2InterleavesItsLinearsWithTheSameLogits) {
  const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) GTEST_SKIP() << "SmolLM2 not found: run tools/scripts/fetch_model.sh";
  std::unique_ptr<runtime::Executable> laid_out = Compile(path, true);
  std::unique_ptr<runtime::Executable> gguf = Compile(path, false);
  ASSERT_TRUE(laid_out && gguf);
  const int64_t layers = laid_out->config().num_layers();
  EXPECT_EQ(Layouts(*laid_out).interleaved_in_sidecar, 4 * layers + 1);
  EXPECT_EQ(Layouts(*gguf).interleaved_in_sidecar, 0);
  const kvx::Weight* embedding = FindWeight(*laid_out, "token_embd.weight");
  ASSERT_NE(embedding, nullptr);
  EXPECT_EQ(embedding->layout(), kvx::WeightLayout::RowsInterleaved8);
  testing::ExpectSameGreedyRun(*laid_out, *gguf, {1, 4093, 314, 253, 1345, 28, 2752, 436, 2270, 30}, 24);
}

#if KVJIT_HAVE_CUDA
// The CUDA kernels read GGUF's rows: a --target cuda pipeline that chooses
// CPU layouts is refused after its passes, and nothing is written.
TEST_F(WeightLayoutsEndToEndTest, TheCudaTargetRefusesCpuLayouts) {
  const std::string path = testing::DownloadedModelPath("SmolLM2-135M-Instruct.Q4_1.gguf");
  if (path.empty()) GTEST_SKIP() << "SmolLM2 not found: run tools/scripts/fetch_model.sh";
  codegen::CompileOptions options;
  options.target = "cuda";
  options.verification = codegen::Verification::kOff;
  options.pipeline = Pipeline(true);
  const std::string kvx = (directory_ / "cuda.kvx").string();
  const absl::Status status = codegen::CompileModel(path, kvx, options, nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("--target cuda: the pipeline chose CPU weight layouts"));
  EXPECT_FALSE(std::filesystem::exists(kvx));
}
#endif  // KVJIT_HAVE_CUDA

}  // namespace
}  // namespace kvjit
