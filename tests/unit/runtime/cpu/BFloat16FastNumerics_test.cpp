// CpuNumerics::kFast's bf16 kernels (AVX-512 BF16's vdpbf16ps: the single
// row, the decode GEMV and the GEMM) against a scalar model of their stated
// arithmetic (docs/numerics.md, "The fast CPU numerics"): per (row, token),
// 32-element chunks in order into 16 f32 lanes, lane l taking elements
// 2l + 1 and then 2l of each chunk by an exact product and one rounded add,
// then the lanes folded 8, 4, 2, 1.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/MatMul.h"
#include "runtime/quant/Half.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/runtime/cpu/MultiplyOnPool.h"

namespace kvjit::cpu {
namespace {

using ::kvjit::testing::AllEqual;
using quant::StorageType;

float Bf16(float value) { return quant::BFloat16ToFloat(quant::FloatToBFloat16(value)); }

float WeightAt(const std::vector<uint8_t>& bytes, int64_t index) {
  uint16_t bits;
  std::memcpy(&bits, bytes.data() + 2 * index, sizeof bits);
  return quant::BFloat16ToFloat(bits);
}

struct ModelResult {
  float value;
  double magnitude;  // the sum of the products' magnitudes, the scale of the rounding
};

// The stated arithmetic for one weight row and one token. The test's values
// are far from f32's denormals, which vdpbf16ps would flush.
ModelResult ModelDot(const std::vector<uint8_t>& weights, int64_t row, const float* x, int64_t cols) {
  float lanes[16] = {};
  double magnitude = 0.0;
  for (int64_t c = 0; c < cols / 32; ++c) {
    for (int l = 0; l < 16; ++l) {
      for (int64_t e : {32 * c + 2 * l + 1, 32 * c + 2 * l}) {
        const float w = WeightAt(weights, row * cols + e);
        const float a = Bf16(x[e]);
        lanes[l] = std::fma(w, a, lanes[l]);
        magnitude += std::fabs(static_cast<double>(w) * a);
      }
    }
  }
  float eights[8], fours[4];
  for (int l = 0; l < 8; ++l) eights[l] = lanes[l] + lanes[l + 8];
  for (int l = 0; l < 4; ++l) fours[l] = eights[l] + eights[l + 4];
  const float twos[2] = {fours[0] + fours[2], fours[1] + fours[3]};
  return {twos[0] + twos[1], magnitude};
}

bool HasFastBf16() { return CpuSupportsAvx512Bf16(); }

struct Case {
  std::vector<uint8_t> bytes;
  WeightView weight;
  std::vector<float> x;
};

// 37 rows (past a GEMM tile's four and a GEMV's group of four), bf16 weights
// and activations of a few magnitudes, some activations not bf16 yet (the
// kernels see them rounded, as MatMul rounds them).
Case MakeCase(int64_t rows, int64_t cols, int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  Case c;
  c.bytes.resize(static_cast<size_t>(2 * rows * cols));
  for (int64_t i = 0; i < rows * cols; ++i) {
    const uint16_t bits = quant::FloatToBFloat16(normal(rng) * (i % 7 == 0 ? 0.5f : 0.02f));
    std::memcpy(c.bytes.data() + 2 * i, &bits, sizeof bits);
  }
  c.weight = WeightView{StorageType::kBF16, rows, cols, c.bytes};
  c.x.resize(static_cast<size_t>(tokens * cols));
  for (int64_t i = 0; i < tokens * cols; ++i) c.x[i] = i % 53 == 0 ? 30.0f * normal(rng) : normal(rng);
  return c;
}

std::vector<float> RunMatMul(const Case& c, int64_t tokens, int threads, CpuNumerics numerics) {
  return testing::MultiplyOnPool(c.weight, c.x, tokens, threads, CpuIsa::kAvx512Vnni, numerics);
}

// Columns: one chunk, three (no multiple of a longer block), a Gemma 3
// 270M's hidden size, and more chunks than a GEMM run takes (32).
class BFloat16FastNumericsTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(BFloat16FastNumericsTest, EqualsTheStatedArithmeticBitForBit) {
  if (!HasFastBf16()) GTEST_SKIP() << "this CPU or build has no AVX-512 BF16";
  const int64_t cols = GetParam();
  for (int64_t tokens : {1, 2, 3, 4, 5, 7, 33, 133}) {
    const Case c = MakeCase(37, cols, tokens, 21);
    std::vector<float> expected(static_cast<size_t>(tokens * c.weight.rows));
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t o = 0; o < c.weight.rows; ++o) {
        expected[t * c.weight.rows + o] = ModelDot(c.bytes, o, c.x.data() + t * cols, cols).value;
      }
    }
    for (int threads : {1, 2, 3}) {
      EXPECT_TRUE(AllEqual(RunMatMul(c, tokens, threads, CpuNumerics::kFast), expected))
          << cols << " columns, " << tokens << " tokens, " << threads << " threads";
    }
  }
}

