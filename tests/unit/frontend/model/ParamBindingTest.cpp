// BindParams: IR binds to the weights it was built from, and names the
// tfm.param that another model's weights do not match, or lack.

#include <string>

#include "frontend/model/DecoderBuilder.h"
#include "frontend/model/ParamBinding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/frontend/model/InMemoryWeights.h"
#include "passes/registration/KvjitRegistration.h"

namespace kvjit::model {
namespace {

using ::testing::HasSubstr;

class ParamBindingTest : public ::testing::Test {
 protected:
  ParamBindingTest() : context_(Registry()), config_(TinyGqaConfig()) {}

  static mlir::DialectRegistry Registry() {
    mlir::DialectRegistry registry;
    RegisterKvjitDialects(registry);
    return registry;
  }

  mlir::MLIRContext context_;
  ModelConfig config_;
};

TEST_F(ParamBindingTest, BindsToTheWeightsItWasBuiltFrom) {
  InMemoryWeights weights = RandomWeightsFor(config_, /*seed=*/1);
  auto module = BuildDecoderModule(context_, config_, weights);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_TRUE(BindParams(**module, weights).ok());
}

// Gemma's 1 + w norm scales are made by the compiler; their sources bind.
TEST_F(ParamBindingTest, BindsTheSourcesOfShiftedNormScales) {
  ModelConfig gemma_norms = config_;
  gemma_norms.norm_weights_plus_one = true;
  InMemoryWeights weights = RandomWeightsFor(gemma_norms, /*seed=*/1);
  auto module = BuildDecoderModule(context_, gemma_norms, weights);
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_TRUE(BindParams(**module, weights).ok());
  weights.Remove("output_norm.weight");
  absl::Status status = BindParams(**module, weights);
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tfm.param @output_norm.weight declares tensor<16xf32> storage <f32>, but "
                        "in-memory has no weight of that name"));
}

TEST_F(ParamBindingTest, NamesTheParamOfAnotherShape) {
  auto module = BuildDecoderModule(context_, config_, RandomWeightsFor(config_, /*seed=*/1));
  ASSERT_TRUE(module.ok()) << module.status();
  ModelConfig wider = config_;
  wider.intermediate_size = 32;
  absl::Status status = BindParams(**module, RandomWeightsFor(wider, /*seed=*/1));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tfm.param @blk.0.ffn_gate.weight declares tensor<24x16xf32> storage "
                        "<f32>, but in-memory stores it as [32, 16] f32"));
}

TEST_F(ParamBindingTest, NamesTheParamTheModelLacks) {
  ModelConfig untied = config_;
  untied.tied_embeddings = false;
  auto module = BuildDecoderModule(context_, untied, RandomWeightsFor(untied, /*seed=*/1));
  ASSERT_TRUE(module.ok()) << module.status();
  absl::Status status = BindParams(**module, RandomWeightsFor(config_, /*seed=*/1));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("tfm.param @output.weight declares tensor<40x16xf32> storage <f32>"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("has no weight of that name"));
}

}  // namespace
}  // namespace kvjit::model
