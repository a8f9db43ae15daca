#include "tests/unit/common/NumericCompare.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::testing {
namespace {

using ::testing::HasSubstr;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(AllCloseTest, ValuesWithinAnAbsoluteTolerancePass) {
  const std::vector<float> expected = {1.0f, -2.0f, 0.0f};
  EXPECT_TRUE(AllClose(std::vector<float>{1.00005f, -2.00009f, 0.0f}, expected, Absolute(1e-4)));
  EXPECT_FALSE(AllClose(std::vector<float>{1.0f, -2.0f, 2e-4f}, expected, Absolute(1e-4)));
}

TEST(AllCloseTest, RelativeToleranceScalesWithEachExpectedValue) {
  const std::vector<double> expected = {1000.0, 1.0};
  EXPECT_TRUE(AllClose(std::vector<double>{1000.009, 1.0}, expected, Relative(1e-5)));
  EXPECT_FALSE(AllClose(std::vector<double>{1000.0, 1.00001001}, expected, Relative(1e-5)));
  // 1e-4 * (1 + |expected|): the sum of both terms.
  EXPECT_TRUE(AllClose(std::vector<double>{1000.1, 1.0}, expected, Absolute(1e-4) + Relative(1e-4)));
  EXPECT_FALSE(AllClose(std::vector<double>{1000.1002, 1.0}, expected, Absolute(1e-4) + Relative(1e-4)));
}

TEST(AllCloseTest, RelativeToLargestScalesWithTheLargestExpectedMagnitude) {
  const std::vector<float> expected = {-50.0f, 0.5f};
  EXPECT_TRUE(AllClose(std::vector<float>{-50.0f, 0.9f}, expected, RelativeToLargest(1e-2)));
  EXPECT_FALSE(AllClose(std::vector<float>{-50.0f, 1.1f}, expected, RelativeToLargest(1e-2)));
}

TEST(AllCloseTest, ComparesFloatsWithDoubles) {
  const std::vector<float> actual = {0.1f};
  EXPECT_TRUE(AllClose(actual, std::vector<double>{0.1}, Absolute(1e-8)));
  EXPECT_FALSE(AllClose(actual, std::vector<double>{0.1}, Absolute(1e-10)));
}

TEST(AllCloseTest, NanInActualFails) {
  const ::testing::AssertionResult result =
      AllClose(std::vector<float>{1.0f, kNan, 2.0f}, std::vector<float>{1.0f, 1.5f, 2.0f}, Absolute(1.0));
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("not finite at element 1: actual nan, expected 1.5"));
  EXPECT_THAT(result.message(), HasSubstr("3 elements compared"));
}

TEST(AllCloseTest, NanInExpectedFails) {
  EXPECT_FALSE(AllClose(std::vector<float>{1.0f}, std::vector<float>{kNan}, Absolute(1e30)));
}

TEST(AllCloseTest, NanOnBothSidesFails) {
  EXPECT_FALSE(AllClose(std::vector<float>{kNan}, std::vector<float>{kNan}, Absolute(1.0)));
}

TEST(AllCloseTest, InfinityFailsEvenWhereBothSidesAgree) {
  EXPECT_FALSE(AllClose(std::vector<float>{kInf}, std::vector<float>{1.0f}, Absolute(1e30)));
  EXPECT_FALSE(AllClose(std::vector<float>{1.0f}, std::vector<float>{-kInf}, Absolute(1e30)));
  EXPECT_FALSE(AllClose(std::vector<float>{kInf}, std::vector<float>{kInf}, Absolute(1.0)));
}

// What a hand-written std::max over the differences would lose.
TEST(AllCloseTest, NanAfterALargerDifferenceStillFails) {
  const std::vector<float> actual = {1.5f, kNan};
  const std::vector<float> expected = {1.0f, 1.0f};
  EXPECT_FALSE(AllClose(actual, expected, Absolute(1.0)));
}

TEST(AllCloseTest, NothingComparedFails) {
  const ::testing::AssertionResult result = AllClose(std::vector<float>{}, std::vector<float>{}, Absolute(1.0));
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("0 elements compared"));
  EXPECT_THAT(result.message(), HasSubstr("nothing was compared"));
}

