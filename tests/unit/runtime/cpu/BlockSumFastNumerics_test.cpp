// CpuNumerics::kFast's kernels for the 32-element block types (Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1: the GEMM of three tokens or more, the single rows of one
// and two, in GGUF's rows and interleaved by 8) against a scalar model of
// their stated arithmetic (docs/numerics.md, "The fast CPU numerics"),
// written here from ggml's block layouts: each block's products summed as an
// integer, acc[b % 8] = fma(d_w * d_x, float(sum), acc[b % 8]) block by
// block, the offset formats' acc[b % 8] = fma(m, s, acc[b % 8]) after it, and
// LaneSum(acc).
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
#include "runtime/schema/WeightLayout.h"
#include "tests/unit/common/NumericCompare.h"
#include "tests/unit/runtime/cpu/MultiplyOnPool.h"
#include "tests/unit/runtime/cpu/RandomWeights.h"

namespace kvjit::cpu {
namespace {

using ::kvjit::testing::AllEqual;
using quant::StorageType;

float RoundThroughHalf(float v) { return quant::HalfToFloat(quant::FloatToHalf(v)); }

// ggml's x86 Q8_0 quantization of one block (quantize_row_q8_0 and, for the
// offset formats, q8_1's s = d * sum(q)).
struct Q8Block {
  float scale = 0.0f;
  float scaled_sum = 0.0f;
  int32_t q[32] = {};
};

Q8Block QuantizeQ8(const float* x) {
  Q8Block out;
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float inverse = amax != 0.0f ? 127.0f / amax : 0.0f;
  int32_t sum = 0;
  for (int i = 0; i < 32; ++i) {
    out.q[i] = static_cast<int32_t>(std::nearbyint(x[i] * inverse));
    sum += out.q[i];
  }
  out.scale = RoundThroughHalf(d);
  out.scaled_sum = RoundThroughHalf(d * static_cast<float>(sum));
  return out;
}

float HalfAt(const uint8_t* p) { return quant::HalfToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// One block's values as ggml's dequantize_row_* reads them (before d, m).
struct BlockIntegers {
  int32_t w[32];
  float d = 0.0f;
  float m = 0.0f;
  bool has_offset = false;
};

BlockIntegers Decode(StorageType type, const uint8_t* block) {
  BlockIntegers out;
  out.d = HalfAt(block);
  if (type == StorageType::kQ8_0) {
    for (int i = 0; i < 32; ++i) out.w[i] = static_cast<int8_t>(block[2 + i]);
    return out;
  }
  out.has_offset = type == StorageType::kQ4_1 || type == StorageType::kQ5_1;
  if (out.has_offset) out.m = HalfAt(block + 2);
  const bool five_bits = type == StorageType::kQ5_0 || type == StorageType::kQ5_1;
  const int header = (out.has_offset ? 4 : 2) + (five_bits ? 4 : 0);
  uint32_t fifth = 0;
  if (five_bits) std::memcpy(&fifth, block + header - 4, sizeof fifth);
  const uint8_t* qs = block + header;
  const int32_t bias = out.has_offset ? 0 : (five_bits ? 16 : 8);
  for (int i = 0; i < 32; ++i) {
    const int32_t nibble = i < 16 ? (qs[i] & 0x0f) : (qs[i - 16] >> 4);
    out.w[i] = (nibble | static_cast<int32_t>(((fifth >> i) & 1u) << 4)) - bias;
  }
  return out;
}

struct FastResult {
  float value;
  double magnitude;  // the sum of the terms' magnitudes
};
FastResult FastDot(StorageType type, const uint8_t* row, int64_t block_stride, const float* x, int64_t cols) {
  float acc[8] = {};
  double magnitude = 0.0;
  for (int64_t b = 0; b < cols / 32; ++b) {
    const BlockIntegers w = Decode(type, row + b * block_stride);
    const Q8Block a = QuantizeQ8(x + 32 * b);
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += w.w[i] * a.q[i];
    const float d = w.d * a.scale;
    acc[b % 8] = std::fma(d, static_cast<float>(sum), acc[b % 8]);
    magnitude += std::fabs(static_cast<double>(d) * sum);
    if (w.has_offset) {
      acc[b % 8] = std::fma(w.m, a.scaled_sum, acc[b % 8]);
      magnitude += std::fabs(static_cast<double>(w.m) * a.scaled_sum);
    }
  }
  return {((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7])), magnitude};
}

bool HasFastKernels() { return CpuSupports(CpuIsa::kAvx512Vnni); }

constexpr StorageType kBlockTypes[] = {StorageType::kQ8_0, StorageType::kQ4_0, StorageType::kQ4_1,
                                       StorageType::kQ5_0, StorageType::kQ5_1};

struct Case {
  std::vector<uint8_t> gguf;
  std::vector<uint8_t> bytes;  // in the case's layout
  WeightView weight;
  std::vector<float> x;
  int64_t rows_interleaved;
};

// By default 69 blocks (nine octets: a run of eight and a short one, the
// last octet five blocks; kShortTail's 66 leave two, which the single rows
// add by half their tree), rows past a tile's four (37 in GGUF's rows; five
// groups of 8 interleaved), rows whose bytes but d (and m) are all 0x00,
// 0xff, 0x80 or 0x7f (the integer ranges' edges) beside random ones, and
// testing::EdgeActivations.
constexpr int64_t kLongTail = 69;
constexpr int64_t kShortTail = 66;
Case MakeCase(StorageType type, int64_t tokens, int64_t rows_interleaved, uint32_t seed, int64_t blocks = kLongTail) {
  const int64_t rows = rows_interleaved == 1 ? 37 : 40;
  const int64_t cols = blocks * 32;
  constexpr uint8_t kFills[] = {0x00, 0xff, 0x80, 0x7f};
  std::mt19937 rng(seed);
  Case c;
  c.rows_interleaved = rows_interleaved;
  c.gguf = testing::RandomWeights(type, rows, cols, rng);
  const int64_t block_bytes = quant::BytesPerBlock(type);
  const int factor_bytes = type == StorageType::kQ4_1 || type == StorageType::kQ5_1 ? 4 : 2;
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* block = c.gguf.data() + (r * (blocks) + b) * block_bytes;
      std::memset(block + factor_bytes, kFills[r], static_cast<size_t>(block_bytes - factor_bytes));
    }
  }
  c.bytes = rows_interleaved == 1
                ? c.gguf
                : kvx::InterleaveRows(c.gguf.data(), rows, blocks, static_cast<uint64_t>(block_bytes));
  c.weight = WeightView{type, rows, cols, c.bytes, rows_interleaved};
  c.x = testing::EdgeActivations(tokens, cols, rng);
  return c;
}