// A token's results do not depend on the step around it.
TEST_P(BFloat16FastNumericsTest, ResultsDoNotDependOnBatch) {
  if (!HasFastBf16()) GTEST_SKIP() << "this CPU or build has no AVX-512 BF16";
  const int64_t cols = GetParam();
  constexpr int64_t kTokens = 33;
  Case c = MakeCase(37, cols, kTokens, 22);
  const std::vector<float> batch = RunMatMul(c, kTokens, 2, CpuNumerics::kFast);
  const std::vector<float> all_x = c.x;
  for (int64_t t = 0; t < kTokens; t += 8) {
    c.x.assign(all_x.begin() + t * cols, all_x.begin() + (t + 1) * cols);
    const std::vector<float> alone = RunMatMul(c, 1, 2, CpuNumerics::kFast);
    EXPECT_TRUE(AllEqual(alone, std::vector<float>(batch.begin() + t * 37, batch.begin() + (t + 1) * 37)))
        << "token " << t;
  }
}

// The same products, other roundings: within a few float epsilons of the
// products' magnitudes of the batch-invariant results, and not equal to them
// everywhere (the test would pass on the batch-invariant kernels).
TEST_P(BFloat16FastNumericsTest, DiffersFromBatchInvariantOnlyByFloatRounding) {
  if (!HasFastBf16()) GTEST_SKIP() << "this CPU or build has no AVX-512 BF16";
  const int64_t cols = GetParam();
  constexpr int64_t kTokens = 9;
  const Case c = MakeCase(37, cols, kTokens, 23);
  const std::vector<float> fast = RunMatMul(c, kTokens, 2, CpuNumerics::kFast);
  const std::vector<float> invariant = RunMatMul(c, kTokens, 2, CpuNumerics::kBatchInvariant);
  int64_t differing = 0;
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t o = 0; o < 37; ++o) {
      const size_t i = static_cast<size_t>(t * 37 + o);
      ASSERT_FALSE(std::isnan(fast[i])) << i;
      const double magnitude = ModelDot(c.bytes, o, c.x.data() + t * cols, cols).magnitude;
      const double bound = 16.0 * std::numeric_limits<float>::epsilon() * magnitude;
      EXPECT_NEAR(fast[i], invariant[i], bound) << cols << " columns, output " << i;
      differing += fast[i] != invariant[i];
    }
  }
  EXPECT_GT(differing, 0) << "the fast kernels gave the batch-invariant bits everywhere: did they run?";
}

INSTANTIATE_TEST_SUITE_P(Columns, BFloat16FastNumericsTest, ::testing::Values(32, 96, 640, 2048),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return std::to_string(info.param) + "_columns";
                         });

// Rows whose columns are not a multiple of 32 keep the batch-invariant
// kernels under the fast numerics: the same bits, at one token and at many.
TEST(BFloat16FastNumericsFallbackTest, ColumnsOffTheChunkKeepTheBatchInvariantBits) {
  if (!CpuSupports(CpuIsa::kAvx512Vnni)) GTEST_SKIP() << "this CPU or build has no AVX-512 VNNI";
  for (int64_t tokens : {1, 7}) {
    const Case c = MakeCase(37, 48, tokens, 24);
    EXPECT_TRUE(AllEqual(RunMatMul(c, tokens, 2, CpuNumerics::kFast),
                         RunMatMul(c, tokens, 2, CpuNumerics::kBatchInvariant)))
        << tokens << " tokens";
  }
}

}  // namespace
}  // namespace kvjit::cpu
