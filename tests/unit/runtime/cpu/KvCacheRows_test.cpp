#include "runtime/cpu/KvCacheRows.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/quant/Half.h"
#include "runtime/schema/KvCacheFormat.h"

namespace kvjit::cpu {
namespace {

using kvx::StorageType;

std::vector<float> RoundTrip(StorageType type, const std::vector<float>& x) {
  std::vector<uint8_t> stored(static_cast<size_t>(KvRowBytes(type, static_cast<int64_t>(x.size()))), 0xCD);
  StoreKvRow(type, x.data(), static_cast<int64_t>(x.size()), stored.data());
  std::vector<float> back(x.size(), std::nanf(""));
  LoadKvRow(type, stored.data(), static_cast<int64_t>(x.size()), back.data());
  return back;
}

std::vector<float> Normal(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

TEST(KvCacheRowsTest, RowBytesFollowTheSchemaTable) {
  EXPECT_EQ(KvRowBytes(StorageType::F32, 64), 256);
  EXPECT_EQ(KvRowBytes(StorageType::F16, 64), 128);
  EXPECT_EQ(KvRowBytes(StorageType::BF16, 64), 128);
  EXPECT_EQ(KvRowBytes(StorageType::Q8_0, 64), 68);
  EXPECT_EQ(KvRowBytes(StorageType::Q4_0, 64), 36);
  EXPECT_EQ(KvRowBytes(StorageType::F8_E4M3, 64), 68);
}

// Each type's error bound on a block's elements, as a share of the block's
// largest magnitude: q8_0 half its step of 1/127; q4_0 a whole step of 1/8,
// as its 16 levels run from -8 to 7 steps and elements of the other sign
// than the largest clamp at 7; each plus the f16 rounding of the scale.
// E4M3 and bf16 are relative to each element (3 and 7 mantissa bits).
TEST(KvCacheRowsTest, BlockedTypesStayWithinHalfAStep) {
  const std::vector<float> x = Normal(256, 1, 3.0f);
  for (auto [type, bound] : {std::pair{StorageType::Q8_0, 0.5 / 127}, std::pair{StorageType::Q4_0, 1.0 / 8}}) {
    const std::vector<float> back = RoundTrip(type, x);
    for (size_t b = 0; b < x.size(); b += 32) {
      double amax = 0;
      for (size_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(double{x[i]}));
      for (size_t i = b; i < b + 32; ++i) {
        EXPECT_LE(std::fabs(back[i] - x[i]), amax * (bound + 2e-3)) << kvx::EnumNameStorageType(type) << " " << i;
      }
    }
  }
  const std::vector<float> e4m3 = RoundTrip(StorageType::F8_E4M3, x);
  const std::vector<float> bf16 = RoundTrip(StorageType::BF16, x);
  for (size_t i = 0; i < x.size(); ++i) {
    double amax = 0;
    for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(double{x[j]}));
    // Normal E4M3 values keep 3 mantissa bits: half a step is 2^-4 of the
    // value; below the block's 2^-6 x 448 / max the steps are absolute.
    EXPECT_LE(std::fabs(e4m3[i] - x[i]), std::fabs(x[i]) / 16 * 1.002 + amax / 448 * std::ldexp(1.0, -10) + 1e-7) << i;
    EXPECT_LE(std::fabs(bf16[i] - x[i]), std::fabs(x[i]) * std::ldexp(1.0, -8)) << i;
  }
}

// ggml's q8_0 for a block of known values: max 31.75 → d = 0.25, and each
// element its nearest multiple of d (ties to even through the multiplier
// 127 / max = 4).
TEST(KvCacheRowsTest, Q8BlockBytesAreGgmls) {
  std::vector<float> x(32, 0.0f);
  x[0] = 31.75f;
  x[1] = -12.5f;
  x[2] = 0.625f;
  x[3] = 0.875f;
  std::vector<uint8_t> stored(34);
  StoreKvRow(StorageType::Q8_0, x.data(), 32, stored.data());
  uint16_t d;
  std::memcpy(&d, stored.data(), 2);
  EXPECT_EQ(quant::HalfToFloat(d), 0.25f);
  const auto* q = reinterpret_cast<const int8_t*>(stored.data() + 2);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], -50);
  EXPECT_EQ(q[2], 2);  // 2.5 rounds to even
  EXPECT_EQ(q[3], 4);  // 3.5 rounds to even
  for (int i = 4; i < 32; ++i) EXPECT_EQ(q[i], 0);
}

// ggml's q4_0: the element of largest magnitude, with its sign, over -8 is
// the scale; that element is nibble 0, zero is nibble 8.
TEST(KvCacheRowsTest, Q4BlockBytesAreGgmls) {
  std::vector<float> x(32, 0.0f);
  x[0] = -4.0f;   // d = -4 / -8 = 0.5: -8 + 8.5 → nibble 0
  x[16] = 3.5f;   // 7 + 8.5 → 15
  x[1] = 0.25f;   // 0.5 + 8.5 = 9 → 9: half a step rounds up
  std::vector<uint8_t> stored(18);
  StoreKvRow(StorageType::Q4_0, x.data(), 32, stored.data());
  uint16_t d;
  std::memcpy(&d, stored.data(), 2);
  EXPECT_EQ(quant::HalfToFloat(d), 0.5f);
  EXPECT_EQ(stored[2], 0xF0);       // element 0 low, element 16 high
  EXPECT_EQ(stored[3], 0x89);       // element 1: 9, element 17: 8
  EXPECT_EQ(stored[4], 0x88);
  const std::vector<float> back = RoundTrip(StorageType::Q4_0, x);
  EXPECT_EQ(back[0], -4.0f);
  EXPECT_EQ(back[16], 3.5f);
  EXPECT_EQ(back[1], 0.5f);  // nibble 9: the nearest step up, half up
}

