#include "runtime/cpu/MatMul.h"

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/quant/Dequantize.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/runtime/cpu/MultiplyOnPool.h"
#include "tests/unit/runtime/cpu/RandomWeights.h"

namespace kvjit::cpu {
namespace {

using ::kvjit::testing::AllEqual;
using ::kvjit::testing::AllWithin;
using ::testing::HasSubstr;
using quant::StorageType;

constexpr StorageType kAllTypes[] = {StorageType::kF32,  StorageType::kF16,  StorageType::kBF16, StorageType::kQ8_0,
                                     StorageType::kQ4_0, StorageType::kQ4_1, StorageType::kQ5_0, StorageType::kQ5_1,
                                     StorageType::kQ4_K, StorageType::kQ5_K, StorageType::kQ6_K};

bool IsKQuant(StorageType type) {
  return type == StorageType::kQ4_K || type == StorageType::kQ5_K || type == StorageType::kQ6_K;
}
bool IsFloat(StorageType type) {
  return type == StorageType::kF32 || type == StorageType::kF16 || type == StorageType::kBF16;
}

// Odd sizes: 37 output rows; an odd number of blocks per row; for the float
// types a column count with a tail past the last 32-element chunk.
int64_t ColsFor(StorageType type) {
  // Six super-blocks: the K-quant GEMM's runs of four, the last one partial.
  if (IsKQuant(type)) return 6 * 256;
  if (IsFloat(type)) return 13 * 32 + 21;
  return 13 * 32;
}
constexpr int64_t kRows = 37;

struct Problem {
  std::vector<uint8_t> bytes;
  WeightView weight;
  std::vector<float> x;  // [tokens, cols]
  int64_t tokens;
};

// Activations like a hidden state: mostly N(0, 1), a few outliers per row,
// and (in the first token) a block of zeros to exercise amax = 0.
Problem MakeProblem(StorageType type, int64_t tokens, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem problem;
  const int64_t cols = ColsFor(type);
  problem.bytes = testing::RandomWeights(type, kRows, cols, rng);
  problem.weight = WeightView{type, kRows, cols, problem.bytes};
  problem.tokens = tokens;
  problem.x.resize(static_cast<size_t>(tokens * cols));
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int64_t> column(0, cols - 1);
  for (float& v : problem.x) v = normal(rng);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int k = 0; k < 3; ++k) problem.x[t * cols + column(rng)] *= 20.0f;
  }
  const int64_t zero_run = IsKQuant(type) ? 256 : 32;
  std::fill(problem.x.begin(), problem.x.begin() + zero_run, 0.0f);
  return problem;
}

std::vector<float> RunMatMul(const Problem& p, int threads, CpuIsa isa) {
  return testing::MultiplyOnPool(p.weight, p.x, p.tokens, threads, isa);
}

std::vector<CpuIsa> SupportedIsas() {
  std::vector<CpuIsa> isas = {CpuIsa::kPortable};
  if (CpuSupports(CpuIsa::kAvx2)) isas.push_back(CpuIsa::kAvx2);
  if (CpuSupports(CpuIsa::kAvx512Vnni)) isas.push_back(CpuIsa::kAvx512Vnni);
  return isas;
}

