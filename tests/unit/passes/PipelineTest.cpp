// The pipeline as text: the default pipeline's text builds the passes
// BuildKvjitPipeline adds; which passes a module is past is read off the IR
// after each real pass; a textual pipeline for a module leaves out what the
// module is past, finds the KV block size, and names a required pass that is
// missing or kvjit passes out of order.

#include <string>
#include <vector>

#include "frontend/model/DecoderBuilder.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "passes/Passes.h"
#include "passes/Pipeline.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Printed(mlir::OpPassManager& pm) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  pm.printAsTextualPipeline(stream);
  return text;
}

class PipelineTest : public ::testing::Test {
 protected:
  PipelineTest() : context_(Registry()) {
    config_ = model::TinyGqaConfig();
    weights_ = model::RandomWeightsFor(config_, /*seed=*/3);
  }

  static mlir::DialectRegistry Registry() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    return registry;
  }

  mlir::OwningOpRef<mlir::ModuleOp> Imported() {
    auto module = model::BuildDecoderModule(context_, config_, weights_);
    EXPECT_TRUE(module.ok()) << module.status();
    return module.ok() ? std::move(*module) : nullptr;
  }

  // Runs the textual pipeline `text` on `module`, as ParsePipelineFor
  // prepares it; the error text where it refuses.
  std::string Run(mlir::ModuleOp module, const std::string& text,
                  PipelineForModule* decided = nullptr) {
    mlir::PassManager pm(&context_);
    std::string errors;
    llvm::raw_string_ostream stream(errors);
    mlir::FailureOr<PipelineForModule> parsed = ParsePipelineFor(module, text, pm, stream);
    if (mlir::failed(parsed)) return errors.empty() ? "refused without a reason" : errors;
    if (decided != nullptr) *decided = *parsed;
    return mlir::succeeded(pm.run(module)) ? "" : "the passes failed";
  }

  model::ModelConfig config_;
  model::InMemoryWeights weights_;
  mlir::MLIRContext context_;
};

TEST_F(PipelineTest, DefaultTextBuildsTheDefaultPipeline) {
  KvjitPipelineOptions options;
  options.blockSize = 32;
  options.cacheElementType = "f16";
  options.maxTokensPerStep = 128;
  options.kvMemoryMib = 64;
  options.keepLayers = 1;
  mlir::OpPassManager built(mlir::ModuleOp::getOperationName());
  BuildKvjitPipeline(built, options);
  registerKvjitPasses();
  mlir::OpPassManager parsed(mlir::ModuleOp::getOperationName());
  std::string errors;
  llvm::raw_string_ostream stream(errors);
  ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(KvjitPipelineText(options), parsed, stream)))
      << errors;
  EXPECT_EQ(Printed(parsed), Printed(built));
  EXPECT_THAT(Printed(parsed), HasSubstr("block-size=32"));
  EXPECT_THAT(Printed(parsed), HasSubstr("keep-first-layers{layers=1},fuse-attention"));
}

TEST_F(PipelineTest, PassesBehindFollowEachPass) {
  auto module = Imported();
  ASSERT_TRUE(module);
  EXPECT_THAT(PassesBehind(*module), IsEmpty());
  registerKvjitPasses();
  std::vector<std::string> expected;
  for (const KvjitStage& stage : KvjitStages()) {
    // With its default of one rank, shard-tensor-parallel leaves the model
    // as it is, and an unsplit model is not behind it.
    if (!stage.behind_when_left_out) continue;
    expected.push_back(stage.pass);
    // stories260K is f32: choose-weight-layouts lays out none of its weights
    // and leaves no mark; the next stage's shows it behind.
    if (llvm::StringRef(stage.pass) == "choose-weight-layouts") continue;
    mlir::PassManager pm(&context_);
    std::string errors;
    llvm::raw_string_ostream stream(errors);
    ASSERT_TRUE(mlir::succeeded(mlir::parsePassPipeline(stage.pass, pm, stream))) << errors;
    ASSERT_TRUE(mlir::succeeded(pm.run(*module))) << stage.pass;
    EXPECT_THAT(PassesBehind(*module), ElementsAreArray(expected)) << "after " << stage.pass;
  }
}

TEST_F(PipelineTest, AnOptionalPassLeftOutCountsAsBehind) {
  auto module = Imported();
  ASSERT_TRUE(module);
  ASSERT_EQ(Run(*module, "fuse-attention,insert-kv-cache,plan-memory"), "");
  // fuse-elementwise can no longer run on the planned module.
  EXPECT_THAT(PassesBehind(*module),
              ElementsAre("fuse-attention", "fuse-projections", "choose-weight-layouts", "insert-kv-cache",
                          "fuse-elementwise", "plan-memory"));
}

