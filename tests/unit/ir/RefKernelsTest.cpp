#include "ir/Reference/RefKernels.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::reference {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

TEST(RefKernelsTest, LinearAddsBiasToEachRow) {
  RefTensor x = RefTensor::Float({2, 3}, {1, 2, 3, 4, 5, 6});
  RefTensor w = RefTensor::Float({2, 3}, {1, 0, 0, 0, 1, 1});
  RefTensor b = RefTensor::Float({2}, {10, 20});
  absl::StatusOr<RefTensor> y = Linear(x, w, &b);
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_THAT(y->shape, ElementsAre(2, 2));
  EXPECT_THAT(y->values, ElementsAre(11, 25, 14, 31));
}

TEST(RefKernelsTest, LinearRejectsMismatchedFeatures) {
  absl::StatusOr<RefTensor> y =
      Linear(RefTensor::Float({1, 2}, {1, 2}), RefTensor::Float({1, 3}, {1, 2, 3}), nullptr);
  ASSERT_FALSE(y.ok());
  EXPECT_THAT(y.status().message(), HasSubstr("tfm.linear"));
}

TEST(RefKernelsTest, RmsNormDividesByRootMeanSquare) {
  RefTensor x = RefTensor::Float({1, 2}, {3, 4});
  RefTensor w = RefTensor::Float({2}, {1, 2});
  absl::StatusOr<RefTensor> y = RmsNorm(x, w, 0.0);
  ASSERT_TRUE(y.ok());
  const double rms = std::sqrt((9.0 + 16.0) / 2);
  EXPECT_THAT(y->values, ElementsAre(FloatNear(3 / rms, 1e-6), FloatNear(8 / rms, 1e-6)));
}

TEST(RefKernelsTest, RopeRotatesPairsByPositionTimesFrequency) {
  // One token at position 2, one head of 4: pair 0 turns by 2 rad, pair 1 by
  // 2 · 100^(-1/2) = 0.2 rad with theta 100.
  RefTensor x = RefTensor::Float({1, 1, 4}, {1, 0, 1, 0});
  RefTensor positions = RefTensor::Int({1}, {2});
  RopeParams params;
  params.theta = 100;
  absl::StatusOr<RefTensor> interleaved = Rope(x, positions, params);
  ASSERT_TRUE(interleaved.ok());
  EXPECT_THAT(interleaved->values,
              Pointwise(FloatNear(1e-6), {std::cos(2.0f), std::sin(2.0f), std::cos(0.2f),
                                          std::sin(0.2f)}));
  params.pairing = RopePairing::kNeox;
  absl::StatusOr<RefTensor> neox = Rope(RefTensor::Float({1, 1, 4}, {1, 1, 0, 0}), positions, params);
  ASSERT_TRUE(neox.ok());
  EXPECT_THAT(neox->values, Pointwise(FloatNear(1e-6), {std::cos(2.0f), std::cos(0.2f),
                                                        std::sin(2.0f), std::sin(0.2f)}));
}

TEST(RefKernelsTest, RopeLinearScalingDividesFrequencies) {
  RopeParams params;
  params.theta = 10000;
  params.scaling.kind = RopeScalingKind::kLinear;
  params.scaling.factor = 4;
  EXPECT_DOUBLE_EQ(RopeFrequency(params, 0, 8), 0.25);
}

TEST(RefKernelsTest, RopeLlama3ScalingKeepsHighAndScalesLowFrequencies) {
  RopeParams params;
  params.theta = 500000;
  params.scaling.kind = RopeScalingKind::kLlama3;
  params.scaling.factor = 8;
  params.scaling.low_freq_factor = 1;
  params.scaling.high_freq_factor = 4;
  params.scaling.original_context = 8192;
  RopeParams unscaled = params;
  unscaled.scaling.kind = RopeScalingKind::kNone;
  // Pair 0 has wavelength 2π, far below 8192 / 4: unchanged.
  EXPECT_DOUBLE_EQ(RopeFrequency(params, 0, 128), RopeFrequency(unscaled, 0, 128));
  // The last pair's wavelength exceeds 8192: divided by the factor.
  EXPECT_DOUBLE_EQ(RopeFrequency(params, 63, 128), RopeFrequency(unscaled, 63, 128) / 8);
}

