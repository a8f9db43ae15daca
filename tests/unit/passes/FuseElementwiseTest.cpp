// fuse-elementwise on whole models from the frontend: the fusions every Llama
// layer gets, and logits that the reference evaluator finds unchanged.

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ModelFile.h"
#include "frontend/model/ReferenceWeights.h"
#include "gtest/gtest.h"
#include "ir/Kernel/KernelOps.h"
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

using ::kvjit::testing::AllWithin;
using kernel::FusionKind;

// A fusion's kind, and for a row_wise fusion the ops of its body
// ("row_wise tfm.add tfm.rms_norm").
std::string FusionName(kernel::FusionOp fusion) {
  std::string name = kernel::stringifyFusionKind(fusion.getKind()).str();
  if (fusion.getKind() != FusionKind::row_wise) return name;
  for (mlir::Operation& op : fusion.getBody().front().without_terminator()) {
    name += " " + op.getName().getStringRef().str();
  }
  return name;
}

struct FusionCensus {
  std::map<std::string, int64_t> fusions;
  // Elementwise and row-wise tfm ops that no fusion holds.
  int64_t left_outside = 0;
};

FusionCensus TakeCensus(mlir::ModuleOp module) {
  FusionCensus census;
  module.walk([&](mlir::Operation* op) {
    if (auto fusion = mlir::dyn_cast<kernel::FusionOp>(op)) {
      ++census.fusions[FusionName(fusion)];
    } else if ((op->hasTrait<tfm::OpTrait::Elementwise>() || op->hasTrait<tfm::OpTrait::RowWise>()) &&
               !op->getParentOfType<kernel::FusionOp>()) {
      ++census.left_outside;
    }
  });
  return census;
}

// The frontend's Llama layer, attention still naive: the attention residual
// add with the FFN norm and the FFN residual add with the next norm (the
// next layer's or the output norm), SwiGLU, rope of q and of k, and the
// attention scores' scale with the causal mask. The first layer's norm reads
// the embedding and runs alone.
void ExpectLlamaFusions(mlir::ModuleOp module, int64_t layers) {
  FusionCensus census = TakeCensus(module);
  EXPECT_EQ(census.fusions["row_wise tfm.add tfm.rms_norm"], 2 * layers);
  EXPECT_EQ(census.fusions["swiglu"], layers);
  EXPECT_EQ(census.fusions["row_wise tfm.rope"], 2 * layers);
  EXPECT_EQ(census.fusions["elementwise"], layers);
  EXPECT_EQ(census.fusions["row_wise tfm.rms_norm"], 1);
  EXPECT_EQ(census.fusions.size(), 5u);
  EXPECT_EQ(census.left_outside, 0);
}

void RunFuseElementwise(mlir::ModuleOp module) {
  mlir::PassManager passes(module.getContext());
  passes.addPass(createFuseElementwise());
  ASSERT_TRUE(mlir::succeeded(passes.run(module)));
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

class FuseElementwiseTest : public ::testing::Test {
 protected:
  FuseElementwiseTest() : context_(Registry()) {}

  static mlir::DialectRegistry Registry() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    return registry;
  }

  // Fuses the model's module and checks its fusions and its logits for `tokens`.
  void CheckModel(const model::ModelConfig& config, const model::WeightSource& source,
                  absl::Span<const int32_t> tokens) {
    auto module = model::BuildDecoderModule(context_, config, source);
    ASSERT_TRUE(module.ok()) << module.status();
    model::ReferenceWeights weights(source);
    auto unfused = Logits(**module, weights, tokens);
    ASSERT_TRUE(unfused.ok()) << unfused.status();

    RunFuseElementwise(**module);
    ExpectLlamaFusions(**module, config.num_layers);
    auto fused = Logits(**module, weights, tokens);
    ASSERT_TRUE(fused.ok()) << fused.status();
    ExpectSameLogits(*fused, *unfused);
  }

  mlir::MLIRContext context_;
};

TEST_F(FuseElementwiseTest, TinyGqaModelKeepsItsLogits) {
  model::ModelConfig config = model::TinyGqaConfig();
  model::InMemoryWeights weights = model::RandomWeightsFor(config, /*seed=*/7);
  const std::vector<int32_t> tokens = {1, 17, 4, 33, 9, 25, 2};
  CheckModel(config, weights, tokens);
}

TEST_F(FuseElementwiseTest, Stories260KKeepsItsLogits) {
  const std::string path = testing::SharedPath("models/stories260K.gguf");
  if (path.empty()) GTEST_SKIP() << "stories260K.gguf not found under $KVJIT_SHARED_DIR/models";
  auto model = model::OpenModelFile(path);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 10, 200, 31};
  CheckModel(model->config, *model->weights, tokens);
}

}  // namespace
}  // namespace kvjit
