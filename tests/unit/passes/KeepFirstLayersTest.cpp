// keep-first-layers on whole models from the frontend: the model cut after
// its first K layers is, op for op and param for param, the model the
// frontend builds with K layers over the same weights.

#include <random>
#include <string>

#include "frontend/model/DecoderBuilder.h"
#include "gtest/gtest.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit {
namespace {

std::string Printed(mlir::ModuleOp module) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  module.print(stream);
  return text;
}

class KeepFirstLayersTest : public ::testing::Test {
 protected:
  KeepFirstLayersTest() : context_(Registry()) {}

  static mlir::DialectRegistry Registry() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    return registry;
  }

  // `config`'s model cut to each count of layers from 1 to all against the
  // frontend's model of that many layers.
  void ExpectCutAsBuilt(const model::ModelConfig& config, const model::WeightSource& weights) {
    for (int64_t layers = 1; layers <= config.num_layers; ++layers) {
      auto whole = model::BuildDecoderModule(context_, config, weights);
      ASSERT_TRUE(whole.ok()) << whole.status();
      mlir::PassManager pm(&context_);
      pm.addPass(createKeepFirstLayers({layers}));
      ASSERT_TRUE(mlir::succeeded(pm.run(**whole))) << layers << " layers";
      ASSERT_TRUE(mlir::succeeded(mlir::verify(**whole)));

      model::ModelConfig fewer = config;
      fewer.num_layers = layers;
      auto built = model::BuildDecoderModule(context_, fewer, weights);
      ASSERT_TRUE(built.ok()) << built.status();
      EXPECT_EQ(Printed(**whole), Printed(**built)) << layers << " layers";
    }
  }

  mlir::MLIRContext context_;
};

// Tied embeddings: the output projection reads token_embd, as the embedding does.
TEST_F(KeepFirstLayersTest, TinyGqaModelCutIsTheModelOfFewerLayers) {
  model::ModelConfig config = model::TinyGqaConfig();
  config.num_layers = 4;
  const model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/5);
  ExpectCutAsBuilt(config, weights);
}

// Gemma 2's shape: norms after attention and the FFN (the last layer's
// output is the sum with a normed branch), and the logits soft-capped after
// the output projection.
TEST_F(KeepFirstLayersTest, PostNormsAndSoftCappedLogitsAreCutAlike) {
  model::ModelConfig config = model::TinyGqaConfig();
  config.num_layers = 3;
  config.qkv_bias = false;
  config.post_norms = true;
  config.final_logit_softcap = 30.0;
  model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/6);
  std::mt19937 rng(7);
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    weights.AddRandom(p + "post_attention_norm.weight", {config.hidden_size}, rng, 1.0f);
    weights.AddRandom(p + "post_ffw_norm.weight", {config.hidden_size}, rng, 1.0f);
  }
  ExpectCutAsBuilt(config, weights);
}

}  // namespace
}  // namespace kvjit
