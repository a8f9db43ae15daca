// fuse-attention on whole models from the frontend: every layer's attention
// becomes one tfm.attention over the unrepeated KV heads, and the reference
// evaluator's logits do not move.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "gtest/gtest.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "ir/Tfm/TfmOps.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;
using ::kvjit::testing::Relative;

template <typename OpTy>
int64_t CountOps(mlir::ModuleOp module) {
  int64_t count = 0;
  module.walk([&](OpTy) { ++count; });
  return count;
}

class FuseAttentionTest : public ::testing::Test {
 protected:
  FuseAttentionTest() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    context_.appendDialectRegistry(registry);
  }

  // Fuses a copy of `module`, so that both versions can be evaluated.
  mlir::OwningOpRef<mlir::ModuleOp> Fused(mlir::ModuleOp module) {
    mlir::OwningOpRef<mlir::ModuleOp> fused = module.clone();
    mlir::PassManager passes(&context_);
    passes.addPass(createFuseAttention());
    EXPECT_TRUE(mlir::succeeded(passes.run(*fused)));
    return fused;
  }

  // One causal attention per layer, reading kv_heads (not heads) of K and V,
  // scaled by 1/sqrt(head_dim), with none of the naive chain left behind.
  void ExpectEveryLayerFused(mlir::ModuleOp fused, const model::ModelConfig& config) {
    EXPECT_EQ(CountOps<tfm::AttentionOp>(fused), config.num_layers);
    EXPECT_EQ(CountOps<tfm::SoftmaxOp>(fused), 0);
    EXPECT_EQ(CountOps<tfm::CausalMaskOp>(fused), 0);
    EXPECT_EQ(CountOps<tfm::RepeatOp>(fused), 0);
    EXPECT_EQ(CountOps<tfm::MatmulOp>(fused), 0);
    EXPECT_EQ(CountOps<tfm::TransposeOp>(fused), 0);
    const float expected_scale = 1.0f / std::sqrt(static_cast<float>(config.head_dim));
    fused.walk([&](tfm::AttentionOp attention) {
      EXPECT_TRUE(attention.getCausal());
      EXPECT_FLOAT_EQ(attention.getScale().convertToFloat(), expected_scale);
      auto key_type = mlir::cast<mlir::RankedTensorType>(attention.getKey().getType());
      EXPECT_EQ(key_type.getDimSize(1), config.num_kv_heads);
    });
  }

  // The fused module's logits against the original's, on each sequence.
  void ExpectSameLogits(mlir::ModuleOp original, mlir::ModuleOp fused,
                        reference::WeightProvider& weights,
                        const std::vector<std::vector<int32_t>>& sequences) {
    reference::ReferenceEvaluator before(original, weights);
    reference::ReferenceEvaluator after(fused, weights);
    for (const std::vector<int32_t>& tokens : sequences) {
      SCOPED_TRACE(::testing::Message() << "sequence of " << tokens.size() << " tokens");
      auto expected = reference::EvaluateLogits(before, model::kForwardFunctionName, tokens);
      auto actual = reference::EvaluateLogits(after, model::kForwardFunctionName, tokens);
      ASSERT_TRUE(expected.ok()) << expected.status();
      ASSERT_TRUE(actual.ok()) << actual.status();
      ASSERT_EQ(actual->shape, expected->shape);
      EXPECT_TRUE(AllClose(actual->values, expected->values, Absolute(1e-5) + Relative(1e-5)));
    }
  }

  void CheckRandomModel(const model::ModelConfig& config) {
    model::InMemoryWeights weights = model::RandomWeightsFor(config, 21);
    auto module = model::BuildDecoderModule(context_, config, weights);
    ASSERT_TRUE(module.ok()) << module.status();
    mlir::OwningOpRef<mlir::ModuleOp> fused = Fused(**module);
    ExpectEveryLayerFused(*fused, config);
    model::ReferenceWeights provider(weights);
    ExpectSameLogits(**module, *fused, provider,
                     {{3, 17, 5, 39, 0, 22, 8}, {11}, {30, 30, 2, 19}});
  }

  mlir::MLIRContext context_;
};

TEST_F(FuseAttentionTest, GroupedQueryModelWithBiasKeepsItsLogits) {
  CheckRandomModel(model::TinyGqaConfig());
}

TEST_F(FuseAttentionTest, MultiHeadModelKeepsItsLogits) {
  model::ModelConfig config = model::TinyGqaConfig();
  config.architecture = "llama";
  config.num_kv_heads = config.num_heads;
  config.qkv_bias = false;
  CheckRandomModel(config);
}

TEST_F(FuseAttentionTest, Stories260KKeepsItsLogits) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
  auto model_file = model::OpenModelFile(path);
  ASSERT_TRUE(model_file.ok()) << model_file.status();
  auto module = model::BuildDecoderModule(context_, model_file->config, *model_file->weights);
  ASSERT_TRUE(module.ok()) << module.status();
  mlir::OwningOpRef<mlir::ModuleOp> fused = Fused(**module);
  ExpectEveryLayerFused(*fused, model_file->config);
  model::ReferenceWeights provider(*model_file->weights);
  ExpectSameLogits(**module, *fused, provider,
                   {{1, 403, 407, 261, 378, 410, 268, 379, 1}, {1}, {1, 200, 13, 500}});
}

}  // namespace
}  // namespace kvjit