TEST(RefKernelsTest, MatmulMultipliesEachBatch) {
  RefTensor a = RefTensor::Float({2, 1, 2}, {1, 2, 3, 4});
  RefTensor b = RefTensor::Float({2, 2, 1}, {5, 6, 7, 8});
  absl::StatusOr<RefTensor> c = Matmul(a, b);
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(c->shape, ElementsAre(2, 1, 1));
  EXPECT_THAT(c->values, ElementsAre(17, 53));
}

TEST(RefKernelsTest, TransposeMovesDimensions) {
  RefTensor x = RefTensor::Float({2, 3}, {0, 1, 2, 3, 4, 5});
  absl::StatusOr<RefTensor> t = Transpose(x, {1, 0});
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->shape, ElementsAre(3, 2));
  EXPECT_THAT(t->values, ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(RefKernelsTest, RepeatCopiesEachSliceInARow) {
  // [tokens=1, kv_heads=2, dim=2] → [1, 4, 2] with heads 0,0,1,1.
  RefTensor x = RefTensor::Float({1, 2, 2}, {1, 2, 3, 4});
  absl::StatusOr<RefTensor> r = Repeat(x, 1, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->shape, ElementsAre(1, 4, 2));
  EXPECT_THAT(r->values, ElementsAre(1, 2, 1, 2, 3, 4, 3, 4));
}

TEST(RefKernelsTest, ReshapeInfersTheDynamicDimension) {
  absl::StatusOr<RefTensor> r = Reshape(RefTensor::Float({2, 4}, std::vector<float>(8)), {-1, 2, 2});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT(r->shape, ElementsAre(2, 2, 2));
  EXPECT_FALSE(Reshape(RefTensor::Float({2, 4}, std::vector<float>(8)), {3, 3}).ok());
}

TEST(RefKernelsTest, CausalMaskAlignsQueriesWithTheLastKeys) {
  // Two queries over three keys: the queries sit at positions 1 and 2.
  RefTensor scores = RefTensor::Float({2, 3}, std::vector<float>(6, 1));
  absl::StatusOr<RefTensor> masked = CausalMask(scores);
  ASSERT_TRUE(masked.ok());
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_THAT(masked->values, ElementsAre(1, 1, -inf, 1, 1, 1));
}

TEST(RefKernelsTest, SoftmaxIgnoresMaskedEntries) {
  const float inf = std::numeric_limits<float>::infinity();
  absl::StatusOr<RefTensor> p = Softmax(RefTensor::Float({1, 3}, {0, 0, -inf}), -1);
  ASSERT_TRUE(p.ok());
  EXPECT_THAT(p->values, ElementsAre(0.5f, 0.5f, 0.0f));
}

TEST(RefKernelsTest, SiluAndGelu) {
  RefTensor x = RefTensor::Float({2}, {0, 1});
  EXPECT_THAT(Silu(x).values, Pointwise(FloatNear(1e-6), {0.0f, 0.7310586f}));
  EXPECT_THAT(Gelu(x, false).values, Pointwise(FloatNear(1e-6), {0.0f, 0.8413447f}));
  EXPECT_THAT(Gelu(x, true).values, Pointwise(FloatNear(1e-6), {0.0f, 0.8411920f}));
}

TEST(RefKernelsTest, EmbeddingRejectsIdsOutsideTheVocabulary) {
  RefTensor table = RefTensor::Float({2, 1}, {5, 6});
  absl::StatusOr<RefTensor> ok = Embedding(table, RefTensor::Int({2}, {1, 0}));
  ASSERT_TRUE(ok.ok());
  EXPECT_THAT(ok->values, ElementsAre(6, 5));
  absl::StatusOr<RefTensor> bad = Embedding(table, RefTensor::Int({1}, {2}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("token id 2 at index 0 is outside the vocabulary of 2"));
}

}  // namespace
}  // namespace kvjit::reference
