#include "runtime/cpu/RowKernels.h"

#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/quant/Dequantize.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/runtime/cpu/RandomWeights.h"

namespace kvjit::cpu {
namespace {

using ::kvjit::testing::Absolute;
using ::kvjit::testing::AllClose;
using ::kvjit::testing::AllEqual;
using ::kvjit::testing::Relative;
using ::testing::HasSubstr;

std::vector<float> RandomVector(int64_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = normal(rng);
  return v;
}

std::vector<double> NaiveRmsNorm(const std::vector<float>& x, const std::vector<float>& w, double eps, int64_t rows,
                                 int64_t width) {
  std::vector<double> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double squares = 0.0;
    for (int64_t i = 0; i < width; ++i) squares += static_cast<double>(x[r * width + i]) * x[r * width + i];
    const double scale = 1.0 / std::sqrt(squares / width + eps);
    for (int64_t i = 0; i < width; ++i) out[r * width + i] = x[r * width + i] * scale * w[i];
  }
  return out;
}

// Rows of 1000 (not a multiple of anything) wide enough for a 3-thread split.
constexpr int64_t kRows = 50;
constexpr int64_t kWidth = 1000;

// Each output is a handful of f32 operations on an f64-accurate sum: a few ulps.
constexpr double kFewUlps = 2e-6;

TEST(RmsNormTest, MatchesDoublePrecisionAndIsThreadInvariant) {
  const std::vector<float> x = RandomVector(kRows * kWidth, 1, 3.0f);
  const std::vector<float> w = RandomVector(kWidth, 2);
  std::vector<float> reference_out;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> out(x.size());
    ASSERT_TRUE(RmsNorm(x.data(), w.data(), 1e-5f, kRows, kWidth, out.data(), pool).ok());
    EXPECT_TRUE(AllClose(out, NaiveRmsNorm(x, w, 1e-5f, kRows, kWidth), Relative(kFewUlps)));
    if (threads == 1) reference_out = out;
    EXPECT_TRUE(AllEqual(out, reference_out)) << threads << " threads";
  }
}

// ggml's order written out: the sum of squares in double, element by
// element, then (x * scale) * w in f32; every row count takes it, whether
// its rows fall in the kernel's groups of four or after them.
TEST(RmsNormTest, FollowsGgmlsOrderForEveryRowCount) {
  constexpr int64_t kNormWidth = 576;
  for (int64_t rows : {1, 3, 4, 5, 8, 9, 16, 19}) {
    const std::vector<float> x = RandomVector(rows * kNormWidth, 40 + static_cast<uint32_t>(rows), 2.0f);
    const std::vector<float> w = RandomVector(kNormWidth, 41);
    std::vector<float> want(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * kNormWidth;
      double sum = 0.0;
      for (int64_t i = 0; i < kNormWidth; ++i) sum += static_cast<double>(row[i] * row[i]);
      const float scale = 1.0f / std::sqrt(static_cast<float>(sum / kNormWidth) + 1e-5f);
      for (int64_t i = 0; i < kNormWidth; ++i) want[r * kNormWidth + i] = (row[i] * scale) * w[i];
    }
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> out(x.size(), std::nanf(""));
      ASSERT_TRUE(RmsNorm(x.data(), w.data(), 1e-5f, rows, kNormWidth, out.data(), pool).ok());
      EXPECT_TRUE(AllEqual(out, want)) << rows << " rows, " << threads << " threads";
      std::vector<float> residual(x.size(), 0.0f), normed(x.size(), std::nanf(""));
      ASSERT_TRUE(AddRmsNorm(residual.data(), x.data(), w.data(), 1e-5f, rows, kNormWidth, normed.data(), pool).ok());
      EXPECT_TRUE(AllEqual(normed, want)) << "AddRmsNorm, " << rows << " rows, " << threads << " threads";
    }
  }
}

TEST(RmsNormTest, WorksInPlace) {
  std::vector<float> x = RandomVector(3 * 64, 3);
  const std::vector<float> w = RandomVector(64, 4);
  ThreadPool pool(2);
  std::vector<float> separate(x.size());
  ASSERT_TRUE(RmsNorm(x.data(), w.data(), 1e-6f, 3, 64, separate.data(), pool).ok());
  ASSERT_TRUE(RmsNorm(x.data(), w.data(), 1e-6f, 3, 64, x.data(), pool).ok());
  EXPECT_TRUE(AllEqual(x, separate));
}

