// The vector kernels prepare a step's activations (rounding through f16 or
// bf16, quantizing to Q8_K) with their own instructions; these tests hold
// them to the portable scalar code bit for bit on the values where the two
// could part: rounding ties, subnormals, zero and tiny super-blocks, and
// super-blocks whose largest magnitude occurs twice with opposite signs.

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/MatMul.h"
#include "runtime/quant/Half.h"
#include "tests/unit/runtime/cpu/RandomWeights.h"

namespace kvjit::cpu {
namespace {

using quant::StorageType;

std::vector<CpuIsa> VectorIsas() {
  std::vector<CpuIsa> isas;
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512Vnni}) {
    if (CpuSupports(isa)) isas.push_back(isa);
  }
  return isas;
}

uint32_t Bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float FromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

std::vector<float> MatMulOnce(const WeightView& w, const std::vector<float>& x, int64_t tokens, CpuIsa isa) {
  ThreadPool pool(1);
  std::vector<float> y(static_cast<size_t>(tokens * w.rows));
  EXPECT_TRUE(MatMul(w, x.data(), tokens, y.data(), pool, isa).ok());
  return y;
}

// Values whose f16 / bf16 rounding is delicate: exact ties between two
// neighbours (both parities), values a hair either side of a tie,
// subnormals of both formats, the smallest values that round to zero or not.
std::vector<float> DelicateValues() {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.0e-8f, 3.0e-8f, 2.9e-8f, 1.0e-40f, -1.0e-45f};
  for (uint32_t base : {0x3f800000u, 0x40490fdbu, 0xc1200000u, 0x38800000u, 0x33800000u}) {
    for (uint32_t low : {0x1000u, 0x2000u, 0x3000u, 0x0fffu, 0x1001u, 0x8000u, 0x18000u, 0x7fffu, 0x8001u}) {
      values.push_back(FromBits(base | low));
    }
  }
  return values;
}

// An identity of float weights copies each activation, as the kernel
// rounded it, into the output: y[t, o] = round(x[t, o]) exactly (the other
// products are zeros).
void ExpectIdentityCopiesRoundedActivations(StorageType type, float (*round)(float)) {
  std::vector<float> values = DelicateValues();
  const int64_t n = static_cast<int64_t>(values.size());
  std::vector<uint8_t> bytes(static_cast<size_t>(n * n * 2), 0);
  const uint16_t one = type == StorageType::kF16 ? quant::FloatToHalf(1.0f) : quant::FloatToBFloat16(1.0f);
  for (int64_t i = 0; i < n; ++i) testing::StoreU16(&bytes[static_cast<size_t>(2 * (i * n + i))], one);
  const WeightView w{type, n, n, bytes};
  for (int64_t tokens : {1, 5}) {
    std::vector<float> x;
    for (int64_t t = 0; t < tokens; ++t) {
      // Each token a rotation of the values, so every lane position sees each.
      for (int64_t i = 0; i < n; ++i) x.push_back(values[static_cast<size_t>((i + t) % n)]);
    }
    for (CpuIsa isa : VectorIsas()) {
      const std::vector<float> y = MatMulOnce(w, x, tokens, isa);
      for (size_t i = 0; i < x.size(); ++i) {
        // -0 * 1 + 0 sums to +0; compare values there, bits elsewhere.
        const float expected = round(x[i]) + 0.0f;
        ASSERT_EQ(Bits(y[i]), Bits(expected)) << CpuIsaName(isa) << ", tokens " << tokens << ", x " << x[i];
      }
    }
  }
}

TEST(ActivationPreparation, F16RoundingEqualsScalar) {
  if (VectorIsas().empty()) GTEST_SKIP() << "this CPU or build has no vector kernels to compare";
  ExpectIdentityCopiesRoundedActivations(StorageType::kF16,
                                         [](float v) { return quant::HalfToFloat(quant::FloatToHalf(v)); });
}

TEST(ActivationPreparation, BFloat16RoundingEqualsScalar) {
  if (VectorIsas().empty()) GTEST_SKIP() << "this CPU or build has no vector kernels to compare";
  ExpectIdentityCopiesRoundedActivations(StorageType::kBF16,
                                         [](float v) { return quant::BFloat16ToFloat(quant::FloatToBFloat16(v)); });
}

// Q8_K takes its scale's sign from the first element of largest magnitude.
// Which of +m and -m comes first cannot change a product (the scale and
// every q change sign together), but the search for it runs over the same
// super-blocks as an all-zero one, tiny values and outliers, which can.
TEST(ActivationPreparation, Q8KQuantizationEqualsScalar) {
  if (VectorIsas().empty()) GTEST_SKIP() << "this CPU or build has no vector kernels to compare";
  std::mt19937 rng(91);
  constexpr int64_t kCols = 6 * 256;
  constexpr int64_t kRows = 9;
  for (StorageType type : {StorageType::kQ4_K, StorageType::kQ5_K, StorageType::kQ6_K}) {
    const std::vector<uint8_t> bytes = testing::RandomWeights(type, kRows, kCols, rng);
    const WeightView w{type, kRows, kCols, bytes};
    for (int64_t tokens : {1, 6}) {
      std::vector<float> x(static_cast<size_t>(tokens * kCols));
      std::normal_distribution<float> normal;
      for (float& v : x) v = normal(rng);
      for (int64_t t = 0; t < tokens; ++t) {
        float* row = x.data() + t * kCols;
        std::fill(row, row + 256, 0.0f);                       // super-block 0: zeros
        row[256 + 3] = 9.0f, row[256 + 200] = -9.0f;          // 1: +m first
        row[512 + 17] = -9.0f, row[512 + 18] = 9.0f;          // 2: -m first
        for (int i = 768; i < 1024; ++i) row[i] = 1e-30f * normal(rng);  // 3: tiny
        row[1024 + 255] = -1e6f;                               // 4: an outlier last
        row[1280 + 8 * t] = std::numeric_limits<float>::denorm_min();   // 5: a subnormal among normals
      }
      const std::vector<float> portable = MatMulOnce(w, x, tokens, CpuIsa::kPortable);
      for (CpuIsa isa : VectorIsas()) {
        const std::vector<float> y = MatMulOnce(w, x, tokens, isa);
        for (size_t i = 0; i < y.size(); ++i) {
          ASSERT_EQ(Bits(y[i]), Bits(portable[i]))
              << quant::StorageTypeName(type) << ", " << CpuIsaName(isa) << ", tokens " << tokens << ", output " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvjit::cpu