TEST(KvCacheRowsTest, ZeroBlocksStayZeroWithoutNaN) {
  const std::vector<float> zeros(64, 0.0f);
  for (StorageType type : {StorageType::Q8_0, StorageType::Q4_0, StorageType::F8_E4M3, StorageType::BF16}) {
    for (float v : RoundTrip(type, zeros)) EXPECT_EQ(v, 0.0f) << kvx::EnumNameStorageType(type);
  }
}

// The block's largest element is exact in E4M3 (it becomes 448 = code 0x7E)
// up to the f16 rounding of the scale.
TEST(KvCacheRowsTest, E4m3BlockMaximumSurvives) {
  std::vector<float> x = Normal(32, 5);
  x[7] = 10.0f;
  const std::vector<float> back = RoundTrip(StorageType::F8_E4M3, x);
  EXPECT_NEAR(back[7], 10.0f, 10.0f * 1e-3);
}

// The loads LoadKvRow picks for this CPU give the portable loop's bits, for
// every type, including rows not a multiple of 8 elements long.
TEST(KvCacheRowsTest, LoadsEqualThePortableLoop) {
  for (const kvx::KvCacheFormat& format : kvx::kKvCacheFormats) {
    for (int64_t n : {32, 64, 96, 40}) {
      if (n % format.elements_per_block != 0) continue;
      const std::vector<float> x = Normal(n, 11, 5.0f);
      std::vector<uint8_t> stored(static_cast<size_t>(KvRowBytes(format.type, n)));
      StoreKvRow(format.type, x.data(), n, stored.data());
      std::vector<float> fast(static_cast<size_t>(n)), portable(static_cast<size_t>(n));
      LoadKvRow(format.type, stored.data(), n, fast.data());
      PortableLoadKvRow(format.type, stored.data(), n, portable.data());
      EXPECT_EQ(std::memcmp(fast.data(), portable.data(), fast.size() * sizeof(float)), 0) << format.name << " " << n;
    }
  }
}

// The Walsh-Hadamard rotation is orthonormal and its own inverse: a unit
// vector becomes the block's first row, 1/sqrt(block) everywhere; twice is
// the identity; norms stay.
TEST(RotateHadamardTest, IsOrthonormalAndItsOwnInverse) {
  std::vector<float> unit(64, 0.0f);
  unit[0] = 1.0f;
  RotateHadamard(unit.data(), 64, 64);
  for (float v : unit) EXPECT_FLOAT_EQ(v, 0.125f);
  std::vector<float> x = Normal(128, 21);
  std::vector<float> twice = x;
  RotateHadamard(twice.data(), 128, 32);
  double norm = 0, rotated_norm = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    norm += double{x[i]} * x[i];
    rotated_norm += double{twice[i]} * twice[i];
  }
  EXPECT_NEAR(rotated_norm, norm, norm * 1e-6);
  RotateHadamard(twice.data(), 128, 32);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(twice[i], x[i], 1e-5f) << i;
  // Block by block: the second block of 32 does not see the first.
  std::vector<float> second(64, 0.0f);
  second[32] = 1.0f;
  RotateHadamard(second.data(), 64, 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(second[i], 0.0f);
}

TEST(E4m3Test, EveryFiniteCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) {
      EXPECT_TRUE(std::isnan(E4m3ToFloat(static_cast<uint8_t>(code))));
      continue;
    }
    EXPECT_EQ(FloatToE4m3(E4m3ToFloat(static_cast<uint8_t>(code))), code) << code;
  }
}

TEST(E4m3Test, KnownValuesAndBounds) {
  EXPECT_EQ(E4m3ToFloat(0x7E), 448.0f);      // the largest finite value
  EXPECT_EQ(E4m3ToFloat(0x08), 0.015625f);   // the smallest normal, 2^-6
  EXPECT_EQ(E4m3ToFloat(0x01), 0.001953125f);  // the smallest subnormal, 2^-9
  EXPECT_EQ(FloatToE4m3(448.0f), 0x7E);
  EXPECT_EQ(FloatToE4m3(449.0f), 0x7E);  // past the bound: saturates
  EXPECT_EQ(FloatToE4m3(-1e6f), 0xFE);
  EXPECT_EQ(FloatToE4m3(std::ldexp(1.0f, -10)), 0x00);  // halfway to 2^-9: to even, 0
  EXPECT_EQ(FloatToE4m3(std::ldexp(3.0f, -10)), 0x02);  // halfway 1 → 2: to even
  EXPECT_EQ(FloatToE4m3(1.0625f), 0x38);  // halfway between 1 and 1.125: to even, 1
  EXPECT_EQ(FloatToE4m3(1.1875f), 0x3A);  // halfway between 1.125 and 1.25: to even, 1.25
  EXPECT_EQ(FloatToE4m3(0.0155f), 0x08);  // rounds up into the normals
}

}  // namespace
}  // namespace kvjit::cpu
