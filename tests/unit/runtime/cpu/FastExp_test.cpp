#include "runtime/cpu/FastExp.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/quant/Half.h"

namespace kvjit::cpu {
namespace {

struct KnownExp {
  float x;
  uint32_t bits;
};

// Computed from the optimized-routines algorithm with exactly rounded f32
// operations (Python fractions), independently of this implementation. exp(1)
// and exp(10) are where glibc's expf differs (0x402df854, 0x46ac14ee); the
// last five take the split path for 2^n beyond the normal range.
constexpr KnownExp kKnownExps[] = {
    {0.0f, 0x3f800000},   {1.0f, 0x402df855},   {-1.0f, 0x3ebc5ab2},  {0.5f, 0x3fd3094c},
    {-3.25f, 0x3d1ed1b4}, {10.0f, 0x46ac14f0},  {-10.0f, 0x383e6bce}, {-87.5f, 0x006cb2bb},
    {88.5f, 0x7f4cdcc3},  {-100.0f, 0x0000001b}, {100.0f, 0x7f800000}, {-200.0f, 0x00000000},
};

TEST(FastExpTest, ReturnsTheAlgorithmsBits) {
  for (const KnownExp& known : kKnownExps) {
    EXPECT_EQ(quant::FloatBits(FastExp(known.x)), known.bits) << "exp(" << known.x << ")";
  }
}

TEST(FastExpTest, HandlesInfinitiesAndNan) {
  EXPECT_EQ(FastExp(INFINITY), INFINITY);
  EXPECT_EQ(FastExp(-INFINITY), 0.0f);
  EXPECT_TRUE(std::isnan(FastExp(NAN)));
}

// Within 2 ulp (an ulp is at most 2^-23 of the value) where exp is a normal float.
TEST(FastExpTest, IsAccurateOverTheNormalRange) {
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    ASSERT_LE(std::fabs(FastExp(x) - want), 0x1p-22 * want) << "exp(" << x << ")";
  }
}

// Lengths off a multiple of 8 and inputs on every path: the vectorized row
// gives each element FastExp's bits, and so does the portable one.
TEST(FastExpTest, RowsMatchTheScalarBitForBit) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-210.0f, 210.0f);
  std::vector<float> x(1003);
  for (float& v : x) v = wide(rng);
  for (size_t i = 0; i < std::size(kKnownExps); ++i) x[3 * i] = kKnownExps[i].x;
  x[100] = NAN;
  x[101] = INFINITY;
  x[102] = -INFINITY;
  for (int64_t n : {0, 1, 7, 8, 9, 1003}) {
    std::vector<float> row(x.size(), -1.0f), portable(x.size(), -1.0f);
    FastExpRow(x.data(), row.data(), n);
    internal::PortableFastExpRow(x.data(), portable.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      if (std::isnan(x[i])) {  // a NaN's sign and payload are the hardware's business
        ASSERT_TRUE(std::isnan(row[i]) && std::isnan(portable[i]));
        continue;
      }
      const uint32_t want = quant::FloatBits(FastExp(x[i]));
      ASSERT_EQ(quant::FloatBits(row[i]), want) << "n " << n << ", exp(" << x[i] << ")";
      ASSERT_EQ(quant::FloatBits(portable[i]), want) << "n " << n << ", exp(" << x[i] << ")";
    }
    for (size_t i = n; i < x.size(); ++i) ASSERT_EQ(row[i], -1.0f) << "wrote past " << n;
  }
}

TEST(FastExpTest, RowWorksInPlace) {
  std::vector<float> x = {0.25f, -2.0f, 3.0f, -0.5f, 7.0f, -9.0f, 1.0f, 2.0f, -4.0f};
  std::vector<float> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = FastExp(x[i]);
  FastExpRow(x.data(), x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(x, want);
}

}  // namespace
}  // namespace kvjit::cpu