FastResult ModelOf(const Case& c, int64_t t, int64_t o) {
  const int64_t row_bytes = static_cast<int64_t>(c.gguf.size()) / c.weight.rows;
  return FastDot(c.weight.type, c.gguf.data() + o * row_bytes, quant::BytesPerBlock(c.weight.type),
                 c.x.data() + t * c.weight.cols, c.weight.cols);
}

std::vector<float> RunMatMul(const Case& c, int64_t tokens, int threads, CpuNumerics numerics,
                             CpuIsa isa = CpuIsa::kAvx512Vnni) {
  return testing::MultiplyOnPool(c.weight, c.x, tokens, threads, isa, numerics);
}

struct Param {
  StorageType type;
  int64_t rows_interleaved;
};

class BlockSumFastNumericsTest : public ::testing::TestWithParam<Param> {};

TEST_P(BlockSumFastNumericsTest, EqualsTheStatedArithmeticBitForBit) {
  if (!HasFastKernels()) GTEST_SKIP() << "this CPU or build has no AVX-512 VNNI kernels";
  const auto [type, rows_interleaved] = GetParam();
  for (int64_t blocks : {kLongTail, kShortTail}) {
    for (int64_t tokens : {1, 2, 3, 4, 7, 33, 133}) {
      const Case c = MakeCase(type, tokens, rows_interleaved, 21, blocks);
      std::vector<float> expected(static_cast<size_t>(tokens * c.weight.rows));
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t o = 0; o < c.weight.rows; ++o) expected[t * c.weight.rows + o] = ModelOf(c, t, o).value;
      }
      for (int threads : {1, 2, 3}) {
        EXPECT_TRUE(AllEqual(RunMatMul(c, tokens, threads, CpuNumerics::kFast), expected))
            << quant::StorageTypeName(type) << ", " << blocks << " blocks, " << tokens << " tokens, " << threads
            << " threads";
      }
    }
  }
}

