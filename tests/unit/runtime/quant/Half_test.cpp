#include "runtime/quant/Half.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"

namespace kvjit::quant {
namespace {

bool IsHalfNan(uint16_t half) { return (half & 0x7c00) == 0x7c00 && (half & 0x3ff) != 0; }

TEST(HalfTest, DecodesLandmarks) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x3555), (1.0f + 0x155 / 1024.0f) * 0.25f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));          // smallest normal
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));          // smallest subnormal
  EXPECT_EQ(HalfToFloat(0x03ff), std::ldexp(1023.0f, -24));       // largest subnormal
  EXPECT_EQ(HalfToFloat(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfToFloat(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0xfc01)));
}

TEST(HalfTest, EncodesLandmarks) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(FloatToHalf(-1e6f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(3.0f, -25)), 0x0002);  // tie between 1 and 2 units: even is 2
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::denorm_min()), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);       // tie: even
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(3.0f, -11)), 0x3c02);       // tie: even
  EXPECT_EQ(FloatToHalf(std::ldexp(2047.0f, -25)), 0x0400);           // rounds up into the normals
  EXPECT_TRUE(IsHalfNan(FloatToHalf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(IsHalfNan(FloatToHalf(FloatFromBits(0x7f800001))));  // payload only in dropped bits
}

// Every finite half survives the round trip; then, for each pair of adjacent
// halves, the midpoint rounds to the even one and anything strictly nearer
// one of them rounds to it.
TEST(HalfTest, RoundsEveryIntervalToNearestEven) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t half = static_cast<uint16_t>(bits);
    if (IsHalfNan(half)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(half)));
      EXPECT_TRUE(IsHalfNan(FloatToHalf(HalfToFloat(half))));
      continue;
    }
    ASSERT_EQ(FloatToHalf(HalfToFloat(half)), half) << std::hex << bits;
  }
  for (uint16_t sign : {uint16_t{0}, uint16_t{0x8000}}) {
    for (uint16_t low = 0; low < 0x7bff; ++low) {
      const uint16_t a = sign | low, b = sign | (low + 1);
      const float fa = HalfToFloat(a), fb = HalfToFloat(b);
      const float mid = (fa + fb) / 2;  // exact: the halves carry 11 significant bits
      const uint16_t even = (a & 1) ? b : a;
      ASSERT_EQ(FloatToHalf(mid), even) << std::hex << a;
      ASSERT_EQ(FloatToHalf(std::nextafter(mid, fa)), a) << std::hex << a;
      ASSERT_EQ(FloatToHalf(std::nextafter(mid, fb)), b) << std::hex << a;
    }
  }
}

TEST(BFloat16Test, DecodesByWidening) {
  EXPECT_EQ(BFloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xc040), -3.0f);
  EXPECT_EQ(BFloat16ToFloat(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(BFloat16ToFloat(0x0001), FloatFromBits(0x00010000));
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7fc0)));
}

TEST(BFloat16Test, EncodesRoundingToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x3f808000)), 0x3f80);  // tie: even
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x3f818000)), 0x3f82);  // tie: even
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x3f807fff)), 0x3f80);
  EXPECT_EQ(FloatToBFloat16(FloatFromBits(0x7f7fffff)), 0x7f80);  // overflows to infinity
  EXPECT_EQ(FloatToBFloat16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
  const uint16_t nan = FloatToBFloat16(FloatFromBits(0x7f800001));  // payload only in dropped bits
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(nan)));
}

}  // namespace
}  // namespace kvjit::quant
