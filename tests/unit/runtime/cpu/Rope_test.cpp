#include "runtime/cpu/Rope.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/common/NumericCompare.h"

namespace kvjit::cpu {
namespace {

using ::kvjit::testing::AllEqual;
using ::kvjit::testing::AllWithin;
using ::testing::HasSubstr;

struct RopeCase {
  RopeStyle style;
  int64_t head_dim;
  int64_t rotary_dim;
  RopeScaling scaling;
  std::vector<float> freq_factors = {};
};

// Llama 3.1's published frequency rule, written from its description.
double NaiveDivisor(const RopeParams& params, int64_t pair) {
  if (!params.freq_factors.empty()) return params.freq_factors[pair];
  const RopeScaling& s = params.scaling;
  if (s.kind != RopeScaling::Kind::kLlama3) return 1.0;
  const double frequency = std::pow(static_cast<double>(params.theta), -2.0 * pair / params.rotary_dim);
  const double wavelength = 2.0 * M_PI / frequency;
  const double original = static_cast<double>(s.original_max_positions);
  if (wavelength < original / s.high_freq_factor) return 1.0;
  if (wavelength > original / s.low_freq_factor) return s.factor;
  const double smooth = (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return 1.0 / ((1.0 - smooth) / s.factor + smooth);
}

double NaiveAngle(const RopeParams& params, int32_t position, int64_t pair) {
  const double linear = params.scaling.kind == RopeScaling::Kind::kLinear ? params.scaling.factor : 1.0;
  return position * std::pow(static_cast<double>(params.theta), -2.0 * pair / params.rotary_dim) /
         NaiveDivisor(params, pair) / linear;
}

// The kernel computes angles like llama.cpp, as a running f32 product (see
// Rope.h): pair i's angle is off by up to ~(2i + 4) * 2^-24 relative, plus
// ~2^-23 from cosf/sinf and the rotation. The test allows twice that:
// |error| <= (|x0| + |x1|) * (|angle| * (2i + 6) * 2^-23 + 2^-21).
void CheckRope(const RopeCase& c, const std::vector<int32_t>& positions) {
  const int64_t tokens = static_cast<int64_t>(positions.size()), heads = 3;
  RopeParams params;
  params.style = c.style;
  params.theta = 500000.0f;
  params.rotary_dim = c.rotary_dim;
  params.scaling = c.scaling;
  params.freq_factors = c.freq_factors;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(tokens * heads * c.head_dim));
  for (float& v : x) v = normal(rng);

  std::vector<float> first;
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> out(x.size());
    ASSERT_TRUE(Rope(x.data(), tokens, heads, c.head_dim, positions.data(), params, out.data(), pool).ok());
    if (threads == 1) first = out;
    EXPECT_TRUE(AllEqual(out, first)) << threads << " threads";
  }

  // Element (t, h, d) at (t * heads + h) * head_dim + d, like x; the
  // elements past rotary_dim pass through unchanged (a bound of 0).
  std::vector<double> expected(x.begin(), x.end()), bounds(x.size(), 0.0);
  const int64_t pairs = c.rotary_dim / 2;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t head = (t * heads + h) * c.head_dim;
      const float* in = x.data() + head;
      for (int64_t i = 0; i < pairs; ++i) {
        const int64_t a = c.style == RopeStyle::kNeox ? i : 2 * i;
        const int64_t b = c.style == RopeStyle::kNeox ? i + pairs : 2 * i + 1;
        const double angle = NaiveAngle(params, positions[t], i);
        expected[head + a] = in[a] * std::cos(angle) - in[b] * std::sin(angle);
        expected[head + b] = in[a] * std::sin(angle) + in[b] * std::cos(angle);
        bounds[head + a] = bounds[head + b] =
            (std::fabs(in[a]) + std::fabs(in[b])) *
            (std::fabs(angle) * (2 * i + 6) * std::ldexp(1.0, -23) + std::ldexp(1.0, -21));
      }
    }
  }
  EXPECT_TRUE(AllWithin(first, expected, bounds)) << "head_dim " << c.head_dim << ", rotary_dim " << c.rotary_dim;
}

const std::vector<int32_t> kPositions = {0, 1, 2, 17, 100, 511, 4095, 9000};

TEST(RopeTest, InterleavedFullRotation) {
  CheckRope({RopeStyle::kInterleaved, 64, 64, {}}, kPositions);
}

TEST(RopeTest, NeoxFullRotation) { CheckRope({RopeStyle::kNeox, 64, 64, {}}, kPositions); }

TEST(RopeTest, PartialRotationPassesTheRestThrough) {
  CheckRope({RopeStyle::kNeox, 80, 32, {}}, kPositions);
  CheckRope({RopeStyle::kInterleaved, 80, 32, {}}, kPositions);
}