// The largest error activation quantization may introduce into
// y[t, o] = sum_i w[o, i] x[t, i], derived from each scheme:
//  - Q8_0 / Q8_1 blocks: d = amax / 127 is stored as f16, so an element's
//    error is at most d / 2 (rounding to the integer grid) plus
//    127 * d * 2^-11 (the f16 rounding of d): 0.57 d. Q8_1's s = d * sum(q)
//    is rounded to f16 too, costing |m| * 2^-11 * |d * sum(q)| on top.
//  - Q8_K: f32 d, so d / 2 per element (0.51 d for the float rounding).
//  - F16 / BF16 activations: |x| * 2^-11 / |x| * 2^-8.
// On top, 1e-5 * sum |w x| covers the f32 accumulation (at most ~30 FMAs per
// lane at these sizes, ~2e-6 relative) and the reference's own rounding.
std::vector<double> ErrorBounds(const Problem& p) {
  const WeightView& w = p.weight;
  const int64_t cols = w.cols;
  const auto row_bytes = static_cast<size_t>(*quant::RowBytes(w.type, cols));
  std::vector<double> bounds(static_cast<size_t>(p.tokens * w.rows));
  std::vector<float> row(static_cast<size_t>(cols));
  const int64_t block = IsKQuant(w.type) ? 256 : 32;
  const bool with_sum = w.type == StorageType::kQ4_1 || w.type == StorageType::kQ5_1;
  for (int64_t o = 0; o < w.rows; ++o) {
    EXPECT_TRUE(quant::DequantizeRow(w.type, w.bytes.subspan(o * row_bytes, row_bytes), absl::MakeSpan(row)).ok());
    for (int64_t t = 0; t < p.tokens; ++t) {
      const float* x = p.x.data() + t * cols;
      double bound = 0.0;
      for (int64_t i = 0; i < cols; ++i) bound += 1e-5 * std::fabs(static_cast<double>(row[i]) * x[i]);
      for (int64_t start = 0; start < cols; start += block) {
        const int64_t end = std::min(cols, start + block);
        double amax = 0.0;
        for (int64_t i = start; i < end; ++i) amax = std::max(amax, std::fabs(static_cast<double>(x[i])));
        const double d = amax / 127.0;
        for (int64_t i = start; i < end; ++i) {
          double element_error;
          if (w.type == StorageType::kF32) {
            element_error = 0.0;
          } else if (w.type == StorageType::kF16) {
            element_error = std::fabs(x[i]) * std::ldexp(1.0, -11);
          } else if (w.type == StorageType::kBF16) {
            element_error = std::fabs(x[i]) * std::ldexp(1.0, -8);
          } else {
            element_error = (IsKQuant(w.type) ? 0.51 : 0.57) * d;
          }
          bound += std::fabs(row[i]) * element_error;
        }
        if (with_sum) {
          // m, recovered from the weights: the smallest value a block reaches is m (q = 0) or close.
          const auto* block_bytes = w.bytes.data() + o * row_bytes + start / 32 * quant::BytesPerBlock(w.type);
          const float m = quant::HalfToFloat(static_cast<uint16_t>(block_bytes[2] | (block_bytes[3] << 8)));
          bound += std::fabs(m) * std::ldexp(1.0, -11) * 32 * 127 * d;
        }
      }
      bounds[t * w.rows + o] = bound;
    }
  }
  return bounds;
}

// Relative error ||y - y_ref|| / ||y_ref|| allowed for the whole product.
// The weights are the same on both sides, so only the activations' rounding
// differs: 8-bit activations with one scale per 32 elements measure ~1% on
// these inputs (their 20-sigma outliers set amax), so 2e-2; Q8_K's one scale
// per 256 elements lets an outlier coarsen 8x more elements (~3%), so 4e-2;
// f16 ~2e-4 (allowed 1e-3), bf16 ~2e-3 (8e-3), f32 only accumulation order.
double NormTolerance(StorageType type) {
  if (IsKQuant(type)) return 4e-2;
  switch (type) {
    case StorageType::kF32: return 1e-6;
    case StorageType::kF16: return 1e-3;
    case StorageType::kBF16: return 8e-3;
    default: return 2e-2;
  }
}

class MatMulTest : public ::testing::TestWithParam<StorageType> {};

TEST_P(MatMulTest, AgreesWithF32ReferenceWithinActivationQuantizationError) {
  for (int64_t tokens : {1, 7, 33}) {
    const Problem p = MakeProblem(GetParam(), tokens, 1000 + static_cast<uint32_t>(tokens));
    std::vector<float> reference(static_cast<size_t>(tokens * kRows));
    ASSERT_TRUE(MatMulF32Reference(p.weight, p.x.data(), tokens, reference.data()).ok());
    const std::vector<double> bounds = ErrorBounds(p);
    for (CpuIsa isa : SupportedIsas()) {
      SCOPED_TRACE(::testing::Message() << "tokens " << tokens << ", isa " << CpuIsaName(isa));
      const std::vector<float> y = RunMatMul(p, 2, isa);
      ASSERT_TRUE(AllWithin(y, reference, bounds));
      // Both sides are finite by now, so the norm below cannot hide a NaN.
      double error_squares = 0.0, reference_squares = 0.0;
      for (size_t i = 0; i < y.size(); ++i) {
        error_squares += std::pow(static_cast<double>(y[i]) - reference[i], 2);
        reference_squares += std::pow(static_cast<double>(reference[i]), 2);
      }
      EXPECT_LE(std::sqrt(error_squares / reference_squares), NormTolerance(GetParam()));
    }
  }
}