TEST(AddRmsNormTest, WritesTheSumBackAndNormsIt) {
  const std::vector<float> residual_in = RandomVector(kRows * kWidth, 5);
  const std::vector<float> delta = RandomVector(kRows * kWidth, 6);
  const std::vector<float> w = RandomVector(kWidth, 7);
  std::vector<float> sum(residual_in.size());
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = residual_in[i] + delta[i];
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<float> residual = residual_in, normed(residual.size());
    ASSERT_TRUE(AddRmsNorm(residual.data(), delta.data(), w.data(), 1e-5f, kRows, kWidth, normed.data(), pool).ok());
    EXPECT_TRUE(AllEqual(residual, sum));
    EXPECT_TRUE(AllClose(normed, NaiveRmsNorm(sum, w, 1e-5f, kRows, kWidth), Relative(kFewUlps)));
  }
}

TEST(ElementWiseTest, SiluAndSwiGluMatchDoublePrecision) {
  const int64_t n = 40000;
  std::vector<float> gate = RandomVector(n, 8, 4.0f);
  gate[0] = 0.0f;
  gate[1] = -120.0f;  // exp(-v) overflows f32: silu must still be ~0
  gate[2] = 120.0f;
  const std::vector<float> up = RandomVector(n, 9);
  std::vector<double> silu(n), swiglu(n);
  for (int64_t i = 0; i < n; ++i) {
    silu[i] = gate[i] / (1.0 + std::exp(-static_cast<double>(gate[i])));
    swiglu[i] = silu[i] * up[i];
  }
  ThreadPool pool(3);
  std::vector<float> out(n);
  ASSERT_TRUE(Silu(gate.data(), out.data(), n, pool).ok());
  EXPECT_TRUE(AllClose(out, silu, Relative(kFewUlps) + Absolute(1e-30)));
  ASSERT_TRUE(SwiGlu(gate.data(), up.data(), out.data(), n, pool).ok());
  EXPECT_TRUE(AllClose(out, swiglu, Relative(kFewUlps) + Absolute(1e-30)));
}

// GELU's tanh form against the formula in double, within 2e-6 of |x|, over
// [-12, 12] and at the extremes (where exp(-2u) overflows or vanishes, and
// where x^3 overflows); the same bits on any thread count.
TEST(ElementWiseTest, GeluTanhMatchesDoublePrecision) {
  std::vector<float> x;
  for (double v = -12.0; v <= 12.0; v += 1.0 / 1024) x.push_back(static_cast<float>(v));
  for (float v : {-1e30f, -120.0f, -0.0f, 120.0f, 1e30f}) x.push_back(v);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<double> gelu(n);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    gelu[i] = std::isinf(v * v * v) ? (v > 0 ? v : 0.0)
                                    : 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * v * (1.0 + 0.044715 * v * v)));
  }
  std::vector<float> first(n);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<float> out(n);
    ASSERT_TRUE(GeluTanh(x.data(), out.data(), n, pool).ok());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_FALSE(std::isnan(out[i])) << "x = " << x[i];
      ASSERT_LE(std::fabs(out[i] - gelu[i]), 2e-6 * std::fabs(x[i]) + 1e-30) << "x = " << x[i];
    }
    if (threads == 1) first = out;
    EXPECT_TRUE(AllEqual(out, first)) << threads << " threads";
  }
  ThreadPool pool(1);
  const absl::Status negative = GeluTanh(x.data(), first.data(), -1, pool);
  EXPECT_NE(negative.message().find("GeluTanh"), std::string::npos) << negative;
  EXPECT_FALSE(GeluTanh(nullptr, first.data(), 4, pool).ok());
}

// tanh against the double, within 1e-6 relative, over [-20, 20] (finely
// around 0.1, where the kernel changes form) and at the extremes; odd; the
// same bits on any thread count.
TEST(ElementWiseTest, TanhMatchesDoublePrecision) {
  std::vector<float> x;
  for (double v = -20.0; v <= 20.0; v += 1.0 / 512) x.push_back(static_cast<float>(v));
  for (double v = 0.09; v <= 0.11; v += 1e-6) x.push_back(static_cast<float>(v));
  for (float v : {-1e30f, -88.0f, -1e-30f, -0.0f, 0.0f, 1e-30f, 1e-7f, 88.0f, 1e30f,
                  std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
    x.push_back(v);
  }
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> first(n);
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<float> out(n);
    ASSERT_TRUE(Tanh(x.data(), out.data(), n, pool).ok());
    for (int64_t i = 0; i < n; ++i) {
      const double expected = std::tanh(static_cast<double>(x[i]));
      ASSERT_FALSE(std::isnan(out[i])) << "x = " << x[i];
      ASSERT_LE(std::fabs(out[i] - expected), 1e-6 * std::fabs(expected)) << "x = " << x[i];
    }
    if (threads == 1) first = out;
    EXPECT_TRUE(AllEqual(out, first)) << threads << " threads";
  }
  std::vector<float> negated(n), out(n), out_negated(n);
  for (int64_t i = 0; i < n; ++i) negated[i] = -x[i];
  ThreadPool pool(1);
  ASSERT_TRUE(Tanh(x.data(), out.data(), n, pool).ok());
  ASSERT_TRUE(Tanh(negated.data(), out_negated.data(), n, pool).ok());
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out_negated[i], -out[i]) << "x = " << x[i];
  const float nan = std::numeric_limits<float>::quiet_NaN();
  float nan_out = 0;
  ASSERT_TRUE(Tanh(&nan, &nan_out, 1, pool).ok());
  EXPECT_TRUE(std::isnan(nan_out));
  EXPECT_FALSE(Tanh(x.data(), out.data(), -1, pool).ok());
}