TEST(RopeTest, LinearScalingDividesPositions) {
  RopeScaling linear;
  linear.kind = RopeScaling::Kind::kLinear;
  linear.factor = 4.0f;
  CheckRope({RopeStyle::kNeox, 64, 64, linear}, kPositions);
}

TEST(RopeTest, Llama3ScalingDividesLowFrequencies) {
  RopeScaling llama3;
  llama3.kind = RopeScaling::Kind::kLlama3;
  llama3.factor = 8.0f;
  llama3.low_freq_factor = 1.0f;
  llama3.high_freq_factor = 4.0f;
  llama3.original_max_positions = 8192;
  CheckRope({RopeStyle::kNeox, 128, 128, llama3}, kPositions);
}

TEST(RopeTest, FreqFactorsDivideEachPairsAngle) {
  std::vector<float> factors(32);
  for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + 0.25f * static_cast<float>(i % 7);
  CheckRope({RopeStyle::kInterleaved, 64, 64, {}, factors}, kPositions);
  CheckRope({RopeStyle::kNeox, 80, 64, {}, factors}, kPositions);
}

// llama.cpp's converter stores Llama 3.1's divisors as the rope_freqs tensor;
// given as factors they rotate exactly as the llama3 rule does.
TEST(RopeTest, FreqFactorsOfTheLlama3RuleMatchLlama3Scaling) {
  RopeParams llama3;
  llama3.style = RopeStyle::kInterleaved;
  llama3.theta = 500000.0f;
  llama3.rotary_dim = 64;
  llama3.scaling.kind = RopeScaling::Kind::kLlama3;
  llama3.scaling.factor = 8.0f;
  llama3.scaling.low_freq_factor = 1.0f;
  llama3.scaling.high_freq_factor = 4.0f;
  llama3.scaling.original_max_positions = 8192;
  std::vector<float> factors(32);
  for (int64_t i = 0; i < 32; ++i) factors[i] = static_cast<float>(NaiveDivisor(llama3, i));
  RopeParams with_factors = llama3;
  with_factors.scaling = {};
  with_factors.freq_factors = factors;

  const int64_t tokens = static_cast<int64_t>(kPositions.size()), heads = 2;
  std::vector<float> x(static_cast<size_t>(tokens * heads * 64));
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<float> by_rule(x.size()), by_factors(x.size());
  ThreadPool pool(1);
  ASSERT_TRUE(Rope(x.data(), tokens, heads, 64, kPositions.data(), llama3, by_rule.data(), pool).ok());
  ASSERT_TRUE(Rope(x.data(), tokens, heads, 64, kPositions.data(), with_factors, by_factors.data(), pool).ok());
  EXPECT_TRUE(AllEqual(by_factors, by_rule));
}

TEST(RopeTest, RejectsMiscountedOrNonPositiveFreqFactors) {
  RopeParams params;
  params.rotary_dim = 8;
  ThreadPool pool(1);
  float x[8] = {};
  const int32_t position = 0;
  const std::vector<float> three = {1, 2, 3};
  params.freq_factors = three;
  EXPECT_THAT(Rope(x, 1, 1, 8, &position, params, x, pool).message(), HasSubstr("3 freq_factors for 4 pairs"));
  const std::vector<float> zero = {1, 2, 0, 4};
  params.freq_factors = zero;
  EXPECT_THAT(Rope(x, 1, 1, 8, &position, params, x, pool).message(), HasSubstr("freq_factor 0 is not positive"));
}

TEST(RopeTest, PositionZeroIsTheIdentityAndInPlaceWorks) {
  RopeParams params;
  params.rotary_dim = 8;
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> original = x;
  const int32_t position = 0;
  ThreadPool pool(1);
  ASSERT_TRUE(Rope(x.data(), 1, 1, 8, &position, params, x.data(), pool).ok());
  EXPECT_TRUE(AllEqual(x, original));
}

TEST(RopeTest, RejectsBadRotaryDims) {
  RopeParams params;
  params.rotary_dim = 7;
  ThreadPool pool(1);
  float x[8] = {};
  const int32_t position = 0;
  EXPECT_THAT(Rope(x, 1, 1, 8, &position, params, x, pool).message(),
              HasSubstr("Rope: rotary_dim 7 must be even and within 2..head_dim (8)"));
}