TEST_F(PipelineTest, ARefusedPipelineRunsNothing) {
  auto module = Imported();
  ASSERT_TRUE(module);
  EXPECT_THAT(Run(*module, "fuse-attention"), HasSubstr("leaves out insert-kv-cache"));
  EXPECT_THAT(PassesBehind(*module), IsEmpty());
}

TEST_F(PipelineTest, SkipsThePassesTheModuleIsPast) {
  auto module = Imported();
  ASSERT_TRUE(module);
  mlir::PassManager first(&context_);
  std::string errors;
  llvm::raw_string_ostream stream(errors);
  registerKvjitPasses();
  ASSERT_TRUE(mlir::succeeded(
      mlir::parsePassPipeline("fuse-attention,insert-kv-cache{block-size=8}", first, stream)));
  ASSERT_TRUE(mlir::succeeded(first.run(*module)));
  EXPECT_THAT(PassesBehind(*module),
              ElementsAre("fuse-attention", "fuse-projections", "choose-weight-layouts", "insert-kv-cache"));

  PipelineForModule decided;
  KvjitPipelineOptions defaults;
  ASSERT_EQ(Run(*module, KvjitPipelineText(defaults), &decided), "");
  EXPECT_THAT(decided.skipped, ElementsAre("fuse-attention", "fuse-projections", "insert-kv-cache"));
  // The cache insert-kv-cache made, not the default pipeline's option.
  EXPECT_EQ(decided.kv_block_size, 8);
  EXPECT_THAT(PassesBehind(*module),
              ElementsAre("fuse-attention", "fuse-projections", "choose-weight-layouts", "insert-kv-cache",
                          "fuse-elementwise", "plan-memory"));
}

TEST_F(PipelineTest, BlockSizeComesFromThePipelinesOption) {
  auto module = Imported();
  ASSERT_TRUE(module);
  PipelineForModule decided;
  ASSERT_EQ(Run(*module, "fuse-attention,insert-kv-cache{block-size=32},plan-memory", &decided),
            "");
  EXPECT_THAT(decided.skipped, IsEmpty());
  EXPECT_EQ(decided.kv_block_size, 32);
}

// keep-first-layers is the compile's to run before the rest, on --verify's
// reference too: the pipeline gives its count and leaves it out.
TEST_F(PipelineTest, KeepFirstLayersIsTakenOutOfThePipeline) {
  auto module = Imported();
  ASSERT_TRUE(module);
  PipelineForModule decided;
  ASSERT_EQ(Run(*module, "keep-first-layers{layers=1},fuse-attention,insert-kv-cache,plan-memory",
                &decided),
            "");
  EXPECT_EQ(decided.keep_layers, 1);
  EXPECT_EQ(StepCache(*module).getLayers(), config_.num_layers);

  auto whole = Imported();
  ASSERT_TRUE(whole);
  PipelineForModule without;
  ASSERT_EQ(Run(*whole, "fuse-attention,insert-kv-cache,plan-memory", &without), "");
  EXPECT_EQ(without.keep_layers, std::nullopt);
}

TEST_F(PipelineTest, KeepFirstLayersComesFirst) {
  auto module = Imported();
  ASSERT_TRUE(module);
  EXPECT_THAT(Run(*module, "fuse-attention,keep-first-layers{layers=1},insert-kv-cache,plan-memory"),
              HasSubstr("runs keep-first-layers after another pass; it must come first"));
}

TEST_F(PipelineTest, NamesTheMissingRequiredPass) {
  for (const char* missing : {"fuse-attention", "insert-kv-cache", "plan-memory"}) {
    std::string text;
    for (const KvjitStage& stage : KvjitStages()) {
      if (stage.pass == std::string(missing)) continue;
      text += text.empty() ? "" : ",";
      text += stage.pass;
    }
    auto module = Imported();
    ASSERT_TRUE(module);
    EXPECT_THAT(Run(*module, text), HasSubstr(std::string("leaves out ") + missing))
        << "pipeline " << text;
  }
}

TEST_F(PipelineTest, RefusesKvjitPassesOutOfOrder) {
  auto module = Imported();
  ASSERT_TRUE(module);
  EXPECT_THAT(Run(*module, "fuse-attention,insert-kv-cache,plan-memory,fuse-elementwise"),
              HasSubstr("runs fuse-elementwise after plan-memory"));
}

TEST_F(PipelineTest, ReportsSyntaxErrorsAndUnknownPasses) {
  auto module = Imported();
  ASSERT_TRUE(module);
  EXPECT_THAT(Run(*module, "fuse-attention,no-such-pass"),
              HasSubstr("'no-such-pass' does not refer to a registered pass"));
  EXPECT_THAT(Run(*module, "insert-kv-cache{block-size=}"), HasSubstr("block-size"));
}

}  // namespace
}  // namespace kvjit