// Gate and up as column views of one fused [rows, 3 * width] result (gate
// first, then up, then a third projection): the same bits as SwiGlu on the
// dense rows, one row (decode) and many.
TEST(ElementWiseTest, SwiGluRowsOfColumnViewsEqualsSwiGluOfDenseRows) {
  const int64_t width = 96;
  const int64_t stride = 3 * width;
  ThreadPool pool(3);
  for (int64_t rows : {1, 7}) {
    const std::vector<float> fused = RandomVector(rows * stride, 21, 4.0f);
    std::vector<float> gate(rows * width), up(rows * width);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(&gate[r * width], &fused[r * stride], width * sizeof(float));
      std::memcpy(&up[r * width], &fused[r * stride + width], width * sizeof(float));
    }
    std::vector<float> dense(rows * width), viewed(rows * width);
    ASSERT_TRUE(SwiGlu(gate.data(), up.data(), dense.data(), rows * width, pool).ok());
    ASSERT_TRUE(SwiGluRows(fused.data(), stride, fused.data() + width, stride, viewed.data(), rows,
                           width, pool)
                    .ok());
    EXPECT_TRUE(AllEqual(viewed, dense)) << rows << " rows";
  }
}

// silu(v) = v / (1 + FastExp(-v)), llama.cpp's bits: computed with exactly
// rounded f32 operations (Python fractions) from the exp algorithm.
TEST(ElementWiseTest, SiluHasGgmlsBits) {
  const std::vector<float> gate = {-4.0f, -1.5f, -0.25f, 0.125f, 2.0f, 6.5f};
  const std::vector<uint32_t> want = {0xbd9357d2, 0xbe8c1a52, 0xbde02a67, 0x3d87fd57, 0x3fe17bec, 0x40cfb010};
  const std::vector<float> up(gate.size(), 1.0f);
  ThreadPool pool(1);
  std::vector<float> silu(gate.size()), swiglu(gate.size());
  ASSERT_TRUE(Silu(gate.data(), silu.data(), static_cast<int64_t>(gate.size()), pool).ok());
  ASSERT_TRUE(SwiGlu(gate.data(), up.data(), swiglu.data(), static_cast<int64_t>(gate.size()), pool).ok());
  for (size_t i = 0; i < gate.size(); ++i) {
    uint32_t silu_bits, swiglu_bits;
    std::memcpy(&silu_bits, &silu[i], sizeof silu_bits);
    std::memcpy(&swiglu_bits, &swiglu[i], sizeof swiglu_bits);
    EXPECT_EQ(silu_bits, want[i]) << "silu(" << gate[i] << ")";
    EXPECT_EQ(swiglu_bits, want[i]) << "swiglu(" << gate[i] << ", 1)";
  }
}

// One correctly rounded f32 operation each: exactly the double result rounded.
TEST(ElementWiseTest, AddMulScaleAreExactlyRounded) {
  const int64_t n = 40001;
  const std::vector<float> a = RandomVector(n, 10), b = RandomVector(n, 11);
  std::vector<float> sum(n), product(n), eighth(n);
  for (int64_t i = 0; i < n; ++i) {
    sum[i] = static_cast<float>(static_cast<double>(a[i]) + b[i]);
    product[i] = static_cast<float>(static_cast<double>(a[i]) * b[i]);
    eighth[i] = a[i] / 8;
  }
  ThreadPool pool(2);
  std::vector<float> out(n);
  ASSERT_TRUE(Add(a.data(), b.data(), out.data(), n, pool).ok());
  EXPECT_TRUE(AllEqual(out, sum)) << "Add";
  ASSERT_TRUE(Mul(a.data(), b.data(), out.data(), n, pool).ok());
  EXPECT_TRUE(AllEqual(out, product)) << "Mul";
  ASSERT_TRUE(Scale(a.data(), 0.125f, out.data(), n, pool).ok());
  EXPECT_TRUE(AllEqual(out, eighth)) << "Scale";
}