// The same integers, rounded otherwise: within float rounding of the
// batch-invariant results, and not equal to them (the test would pass on the
// batch-invariant kernels themselves). Both round running sums as large as
// their terms, so the bound is in float epsilons of the terms' magnitudes:
// 16 of them, as KQuantFastNumerics_test.cpp's.
TEST_P(BlockSumFastNumericsTest, DiffersFromBatchInvariantOnlyByFloatRounding) {
  if (!HasFastKernels()) GTEST_SKIP() << "this CPU or build has no AVX-512 VNNI kernels";
  const auto [type, rows_interleaved] = GetParam();
  constexpr int64_t kTokens = 33;
  const Case c = MakeCase(type, kTokens, rows_interleaved, 22);
  const std::vector<float> fast = RunMatMul(c, kTokens, 2, CpuNumerics::kFast);
  const std::vector<float> invariant = RunMatMul(c, kTokens, 2, CpuNumerics::kBatchInvariant);
  int64_t differing = 0;
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t o = 0; o < c.weight.rows; ++o) {
      const size_t i = static_cast<size_t>(t * c.weight.rows + o);
      ASSERT_FALSE(std::isnan(fast[i])) << i;
      const double bound = 16.0 * std::numeric_limits<float>::epsilon() * std::max(1.0, ModelOf(c, t, o).magnitude);
      EXPECT_NEAR(fast[i], invariant[i], bound) << quant::StorageTypeName(type) << ", output " << i;
      differing += fast[i] != invariant[i];
    }
  }
  EXPECT_GT(differing, 0) << "the fast kernels gave the batch-invariant bits everywhere: did they run?";
}

// A token's results do not depend on the step around it: each token of a
// 33-token step (the GEMM) equals the same token alone (the decode GEMV) and
// in a step of two (the single rows).
TEST_P(BlockSumFastNumericsTest, ResultsDoNotDependOnBatch) {
  if (!HasFastKernels()) GTEST_SKIP() << "this CPU or build has no AVX-512 VNNI kernels";
  const auto [type, rows_interleaved] = GetParam();
  constexpr int64_t kTokens = 33;
  Case c = MakeCase(type, kTokens, rows_interleaved, 23);
  const std::vector<float> batch = RunMatMul(c, kTokens, 2, CpuNumerics::kFast);
  const std::vector<float> all_x = c.x;
  const int64_t rows = c.weight.rows, cols = c.weight.cols;
  for (int64_t t = 0; t + 1 < kTokens; t += 2) {
    c.x.assign(all_x.begin() + t * cols, all_x.begin() + (t + 2) * cols);
    const std::vector<float> two = RunMatMul(c, 2, 2, CpuNumerics::kFast);
    const std::vector<float> alone = RunMatMul(c, 1, 2, CpuNumerics::kFast);
    EXPECT_TRUE(AllEqual(two, std::vector<float>(batch.begin() + t * rows, batch.begin() + (t + 2) * rows)))
        << quant::StorageTypeName(type) << ", tokens " << t << ", " << t + 1;
    EXPECT_TRUE(AllEqual(alone, std::vector<float>(batch.begin() + t * rows, batch.begin() + (t + 1) * rows)))
        << quant::StorageTypeName(type) << ", token " << t;
  }
}

// Only AVX-512 VNNI has the fast kernels: under AVX2 the fast numerics are
// the batch-invariant bits.
TEST_P(BlockSumFastNumericsTest, Avx2KeepsTheBatchInvariantBits) {
  if (!CpuSupports(CpuIsa::kAvx2)) GTEST_SKIP() << "this CPU or build has no AVX2 kernels";
  const auto [type, rows_interleaved] = GetParam();
  constexpr int64_t kTokens = 7;
  const Case c = MakeCase(type, kTokens, rows_interleaved, 24);
  EXPECT_TRUE(AllEqual(RunMatMul(c, kTokens, 2, CpuNumerics::kFast, CpuIsa::kAvx2),
                       RunMatMul(c, kTokens, 2, CpuNumerics::kBatchInvariant, CpuIsa::kAvx2)));
}

std::vector<Param> AllParams() {
  std::vector<Param> params;
  for (const StorageType type : kBlockTypes) {
    for (const int64_t rows_interleaved : {1, 8}) params.push_back({type, rows_interleaved});
  }
  return params;
}

INSTANTIATE_TEST_SUITE_P(BlockTypes, BlockSumFastNumericsTest, ::testing::ValuesIn(AllParams()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return std::string(quant::StorageTypeName(info.param.type)) +
                                  (info.param.rows_interleaved == 1 ? "_GgufRows" : "_Interleaved8");
                         });

}  // namespace
}  // namespace kvjit::cpu