TEST(AllCloseTest, SizesThatDifferFail) {
  const ::testing::AssertionResult result =
      AllClose(std::vector<float>{1.0f, 2.0f}, std::vector<float>{1.0f, 2.0f, 3.0f}, Absolute(1.0));
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("sizes differ: actual 2, expected 3"));
}

TEST(AllCloseTest, FailureNamesTheElementTheValuesTheToleranceAndTheCount) {
  const ::testing::AssertionResult result = AllClose(std::vector<float>{1.0f, 2.5f, 3.0f, 9.0f},
                                                     std::vector<float>{1.0f, 2.0f, 3.0f, 4.0f}, Absolute(1e-3));
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("4 elements compared, absolute 0.001"));
  EXPECT_THAT(result.message(),
              HasSubstr("2 beyond tolerance, the first element 1: actual 2.5, expected 2, difference 0.5"));
  EXPECT_THAT(result.message(), HasSubstr("largest difference 5 at element 3"));
}

TEST(CompareCloseTest, SummarizesWhatItCompared) {
  const NumericComparison comparison = CompareClose(std::vector<float>{1.0f, 2.25f, kInf, 4.0f, kNan},
                                                    std::vector<float>{1.0f, 2.0f, 3.0f, -8.0f, 5.0f}, Absolute(0.5));
  EXPECT_FALSE(comparison.passed());
  EXPECT_EQ(comparison.compared, 5u);
  ASSERT_TRUE(comparison.largest_difference);
  EXPECT_EQ(comparison.largest_difference->index, 3u);
  EXPECT_EQ(comparison.largest_difference->difference, 12.0);
  ASSERT_TRUE(comparison.first_non_finite);
  EXPECT_EQ(comparison.first_non_finite->index, 2u);
  EXPECT_EQ(comparison.beyond_tolerance, 1u);
  EXPECT_EQ(comparison.largest_expected_magnitude, 8.0);
  EXPECT_TRUE(comparison.sizes_match());
}

TEST(AllEqualTest, EqualBitsPass) {
  const std::vector<float> values = {0.1f, -3.0f, 0.0f, -0.0f, 1e-40f};
  const ::testing::AssertionResult result = AllEqual(values, std::vector<float>(values));
  EXPECT_TRUE(result);
  EXPECT_THAT(result.message(), HasSubstr("5 elements compared, bit for bit"));
}

TEST(AllEqualTest, OneUlpFails) {
  EXPECT_FALSE(AllEqual(std::vector<float>{1.0f}, std::vector<float>{std::nextafter(1.0f, 2.0f)}));
}

TEST(AllEqualTest, ZerosOfOppositeSignFail) {
  EXPECT_FALSE(AllEqual(std::vector<float>{0.0f}, std::vector<float>{-0.0f}));
}

TEST(AllEqualTest, IdenticalNanOrInfinityFails) {
  EXPECT_FALSE(AllEqual(std::vector<float>{kNan}, std::vector<float>{kNan}));
  EXPECT_FALSE(AllEqual(std::vector<float>{kInf}, std::vector<float>{kInf}));
}

TEST(AllEqualTest, NothingComparedFails) { EXPECT_FALSE(AllEqual(std::vector<float>{}, std::vector<float>{})); }

TEST(AllWithinTest, EachElementHasItsOwnBound) {
  const std::vector<float> expected = {1.0f, 1.0f};
  EXPECT_TRUE(AllWithin(std::vector<float>{1.5f, 1.01f}, expected, std::vector<double>{0.5, 0.02}));
  EXPECT_FALSE(AllWithin(std::vector<float>{1.01f, 1.5f}, expected, std::vector<double>{0.5, 0.02}));
}

TEST(AllWithinTest, NonFiniteBoundsFail) {
  const std::vector<float> values = {1.0f};
  EXPECT_FALSE(AllWithin(values, values, std::vector<double>{std::nan("")}));
  EXPECT_FALSE(AllWithin(values, values, std::vector<double>{INFINITY}));
}

TEST(AllWithinTest, BoundsOfAnotherSizeFail) {
  const std::vector<float> values = {1.0f, 2.0f};
  const ::testing::AssertionResult result = AllWithin(values, values, std::vector<double>{1.0});
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("sizes differ: actual 2, expected 2, bounds 1"));
}

}  // namespace
}  // namespace kvjit::testing