TEST(SoftmaxTest, MatchesDoublePrecisionAndIsThreadInvariant) {
  std::vector<float> x = RandomVector(kRows * kWidth, 12, 5.0f);
  x[3] = 80.0f;  // exp would overflow without the max shift
  std::vector<double> expected(x.size());
  for (int64_t r = 0; r < kRows; ++r) {
    double max = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < kWidth; ++i) max = std::max(max, static_cast<double>(x[r * kWidth + i]));
    for (int64_t i = 0; i < kWidth; ++i) sum += std::exp(x[r * kWidth + i] - max);
    for (int64_t i = 0; i < kWidth; ++i) expected[r * kWidth + i] = std::exp(x[r * kWidth + i] - max) / sum;
  }
  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> out(x.size());
    ASSERT_TRUE(Softmax(x.data(), kRows, kWidth, out.data(), pool).ok());
    // x - max is rounded in f32 (|x - max| <= ~100 here, so up to ~6e-6
    // absolute in the exponent), which dominates the few ulps of the rest;
    // the tiniest probabilities are f32 subnormals, good to ~1e-45.
    EXPECT_TRUE(AllClose(out, expected, Relative(1e-5) + Absolute(1e-44)));
    if (threads == 1) first = out;
    EXPECT_TRUE(AllEqual(out, first)) << threads << " threads";
  }
}

TEST(EmbeddingLookupTest, DequantizesOnlyTheSelectedRowsBitForBit) {
  for (quant::StorageType type : {quant::StorageType::kF16, quant::StorageType::kQ4_1, quant::StorageType::kQ6_K}) {
    std::mt19937 rng(13);
    const int64_t rows = 20, cols = 256;
    const std::vector<uint8_t> table_bytes = testing::RandomWeights(type, rows, cols, rng);
    const WeightView table{type, rows, cols, table_bytes};
    const std::vector<int32_t> ids = {7, 0, 19, 7};
    ThreadPool pool(2);
    std::vector<float> out(ids.size() * cols);
    ASSERT_TRUE(EmbeddingLookup(table, ids.data(), static_cast<int64_t>(ids.size()), out.data(), pool).ok());
    const size_t row_bytes = table_bytes.size() / rows;
    for (size_t i = 0; i < ids.size(); ++i) {
      std::vector<float> expected(cols);
      ASSERT_TRUE(quant::DequantizeRow(type, absl::MakeConstSpan(table_bytes).subspan(ids[i] * row_bytes, row_bytes),
                                       absl::MakeSpan(expected))
                      .ok());
      EXPECT_TRUE(AllEqual(absl::MakeConstSpan(out).subspan(i * cols, cols), expected)) << "id " << ids[i];
    }
  }
}

TEST(EmbeddingLookupTest, RejectsIdsOutsideTheTable) {
  std::vector<uint8_t> bytes(4 * 8 * 2);
  const WeightView table{quant::StorageType::kF16, 4, 8, bytes};
  const int32_t ids[] = {1, 4};
  std::vector<float> out(16);
  ThreadPool pool(1);
  const absl::Status status = EmbeddingLookup(table, ids, 2, out.data(), pool);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr("EmbeddingLookup: token id 4 at 1"));
}

TEST(GatherRowsTest, CopiesTheIndexedRows) {
  const std::vector<float> src = RandomVector(6 * 5, 14);
  const int32_t indices[] = {5, 2, 2};
  std::vector<float> out(15);
  ThreadPool pool(2);
  ASSERT_TRUE(GatherRows(src.data(), 6, 5, indices, 3, out.data(), pool).ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(AllEqual(absl::MakeConstSpan(out).subspan(i * 5, 5),
                         absl::MakeConstSpan(src).subspan(indices[i] * 5, 5)))
        << "row " << i;
  }
  const int32_t bad[] = {6};
  EXPECT_THAT(GatherRows(src.data(), 6, 5, bad, 1, out.data(), pool).message(),
              HasSubstr("GatherRows: index 6 at 0 is outside the source's 6 rows"));
}

TEST(RowKernelErrors, NameTheKernelAndTheSizes) {
  ThreadPool pool(1);
  EXPECT_THAT(RmsNorm(nullptr, nullptr, 1e-5f, -1, 4, nullptr, pool).message(),
              HasSubstr("RmsNorm: negative shape [-1 x 4]"));
  EXPECT_THAT(Softmax(nullptr, 2, 3, nullptr, pool).message(), HasSubstr("Softmax: null pointer for 6 elements"));
  EXPECT_THAT(Add(nullptr, nullptr, nullptr, -3, pool).message(), HasSubstr("Add: negative element count -3"));
}

}  // namespace
}  // namespace kvjit::cpu