// Token counts on both sides of the GEMM's groups of four, and past its
// passes of 128 tokens.
TEST_P(MatMulTest, EveryIsaEqualsPortableBitForBit) {
  if (SupportedIsas().size() < 2) GTEST_SKIP() << "this CPU or build has no vector kernels to compare";
  for (int64_t tokens : {1, 3, 4, 7, 33, 133}) {
    const Problem p = MakeProblem(GetParam(), tokens, 2000 + static_cast<uint32_t>(tokens));
    const std::vector<float> portable = RunMatMul(p, 1, CpuIsa::kPortable);
    for (CpuIsa isa : SupportedIsas()) {
      EXPECT_TRUE(AllEqual(RunMatMul(p, 1, isa), portable)) << CpuIsaName(isa) << ", tokens " << tokens;
    }
  }
}

TEST_P(MatMulTest, ResultsDoNotDependOnThreadCount) {
  for (CpuIsa isa : SupportedIsas()) {
    const Problem p = MakeProblem(GetParam(), 33, 3000);
    const std::vector<float> one = RunMatMul(p, 1, isa);
    EXPECT_TRUE(AllEqual(RunMatMul(p, 2, isa), one)) << CpuIsaName(isa);
    EXPECT_TRUE(AllEqual(RunMatMul(p, 3, isa), one)) << CpuIsaName(isa);
  }
}

