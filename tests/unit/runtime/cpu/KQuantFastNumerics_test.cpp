// CpuNumerics::kFast's K-quant kernels (the GEMM of three tokens or more,
// the single rows of one and two) against a scalar model of their stated
// arithmetic (docs/numerics.md, "The fast CPU numerics"), written here from
// ggml's block layouts: each sub-block's products summed as an integer and
// scaled, the scaled sums added as one integer per super-block, one fma per
// super-block, the batch-invariant kernels' mins, and acc + offset.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
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
#include "tests/unit/runtime/cpu/RandomWeights.h"

namespace kvjit::cpu {
namespace {

using ::kvjit::testing::AllEqual;
using quant::StorageType;

constexpr int64_t kSuperBlock = 256;

// ggml's Q8_K quantization of one super-block (quantize_row_q8_K_ref).
struct Q8K {
  float scale = 0.0f;
  int32_t q[kSuperBlock] = {};
  int32_t sums32[8] = {};
};

Q8K QuantizeQ8K(const float* x) {
  Q8K out;
  float amax = 0.0f, extreme = 0.0f;
  for (int i = 0; i < kSuperBlock; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      extreme = x[i];
    }
  }
  if (amax == 0.0f) return out;
  const float inverse_scale = -127.0f / extreme;
  for (int i = 0; i < kSuperBlock; ++i) {
    out.q[i] = std::min(127, static_cast<int32_t>(std::nearbyint(inverse_scale * x[i])));
    out.sums32[i / 32] += out.q[i];
  }
  out.scale = 1.0f / inverse_scale;
  return out;
}

// One super-block's integers as ggml's dequantize_row_* reads them.
struct SuperBlockIntegers {
  int32_t q[kSuperBlock];  // Q4_K / Q5_K: 0..31; Q6_K: -32..31
  int32_t scales[16];      // per 32 elements (Q4_K / Q5_K, 8 of them) or 16 (Q6_K)
  int32_t mins[8] = {};
  float d = 0.0f;
  float dmin = 0.0f;
};

float HalfAt(const uint8_t* p) { return quant::HalfToFloat(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

SuperBlockIntegers Decode(StorageType type, const uint8_t* block) {
  SuperBlockIntegers out;
  if (type == StorageType::kQ6_K) {
    const uint8_t* ql = block;
    const uint8_t* qh = block + 128;
    for (int half = 0; half < 2; ++half) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t* low = ql + 64 * half;
        const uint8_t top = qh[32 * half + l];
        int32_t* q = out.q + 128 * half;
        q[l] = ((low[l] & 0xf) | ((top & 3) << 4)) - 32;
        q[l + 32] = ((low[l + 32] & 0xf) | (((top >> 2) & 3) << 4)) - 32;
        q[l + 64] = ((low[l] >> 4) | (((top >> 4) & 3) << 4)) - 32;
        q[l + 96] = ((low[l + 32] >> 4) | (((top >> 6) & 3) << 4)) - 32;
      }
    }
    for (int s = 0; s < 16; ++s) out.scales[s] = static_cast<int8_t>(block[192 + s]);
    out.d = HalfAt(block + 208);
    return out;
  }
  const bool fifth_bits = type == StorageType::kQ5_K;
  out.d = HalfAt(block);
  out.dmin = HalfAt(block + 2);
  const uint8_t* packed = block + 4;
  for (int j = 0; j < 4; ++j) {
    out.scales[j] = packed[j] & 63;
    out.mins[j] = packed[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    out.scales[j] = (packed[j + 4] & 0xf) | ((packed[j - 4] >> 6) << 4);
    out.mins[j] = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + (fifth_bits ? 48 : 16);
  for (int g = 0; g < 4; ++g) {
    for (int j = 0; j < 32; ++j) {
      out.q[64 * g + j] = qs[32 * g + j] & 0xf;
      out.q[64 * g + 32 + j] = qs[32 * g + j] >> 4;
      if (fifth_bits) {
        out.q[64 * g + j] += ((qh[j] >> (2 * g)) & 1) << 4;
        out.q[64 * g + 32 + j] += ((qh[j] >> (2 * g + 1)) & 1) << 4;
      }
    }
  }
  return out;
}

// The fast numerics' y for one weight row and one token, and the sum of its
// float terms' magnitudes (the scale of its rounding).
struct FastResult {
  float value;
  double magnitude;
};
FastResult FastDot(StorageType type, const uint8_t* row, const float* x, int64_t cols) {
  double magnitude = 0.0;
  const int64_t block_bytes = quant::BytesPerBlock(type);
  float acc = 0.0f;
  float offset = 0.0f;
  for (int64_t b = 0; b < cols / kSuperBlock; ++b) {
    const SuperBlockIntegers w = Decode(type, row + b * block_bytes);
    const Q8K a = QuantizeQ8K(x + b * kSuperBlock);
    const int sub_blocks = type == StorageType::kQ6_K ? 16 : 8;
    const int sub_block_size = kSuperBlock / sub_blocks;
    int64_t total = 0;
    for (int s = 0; s < sub_blocks; ++s) {
      int64_t sum = 0;
      for (int i = sub_block_size * s; i < sub_block_size * (s + 1); ++i) sum += w.q[i] * a.q[i];
      total += w.scales[s] * sum;
    }
    // The kernels' int32 lanes hold the total exactly.
    EXPECT_LE(std::abs(total), int64_t{INT32_MAX});
    acc = std::fma(w.d * a.scale, static_cast<float>(total), acc);
    magnitude += std::fabs(static_cast<double>(w.d) * a.scale * static_cast<double>(total));
    if (type != StorageType::kQ6_K) {
      int64_t min_sum = 0;
      for (int s = 0; s < 8; ++s) min_sum += w.mins[s] * a.sums32[s];
      offset = std::fma(-(w.dmin * a.scale), static_cast<float>(min_sum), offset);
      magnitude += std::fabs(static_cast<double>(w.dmin) * a.scale * static_cast<double>(min_sum));
    }
  }
  return {type == StorageType::kQ6_K ? acc : acc + offset, magnitude};
}

bool HasFastGemm() { return CpuSupports(CpuIsa::kAvx512Vnni); }

struct Case {
  std::vector<uint8_t> bytes;
  WeightView weight;
  std::vector<float> x;
};

// Rows past a tile's four (37), six super-blocks (a partial run of four),
// rows whose packed bytes are all 0x00, 0xff, 0x80 or 0x7f (the integer
// ranges' edges, with the random f16 factors) beside random ones, and
// testing::EdgeActivations (quantized to +-127 throughout, Gaussian with
// outliers, and zero).
Case MakeCase(StorageType type, int64_t tokens, uint32_t seed) {
  constexpr int64_t kRows = 37, kCols = 6 * kSuperBlock;
  constexpr uint8_t kFills[] = {0x00, 0xff, 0x80, 0x7f};
  std::mt19937 rng(seed);
  Case c;
  c.bytes = testing::RandomWeights(type, kRows, kCols, rng);
  const int64_t block_bytes = quant::BytesPerBlock(type);
  const int64_t blocks_per_row = kCols / kSuperBlock;
  const int factor_at = type == StorageType::kQ6_K ? 208 : 0;
  const int factor_bytes = type == StorageType::kQ6_K ? 2 : 4;
  for (int64_t r = 0; r < 4; ++r) {
    for (int64_t b = 0; b < blocks_per_row; ++b) {
      uint8_t* block = c.bytes.data() + (r * blocks_per_row + b) * block_bytes;
      uint8_t factors[4];
      std::memcpy(factors, block + factor_at, factor_bytes);
      std::memset(block, kFills[r], static_cast<size_t>(block_bytes));
      std::memcpy(block + factor_at, factors, factor_bytes);
    }
  }
  c.weight = WeightView{type, kRows, kCols, c.bytes};
  c.x = testing::EdgeActivations(tokens, kCols, rng);
  return c;
}

std::vector<float> RunMatMul(const Case& c, int64_t tokens, int threads, CpuNumerics numerics) {
  return testing::MultiplyOnPool(c.weight, c.x, tokens, threads, CpuIsa::kAvx512Vnni, numerics);
}

class KQuantFastNumericsTest : public ::testing::TestWithParam<StorageType> {};

TEST_P(KQuantFastNumericsTest, EqualsTheStatedArithmeticBitForBit) {
  if (!HasFastGemm()) GTEST_SKIP() << "this CPU or build has no AVX-512 VNNI GEMM";
  const StorageType type = GetParam();
  for (int64_t tokens : {1, 2, 3, 4, 7, 33, 133}) {
    const Case c = MakeCase(type, tokens, 11);
    std::vector<float> expected(static_cast<size_t>(tokens * c.weight.rows));
    const int64_t row_bytes = static_cast<int64_t>(c.bytes.size()) / c.weight.rows;
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t o = 0; o < c.weight.rows; ++o) {
        expected[t * c.weight.rows + o] =
            FastDot(type, c.bytes.data() + o * row_bytes, c.x.data() + t * c.weight.cols, c.weight.cols).value;
      }
    }
    for (int threads : {1, 2, 3}) {
      EXPECT_TRUE(AllEqual(RunMatMul(c, tokens, threads, CpuNumerics::kFast), expected))
          << quant::StorageTypeName(type) << ", " << tokens << " tokens, " << threads << " threads";
    }
  }
}

// The same integers, grouped otherwise: within float rounding of the
// batch-invariant results, and not equal to them (the test would pass on the
// batch-invariant kernel itself). Both round their running sums, whose size
// is that of the terms, not of the result they cancel to: the bound is a few
// float epsilons of the terms' magnitudes (six super-blocks and the offset
// take at most eight roundings each).
TEST_P(KQuantFastNumericsTest, DiffersFromBatchInvariantOnlyByFloatRounding) {
  if (!HasFastGemm()) GTEST_SKIP() << "this CPU or build has no AVX-512 VNNI GEMM";
  const StorageType type = GetParam();
  constexpr int64_t kTokens = 33;
  const Case c = MakeCase(type, kTokens, 12);
  const std::vector<float> fast = RunMatMul(c, kTokens, 2, CpuNumerics::kFast);
  const std::vector<float> invariant = RunMatMul(c, kTokens, 2, CpuNumerics::kBatchInvariant);
  const int64_t row_bytes = static_cast<int64_t>(c.bytes.size()) / c.weight.rows;
  int64_t differing = 0;
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t o = 0; o < c.weight.rows; ++o) {
      const size_t i = static_cast<size_t>(t * c.weight.rows + o);
      ASSERT_FALSE(std::isnan(fast[i])) << i;
      const double magnitude =
          FastDot(type, c.bytes.data() + o * row_bytes, c.x.data() + t * c.weight.cols, c.weight.cols).magnitude;
      const double bound = 16.0 * std::numeric_limits<float>::epsilon() * std::max(1.0, magnitude);
      EXPECT_NEAR(fast[i], invariant[i], bound) << quant::StorageTypeName(type) << ", output " << i;
      differing += fast[i] != invariant[i];
    }
  }
  EXPECT_GT(differing, 0) << "the fast GEMM gave the batch-invariant bits everywhere: is it the one that ran?";
}

