#ifndef KVJIT_TESTS_UNIT_COMMON_NUMERICCOMPARE_H_
#define KVJIT_TESTS_UNIT_COMMON_NUMERICCOMPARE_H_

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"

// Elementwise comparison of floating-point results. A hand-written
// `max_diff = std::max(max_diff, std::abs(a[i] - b[i]))` loses a NaN
// (std::max(0.0, NaN) is 0.0) and passes when nothing was compared; these
// comparisons fail on any NaN or infinity on either side, on sizes that
// differ and on zero elements, and say what they compared.
//
//   EXPECT_TRUE(AllClose(logits, reference, Absolute(1e-4) + Relative(1e-4)));
//   ASSERT_TRUE(AllEqual(avx2, portable)) << "tokens " << tokens;
namespace kvjit::testing {

// floats or doubles, read as doubles: an f32 result compares with an f64
// reference without a copy.
class NumberSpan {
 public:
  NumberSpan(absl::Span<const float> values) : floats_(values.data()), size_(values.size()) {}
  NumberSpan(absl::Span<const double> values) : doubles_(values.data()), size_(values.size()) {}
  NumberSpan(const std::vector<float>& values) : NumberSpan(absl::MakeConstSpan(values)) {}
  NumberSpan(const std::vector<double>& values) : NumberSpan(absl::MakeConstSpan(values)) {}

  size_t size() const { return size_; }
  double operator[](size_t i) const { return floats_ != nullptr ? floats_[i] : doubles_[i]; }

 private:
  const float* floats_ = nullptr;
  const double* doubles_ = nullptr;
  size_t size_ = 0;
};

// Element i passes when |actual[i] - expected[i]| <= absolute
// + relative * |expected[i]| + relative_to_largest * max_j |expected[j]|.
// Terms add: Absolute(1e-4) + Relative(1e-4) is 1e-4 * (1 + |expected[i]|).
struct Tolerance {
  double absolute = 0.0;
  double relative = 0.0;
  double relative_to_largest = 0.0;
};
inline Tolerance Absolute(double bound) { return {bound, 0.0, 0.0}; }
inline Tolerance Relative(double fraction) { return {0.0, fraction, 0.0}; }
inline Tolerance RelativeToLargest(double fraction) { return {0.0, 0.0, fraction}; }
inline Tolerance operator+(const Tolerance& a, const Tolerance& b) {
  return {a.absolute + b.absolute, a.relative + b.relative, a.relative_to_largest + b.relative_to_largest};
}

// One element of a comparison.
struct ElementReport {
  size_t index = 0;
  double actual = 0.0;
  double expected = 0.0;
  double difference = 0.0;  // |actual - expected|
  double allowed = 0.0;     // the element's bound
};

// What a comparison found. Elements are compared up to the shorter side.
struct NumericComparison {
  size_t actual_size = 0;
  size_t expected_size = 0;
  std::optional<size_t> bounds_size;  // for CompareWithin only
  size_t compared = 0;
  std::string criterion;  // the tolerance, in words
  double largest_expected_magnitude = 0.0;  // over the finite expected values compared
  std::optional<ElementReport> largest_difference;  // among the pairs where both are finite
  std::optional<ElementReport> first_non_finite;    // NaN or infinity, in either side
  std::optional<ElementReport> first_beyond_tolerance;
  size_t beyond_tolerance = 0;

  bool sizes_match() const {
    return actual_size == expected_size && (!bounds_size || *bounds_size == expected_size);
  }
  bool passed() const {
    return sizes_match() && compared > 0 && !first_non_finite && beyond_tolerance == 0;
  }
};

NumericComparison CompareClose(NumberSpan actual, NumberSpan expected, const Tolerance& tolerance);

// Bit for bit: equal values with the same sign, so -0 differs from +0.
NumericComparison CompareEqual(NumberSpan actual, NumberSpan expected);

// Under a bound of its own per element, for error analyses that derive one.
NumericComparison CompareWithin(NumberSpan actual, NumberSpan expected, NumberSpan bounds);

// The comparison as a GoogleTest result; a failure names the element, both
// values, the tolerance and how many elements were compared.
::testing::AssertionResult Passes(const NumericComparison& comparison);

inline ::testing::AssertionResult AllClose(NumberSpan actual, NumberSpan expected, const Tolerance& tolerance) {
  return Passes(CompareClose(actual, expected, tolerance));
}
inline ::testing::AssertionResult AllEqual(NumberSpan actual, NumberSpan expected) {
  return Passes(CompareEqual(actual, expected));
}
inline ::testing::AssertionResult AllWithin(NumberSpan actual, NumberSpan expected, NumberSpan bounds) {
  return Passes(CompareWithin(actual, expected, bounds));
}

}  // namespace kvjit::testing

#endif  // KVJIT_TESTS_UNIT_COMMON_NUMERICCOMPARE_H_
