#include "tests/unit/common/NumericCompare.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace kvjit::testing {
namespace {

enum class Criterion { kTolerance, kBitForBit, kBounds };

std::string DescribeTolerance(const Tolerance& tolerance, double largest_expected_magnitude) {
  std::ostringstream out;
  const char* separator = "";
  if (tolerance.absolute != 0.0 || (tolerance.relative == 0.0 && tolerance.relative_to_largest == 0.0)) {
    out << "absolute " << tolerance.absolute;
    separator = " + ";
  }
  if (tolerance.relative != 0.0) {
    out << separator << tolerance.relative << " * |expected[i]|";
    separator = " + ";
  }
  if (tolerance.relative_to_largest != 0.0) {
    out << separator << tolerance.relative_to_largest << " * max |expected| (" << largest_expected_magnitude << ")";
  }
  return out.str();
}

NumericComparison Compare(NumberSpan actual, NumberSpan expected, Criterion criterion, const Tolerance& tolerance,
                          NumberSpan bounds) {
  NumericComparison comparison;
  comparison.actual_size = actual.size();
  comparison.expected_size = expected.size();
  comparison.compared = std::min(actual.size(), expected.size());
  if (criterion == Criterion::kBounds) {
    comparison.bounds_size = bounds.size();
    comparison.compared = std::min(comparison.compared, bounds.size());
  }
  for (size_t i = 0; i < comparison.compared; ++i) {
    if (std::isfinite(expected[i])) {
      comparison.largest_expected_magnitude = std::max(comparison.largest_expected_magnitude, std::fabs(expected[i]));
    }
  }
  const double shared_allowance = tolerance.relative_to_largest * comparison.largest_expected_magnitude;
  switch (criterion) {
    case Criterion::kTolerance:
      comparison.criterion = DescribeTolerance(tolerance, comparison.largest_expected_magnitude);
      break;
    case Criterion::kBitForBit:
      comparison.criterion = "bit for bit";
      break;
    case Criterion::kBounds:
      comparison.criterion = "a bound per element";
      break;
  }

  for (size_t i = 0; i < comparison.compared; ++i) {
    ElementReport element{i, actual[i], expected[i], std::fabs(actual[i] - expected[i]), 0.0};
    if (!std::isfinite(element.actual) || !std::isfinite(element.expected)) {
      if (!comparison.first_non_finite) comparison.first_non_finite = element;
      continue;
    }
    bool within = false;
    switch (criterion) {
      case Criterion::kTolerance:
        element.allowed = tolerance.absolute + tolerance.relative * std::fabs(element.expected) + shared_allowance;
        within = element.difference <= element.allowed;
        break;
      case Criterion::kBitForBit:
        within = element.actual == element.expected &&
                 std::signbit(element.actual) == std::signbit(element.expected);
        break;
      case Criterion::kBounds:
        element.allowed = bounds[i];
        // An infinite bound would pass anything, a NaN one nothing: both are the test's bug.
        within = std::isfinite(element.allowed) && element.difference <= element.allowed;
        break;
    }
    if (!comparison.largest_difference || element.difference > comparison.largest_difference->difference) {
      comparison.largest_difference = element;
    }
    if (!within) {
      ++comparison.beyond_tolerance;
      if (!comparison.first_beyond_tolerance) comparison.first_beyond_tolerance = element;
    }
  }
  return comparison;
}

std::string Format(double value, int significant_digits) {
  std::ostringstream out;
  out.precision(significant_digits);
  out << value;
  return out.str();
}

// Enough digits to tell apart the values a comparison saw: 9 for a value
// that a float holds, 17 for any other double.
std::string FormatValue(double value) {
  return Format(value, static_cast<double>(static_cast<float>(value)) == value ? 9 : 17);
}

// A difference or a bound: its first digits are what matter.
std::string FormatMargin(double value) { return Format(value, 9); }

std::string DescribeElement(const ElementReport& element) {
  return "element " + std::to_string(element.index) + ": actual " + FormatValue(element.actual) + ", expected " +
         FormatValue(element.expected);
}

}  // namespace

NumericComparison CompareClose(NumberSpan actual, NumberSpan expected, const Tolerance& tolerance) {
  return Compare(actual, expected, Criterion::kTolerance, tolerance, absl::Span<const double>());
}

NumericComparison CompareEqual(NumberSpan actual, NumberSpan expected) {
  return Compare(actual, expected, Criterion::kBitForBit, Tolerance{}, absl::Span<const double>());
}

NumericComparison CompareWithin(NumberSpan actual, NumberSpan expected, NumberSpan bounds) {
  return Compare(actual, expected, Criterion::kBounds, Tolerance{}, bounds);
}

::testing::AssertionResult Passes(const NumericComparison& comparison) {
  ::testing::AssertionResult result =
      comparison.passed() ? ::testing::AssertionSuccess() : ::testing::AssertionFailure();
  result << comparison.compared << " elements compared, " << comparison.criterion;
  if (!comparison.sizes_match()) {
    result << "; sizes differ: actual " << comparison.actual_size << ", expected " << comparison.expected_size;
    if (comparison.bounds_size) result << ", bounds " << *comparison.bounds_size;
  }
  if (comparison.compared == 0) result << "; nothing was compared";
  if (comparison.first_non_finite) {
    result << "; not finite at " << DescribeElement(*comparison.first_non_finite);
  }
  if (comparison.first_beyond_tolerance) {
    const ElementReport& first = *comparison.first_beyond_tolerance;
    result << "; " << comparison.beyond_tolerance << " beyond tolerance, the first " << DescribeElement(first)
           << ", difference " << FormatMargin(first.difference) << ", allowed " << FormatMargin(first.allowed);
  }
  if (comparison.largest_difference) {
    result << "; largest difference " << FormatMargin(comparison.largest_difference->difference) << " at element "
           << comparison.largest_difference->index;
  }
  return result;
}

}  // namespace kvjit::testing