// A token's output must not depend on the other tokens of its step: steps
// of 2 (single rows), 3 and 4 (the GEMM where there is one: a speculative
// verify step's sizes) and 33 tokens.
TEST_P(MatMulTest, ResultsDoNotDependOnBatch) {
  for (CpuIsa isa : SupportedIsas()) {
    for (int64_t tokens : {2, 3, 4, 33}) {
      const Problem batch = MakeProblem(GetParam(), tokens, 4000);
      const std::vector<float> together = RunMatMul(batch, 3, isa);
      for (int64_t t : {int64_t{0}, tokens / 2, tokens - 1}) {
        Problem alone = batch;
        alone.tokens = 1;
        alone.x.assign(batch.x.begin() + t * batch.weight.cols,
                       batch.x.begin() + (t + 1) * batch.weight.cols);
        const std::vector<float> y = RunMatMul(alone, 1, isa);
        EXPECT_TRUE(AllEqual(y, absl::MakeConstSpan(together).subspan(t * kRows, kRows)))
            << CpuIsaName(isa) << ", token " << t << " of " << tokens;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllStorageTypes, MatMulTest, ::testing::ValuesIn(kAllTypes),
                         [](const ::testing::TestParamInfo<StorageType>& info) {
                           return std::string(quant::StorageTypeName(info.param));
                         });

// Every vector ISA's float path against the portable single rows: AVX-512
// VNNI's decode GEMV (one token, four rows at a time) and register-blocked
// GEMM (three tokens or more), AVX2's single rows, on whichever of them this
// CPU has. Columns below one 32-element chunk, whole chunks, chunks with a
// tail, and 1100 columns: the GEMM's runs of 32 chunks, a last run of two;
// 13 rows, so the last row group and its last quad of rows are partial and
// the GEMV's last row goes alone; token counts across the groups of four,
// and 133 tokens: a second pass of token groups, of one group.
TEST(FloatGemm, EqualsPortableBitForBitForEveryColumnCount) {
  const std::vector<CpuIsa> isas = SupportedIsas();
  if (isas.size() < 2) GTEST_SKIP() << "this CPU or build has no vector kernels to compare";
  constexpr int64_t kGemmRows = 13;
  std::vector<int64_t> token_counts;
  for (int64_t tokens = 1; tokens <= 20; ++tokens) token_counts.push_back(tokens);
  token_counts.push_back(133);
  for (StorageType type : {StorageType::kF32, StorageType::kF16, StorageType::kBF16}) {
    for (int64_t cols : {5, 33, 64, 100, 576, 1100}) {
      for (int64_t tokens : token_counts) {
        std::mt19937 rng(static_cast<uint32_t>(100 * cols + tokens));
        Problem p;
        p.bytes = testing::RandomWeights(type, kGemmRows, cols, rng);
        p.weight = WeightView{type, kGemmRows, cols, p.bytes};
        p.tokens = tokens;
        p.x.resize(static_cast<size_t>(tokens * cols));
        std::normal_distribution<float> normal;
        for (float& v : p.x) v = normal(rng);
        const std::vector<float> portable = RunMatMul(p, 1, CpuIsa::kPortable);
        for (CpuIsa isa : isas) {
          if (isa == CpuIsa::kPortable) continue;
          EXPECT_TRUE(AllEqual(RunMatMul(p, 2, isa), portable))
              << CpuIsaName(isa) << ", " << quant::StorageTypeName(type) << ", cols " << cols << ", tokens " << tokens;
        }
      }
    }
  }
}

// The K-quants' single rows (one and two tokens; AVX-512 VNNI has kernels of
// its own there) against the portable ones at the edges of the integer
// ranges: rows whose every packed byte is 0x00, 0xff, 0x80 or 0x7f (codes,
// 6-bit scales and mins all 0 or all at their top; Q6_K's int8 scales -128
// or 127) beside random rows, over 16 super-blocks; activations that
// quantize to +-127 throughout beside Gaussian ones with outliers.
TEST(KQuantSingleRows, EqualPortableBitForBitAtTheIntegerRangesEdges) {
  if (SupportedIsas().size() < 2) GTEST_SKIP() << "this CPU or build has no vector kernels to compare";
  constexpr int64_t kCols = 16 * 256;
  constexpr uint8_t kFills[] = {0x00, 0xff, 0x80, 0x7f};
  constexpr int64_t kEdgeRows = 4, kRandomRows = 3;
  for (StorageType type : {StorageType::kQ4_K, StorageType::kQ5_K, StorageType::kQ6_K}) {
    std::mt19937 rng(7);
    Problem p;
    p.bytes = testing::RandomWeights(type, kEdgeRows + kRandomRows, kCols, rng);
    const int64_t block_bytes = quant::BytesPerBlock(type);
    const int64_t blocks_per_row = kCols / 256;
    for (int64_t r = 0; r < kEdgeRows; ++r) {
      for (int64_t b = 0; b < blocks_per_row; ++b) {
        uint8_t* block = p.bytes.data() + (r * blocks_per_row + b) * block_bytes;
        const uint8_t d_low = block[type == StorageType::kQ6_K ? 208 : 0];
        const uint8_t d_high = block[type == StorageType::kQ6_K ? 209 : 1];
        const uint8_t dmin_low = block[2], dmin_high = block[3];
        std::memset(block, kFills[r], static_cast<size_t>(block_bytes));
        // The f16 factors stay the random ones: only the integers are at their edges.
        if (type == StorageType::kQ6_K) {
          block[208] = d_low;
          block[209] = d_high;
        } else {
          block[0] = d_low;
          block[1] = d_high;
          block[2] = dmin_low;
          block[3] = dmin_high;
        }
      }
    }
    p.weight = WeightView{type, kEdgeRows + kRandomRows, kCols, p.bytes};
    p.tokens = 2;
    p.x.resize(2 * kCols);
    std::normal_distribution<float> normal;
    for (int64_t i = 0; i < kCols; ++i) p.x[i] = i % 3 == 0 ? -4.0f : 4.0f;
    for (int64_t i = kCols; i < 2 * kCols; ++i) p.x[i] = i % 97 == 0 ? 20.0f * normal(rng) : normal(rng);
    for (int64_t tokens : {1, 2}) {
      p.tokens = tokens;
      const std::vector<float> portable = RunMatMul(p, 1, CpuIsa::kPortable);
      for (CpuIsa isa : SupportedIsas()) {
        EXPECT_TRUE(AllEqual(RunMatMul(p, 1, isa), portable))
            << quant::StorageTypeName(type) << ", " << CpuIsaName(isa) << ", tokens " << tokens;
      }
    }
  }
}

// Hand-made Q8_0 case where the whole computation is exact: integer
// activations with amax = 127 quantize to themselves (d = 1, exact in f16),
// and the weights' d is 1 too, so y is the integer dot product. The weights
// reach both ends of int8 (-128 and 127), and the five tokens, each its own
// permutation and sign of the activations, take the GEMM where there is one.
TEST(MatMulExact, Q8_0IntegerProductsAreExact) {
  constexpr int64_t kTokens = 5;
  std::vector<uint8_t> bytes(34);
  testing::StoreU16(bytes.data(), 0x3c00);  // d = 1
  for (int i = 0; i < 32; ++i) bytes[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(3 * i - 50));
  bytes[2 + 7] = static_cast<uint8_t>(static_cast<int8_t>(-128));
  bytes[2 + 8] = static_cast<uint8_t>(static_cast<int8_t>(127));
  std::vector<float> x(32 * kTokens);
  std::vector<float> expected(kTokens, 0.0f);
  for (int64_t t = 0; t < kTokens; ++t) {
    const float sign = t % 2 == 0 ? 1.0f : -1.0f;
    for (int i = 0; i < 32; ++i) x[t * 32 + i] = sign * static_cast<float>((i * 37 + 11 * t) % 255 - 127);
    x[t * 32 + 5 + t] = sign * 127.0f;
    for (int i = 0; i < 32; ++i) {
      expected[t] += static_cast<float>(static_cast<int8_t>(bytes[2 + i])) * x[t * 32 + i];
    }
  }
  ThreadPool pool(1);
  for (CpuIsa isa : SupportedIsas()) {
    std::vector<float> y(kTokens);
    ASSERT_TRUE(MatMul(WeightView{StorageType::kQ8_0, 1, 32, bytes}, x.data(), kTokens, y.data(), pool, isa).ok());
    EXPECT_THAT(y, ::testing::ElementsAreArray(expected)) << CpuIsaName(isa);
  }
}

TEST(MatMulErrors, RejectsMismatchedShapesNamingTheKernelAndSizes) {
  ThreadPool pool(1);
  std::vector<uint8_t> bytes(20 * 3);
  std::vector<float> x(64), y(4);
  absl::Status status = MatMul(WeightView{StorageType::kQ4_1, 2, 64, bytes}, x.data(), 1, y.data(), pool);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("MatMul: weight q4_1 [2 x 64]"));
  EXPECT_THAT(status.message(), HasSubstr("takes 80 bytes (2 rows of 40), but the view has 60"));

  status = MatMul(WeightView{StorageType::kQ4_1, 1, 40, absl::MakeSpan(bytes).subspan(0, 20)}, x.data(), 1,
                  y.data(), pool);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("not a multiple of the block size 32"));

  status = MatMul(WeightView{StorageType::kQ4_1, 3, 32, bytes}, x.data(), -1, y.data(), pool);
  EXPECT_THAT(status.message(), HasSubstr("negative token count -1"));

  status = MatMul(WeightView{StorageType::kQ4_1, 3, 32, bytes}, nullptr, 1, y.data(), pool);
  EXPECT_THAT(status.message(), HasSubstr("null input"));
}

TEST(MatMulErrors, ZeroTokensIsANoOp) {
  ThreadPool pool(2);
  std::vector<uint8_t> bytes(20);
  EXPECT_TRUE(MatMul(WeightView{StorageType::kQ4_1, 1, 32, bytes}, nullptr, 0, nullptr, pool).ok());
}

}  // namespace
}  // namespace kvjit::cpu
