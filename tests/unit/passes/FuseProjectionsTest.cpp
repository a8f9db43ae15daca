// fuse-projections on whole models from the frontend: Q, K, V and gate, up of
// every layer fused, and logits that the reference evaluator finds unchanged.

#include <algorithm>
#include <cmath>

#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "gtest/gtest.h"
#include "ir/Reference/ReferenceGeneration.h"
#include "ir/Tfm/TfmOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "passes/Passes.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/common/TestPaths.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit {
namespace {

using ::kvjit::testing::AllWithin;

struct LinearCensus {
  int64_t linears = 0;
  int64_t slices = 0;
  int64_t concatenated_params = 0;
};

LinearCensus TakeCensus(mlir::ModuleOp module) {
  LinearCensus census;
  module.walk([&](mlir::Operation* op) {
    if (mlir::isa<tfm::LinearOp>(op)) ++census.linears;
    if (mlir::isa<tfm::SliceColumnsOp>(op)) ++census.slices;
    if (auto param = mlir::dyn_cast<tfm::ParamOp>(op); param && param.getConcat()) {
      ++census.concatenated_params;
    }
  });
  return census;
}

absl::StatusOr<reference::RefTensor> Logits(mlir::ModuleOp module,
                                            reference::WeightProvider& weights,
                                            absl::Span<const int32_t> tokens) {
  reference::ReferenceEvaluator evaluator(module, weights);
  return reference::EvaluateLogits(evaluator, model::kForwardFunctionName, tokens);
}

// Relative to each logit, with 1e-5 as the floor for logits near zero.
void ExpectSameLogits(const reference::RefTensor& fused, const reference::RefTensor& unfused) {
  ASSERT_EQ(fused.shape, unfused.shape);
  std::vector<double> tolerances;
  for (float logit : unfused.values) tolerances.push_back(1e-5f * std::max(1.0f, std::abs(logit)));
  EXPECT_TRUE(AllWithin(fused.values, unfused.values, tolerances));
}

class FuseProjectionsTest : public ::testing::Test {
 protected:
  FuseProjectionsTest() : context_(Registry()) {}

  static mlir::DialectRegistry Registry() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    return registry;
  }

  // Per layer, gate/up (2 linears) become 1 linear with 2 views, and so do
  // Q/K/V (3 linears, 3 views) where they have no bias; the output
  // projection, down and the head stay.
  void CheckModel(const model::ModelConfig& config, const model::WeightSource& source,
                  absl::Span<const int32_t> tokens) {
    auto module = model::BuildDecoderModule(context_, config, source);
    ASSERT_TRUE(module.ok()) << module.status();
    model::ReferenceWeights weights(source);
    auto unfused = Logits(**module, weights, tokens);
    ASSERT_TRUE(unfused.ok()) << unfused.status();
    const LinearCensus before = TakeCensus(**module);

    mlir::PassManager passes(&context_);
    passes.addPass(createFuseProjections());
    ASSERT_TRUE(mlir::succeeded(passes.run(**module)));
    ASSERT_TRUE(mlir::succeeded(mlir::verify(**module)));
    const LinearCensus after = TakeCensus(**module);
    const int64_t qkv = config.qkv_bias ? 0 : 1;
    EXPECT_EQ(after.linears, before.linears - (1 + 2 * qkv) * config.num_layers);
    EXPECT_EQ(after.slices, (2 + 3 * qkv) * config.num_layers);
    EXPECT_EQ(after.concatenated_params, (1 + qkv) * config.num_layers);

    auto fused = Logits(**module, weights, tokens);
    ASSERT_TRUE(fused.ok()) << fused.status();
    ExpectSameLogits(*fused, *unfused);
  }

  mlir::MLIRContext context_;
};

// Its Q, K and V have biases: only gate and up fuse.
TEST_F(FuseProjectionsTest, TinyGqaModelWithQkvBiasKeepsItsLogits) {
  model::ModelConfig config = model::TinyGqaConfig();
  model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/11);
  const std::vector<int32_t> tokens = {1, 17, 4, 33, 9, 25, 2};
  CheckModel(config, weights, tokens);
}

TEST_F(FuseProjectionsTest, TinyGqaModelKeepsItsLogits) {
  model::ModelConfig config = model::TinyGqaConfig();
  config.qkv_bias = false;
  model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/11);
  const std::vector<int32_t> tokens = {1, 17, 4, 33, 9, 25, 2};
  CheckModel(config, weights, tokens);
}

TEST_F(FuseProjectionsTest, Stories260KKeepsItsLogits) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
  auto model = model::OpenModelFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 10, 200, 31};
  CheckModel(model->config, *model->weights, tokens);
}

}  // namespace
}  // namespace kvjit