// llama.cpp's bits: the first product rounded, the second fused
// (out0 = fma(x0, cos, -(x1 sin)), out1 = fma(x0, sin, x1 cos)), with glibc's
// cosf / sinf of the position (one pair: its angle is the position itself).
// Computed with exactly rounded f32 operations in Python; the starred
// entries are where rounding both products gives other bits.
TEST(RopeTest, RotationHasGgmlsContraction) {
  const std::vector<int32_t> positions = {2, 3, 7};
  const std::vector<float> x = {1.5f, 2.25f, -0.40625f, 0.9375f, 3.0f, 0.1875f};  // 3 heads of one pair
  const std::vector<uint32_t> want = {
      0xc02ae391, 0x3edaf073, 0xbf2ef3be, 0xbf427132, 0xbfb59f9f, 0x40299762,   // position 2: head 0*
      0xbfe6b89b, 0xc00102eb, 0x3e8a2e4b, 0xbf7c4652, 0xc03fc5a2, 0x3e73712d,   // position 3: heads 1*, 2*
      0xbeb1da05, 0x402ba1f5, 0xbf6c1527, 0x3ee13849, 0x4008dd8a, 0x40073031};  // position 7: heads 0*, 2*
  std::vector<float> in;
  for (size_t t = 0; t < positions.size(); ++t) in.insert(in.end(), x.begin(), x.end());
  RopeParams params;
  params.style = RopeStyle::kInterleaved;
  params.rotary_dim = 2;
  ThreadPool pool(1);
  std::vector<float> out(in.size());
  ASSERT_TRUE(Rope(in.data(), 3, 3, 2, positions.data(), params, out.data(), pool).ok());
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &out[i], sizeof bits);
    EXPECT_EQ(bits, want[i]) << "element " << i;
  }
}

// A step's Rope calls share the angles of its positions: each call with
// RopeAngles gives the bits of a call without, for two sets of angle
// parameters taken in turn and for different head counts, and after Clear
// the same positions buffer holding the next step's positions gives that
// step's bits.
TEST(RopeTest, AStepsCallsShareItsAnglesWithTheSameBits) {
  ThreadPool pool(2);
  std::vector<int32_t> positions = {0, 5, 17, 300, 4095};
  const int64_t tokens = static_cast<int64_t>(positions.size()), head_dim = 64;
  const std::vector<float> freq_factors(16, 1.5f);
  RopeParams global{RopeStyle::kNeox, 10000.0f, 64, {}, {}};
  RopeParams local{RopeStyle::kInterleaved, 10000.0f, 32, {}, freq_factors};
  std::mt19937 rng(21);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(tokens * 9 * head_dim));
  for (float& v : x) v = normal(rng);
  auto rotate = [&](int64_t heads, const RopeParams& params, RopeAngles* angles) {
    std::vector<float> out(static_cast<size_t>(tokens * heads * head_dim), std::nanf(""));
    EXPECT_TRUE(Rope(x.data(), tokens, heads, head_dim, positions.data(), params, out.data(), pool, angles).ok());
    return out;
  };
  RopeAngles angles;
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE(::testing::Message() << "step " << step);
    angles.Clear();
    for (int64_t heads : {9, 3}) {
      for (const RopeParams* params : {&global, &local}) {
        EXPECT_TRUE(AllEqual(rotate(heads, *params, &angles), rotate(heads, *params, nullptr)))
            << heads << " heads, rotary_dim " << params->rotary_dim;
      }
    }
    for (int32_t& p : positions) p += 1;  // the next step's positions, in the same buffer
  }
}

// The AVX2 + FMA rotation gives the portable one's bits, in both styles, for
// pair counts with and without a tail past its registers.
TEST(RopeTest, Avx2RotationEqualsThePortableOne) {
  const internal::RotatePairs avx2 = internal::Avx2RotatePairs();
  if (avx2 == nullptr) GTEST_SKIP() << "this CPU has no AVX2";
  std::mt19937 rng(31);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> angle(-100.0f, 100.0f);
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kNeox}) {
    for (int64_t pairs : {1, 3, 4, 7, 8, 20, 32, 64}) {
      std::vector<float> in(static_cast<size_t>(2 * pairs)), cosines(pairs), sines(pairs);
      for (float& v : in) v = normal(rng);
      for (int64_t i = 0; i < pairs; ++i) {
        const float a = angle(rng);
        cosines[i] = std::cos(a);
        sines[i] = std::sin(a);
      }
      std::vector<float> want(in.size(), std::nanf("")), got(in.size(), std::nanf(""));
      internal::PortableRotatePairs()(in.data(), cosines.data(), sines.data(), pairs, style, want.data());
      avx2(in.data(), cosines.data(), sines.data(), pairs, style, got.data());
      EXPECT_TRUE(AllEqual(got, want)) << (style == RopeStyle::kNeox ? "neox, " : "interleaved, ") << pairs
                                       << " pairs";
    }
  }
}

}  // namespace
}  // namespace kvjit::cpu