// A token's results do not depend on the step around it: each token of a
// 33-token step (the GEMM) equals the same token alone (the single rows).
TEST_P(KQuantFastNumericsTest, ResultsDoNotDependOnBatch) {
  if (!HasFastGemm()) GTEST_SKIP() << "this CPU or build has no AVX-512 VNNI GEMM";
  const StorageType type = GetParam();
  constexpr int64_t kTokens = 33;
  Case c = MakeCase(type, kTokens, 13);
  const std::vector<float> batch = RunMatMul(c, kTokens, 2, CpuNumerics::kFast);
  const std::vector<float> all_x = c.x;
  const int64_t rows = c.weight.rows, cols = c.weight.cols;
  for (int64_t t = 0; t < kTokens; ++t) {
    c.x.assign(all_x.begin() + t * cols, all_x.begin() + (t + 1) * cols);
    const std::vector<float> alone = RunMatMul(c, 1, 2, CpuNumerics::kFast);
    EXPECT_TRUE(AllEqual(alone, std::vector<float>(batch.begin() + t * rows, batch.begin() + (t + 1) * rows)))
        << quant::StorageTypeName(type) << ", token " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(KQuants, KQuantFastNumericsTest,
                         ::testing::Values(StorageType::kQ4_K, StorageType::kQ5_K, StorageType::kQ6_K),
                         [](const ::testing::TestParamInfo<StorageType>& info) {
                           return std::string(quant::StorageTypeName(info.param));
                         });

}  // namespace
}  // namespace kvjit::cpu
