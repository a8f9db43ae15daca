#include "tools/kvjit/Perplexity.h"

#include <algorithm>
#include <cmath>

#include "runtime/sampling/Sampler.h"

namespace kvjit::cli {
namespace {

struct RowMaximum {
  float value;
  int32_t index;  // the first where several are equal
};

RowMaximum MaximumOf(absl::Span<const float> values) {
  RowMaximum maximum{values[0], 0};
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] > maximum.value) maximum = {values[i], static_cast<int32_t>(i)};
  }
  return maximum;
}

// log(sum(exp(values))), shifted by the maximum so that no exp overflows.
double LogSumExp(absl::Span<const double> values) {
  const double maximum = *std::max_element(values.begin(), values.end());
  double sum = 0;
  for (double value : values) sum += std::exp(value - maximum);
  return maximum + std::log(sum);
}

}  // namespace

RowScore ScoreRow(absl::Span<const float> logits, int32_t target) {
  const RowMaximum maximum = MaximumOf(logits);
  return {sampling::LogSumExp(logits) - logits[target], maximum.index};
}

std::vector<double> LogSoftmax(absl::Span<const float> logits) {
  const double log_sum = sampling::LogSumExp(logits);
  std::vector<double> log_probs(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) log_probs[i] = logits[i] - log_sum;
  return log_probs;
}

Estimate MeanWithStandardError(double sum, double sum_of_squares, int64_t count) {
  if (count == 0) return {};
  const double mean = sum / count;
  const double variance = sum_of_squares / count - mean * mean;
  if (count < 2 || variance <= 0) return {mean, 0};
  return {mean, std::sqrt(variance / (count - 1))};
}

double Percentile(absl::Span<const double> sorted, double fraction) {
  const double position = std::clamp(fraction, 0.0, 1.0) * (sorted.size() - 1);
  const size_t below = static_cast<size_t>(position);
  const size_t above = std::min(below + 1, sorted.size() - 1);
  const double weight = position - below;
  return (1 - weight) * sorted[below] + weight * sorted[above];
}

void PerplexityAccumulator::Add(double negative_log_likelihood) {
  ++count_;
  sum_ += negative_log_likelihood;
  sum_of_squares_ += negative_log_likelihood * negative_log_likelihood;
}

Estimate PerplexityAccumulator::MeanNegativeLogLikelihood() const {
  return MeanWithStandardError(sum_, sum_of_squares_, count_);
}

Estimate PerplexityAccumulator::Perplexity() const {
  const Estimate nll = MeanNegativeLogLikelihood();
  const double perplexity = std::exp(nll.value);
  return {perplexity, perplexity * nll.uncertainty};
}

void KlDivergenceAccumulator::Add(absl::Span<const double> saved_log_probs,
                                  double saved_negative_log_likelihood, int32_t saved_top_token,
                                  absl::Span<const float> logits, int32_t target) {
  const RowScore score = ScoreRow(logits, target);
  current_.Add(score.negative_log_likelihood);
  saved_.Add(saved_negative_log_likelihood);
  sum_of_products_ += score.negative_log_likelihood * saved_negative_log_likelihood;
  if (score.top_token == saved_top_token) ++same_top_;

  // The saved log-probabilities are rounded (LogitsFile.h); normalizing them
  // again makes them a distribution, so that the divergence of a run from
  // its own saved copy is the rounding's second-order trace, not its
  // first-order sum.
  const double saved_log_sum = LogSumExp(saved_log_probs);
  const std::vector<double> log_probs = LogSoftmax(logits);
  double divergence = 0;
  for (size_t i = 0; i < log_probs.size(); ++i) {
    const double saved = saved_log_probs[i] - saved_log_sum;
    divergence += std::exp(saved) * (saved - log_probs[i]);
  }
  // It is never negative but by rounding, which would print as -0.000000.
  divergence = std::max(divergence, 0.0);
  kl_values_.push_back(divergence);
  kl_sum_ += divergence;
  kl_sum_of_squares_ += divergence * divergence;
}

Estimate KlDivergenceAccumulator::Perplexity() const { return current_.Perplexity(); }

Estimate KlDivergenceAccumulator::SavedPerplexity() const { return saved_.Perplexity(); }

Estimate KlDivergenceAccumulator::LogPerplexityRatio() const {
  const Estimate current = current_.MeanNegativeLogLikelihood();
  const Estimate saved = saved_.MeanNegativeLogLikelihood();
  const int64_t n = count();
  const double covariance =
      n < 2 ? 0 : (sum_of_products_ / n - current.value * saved.value) / (n - 1);
  const double variance = current.uncertainty * current.uncertainty +
                          saved.uncertainty * saved.uncertainty - 2 * covariance;
  return {current.value - saved.value, std::sqrt(std::max(variance, 0.0))};
}

Estimate KlDivergenceAccumulator::MeanKlDivergence() const {
  return MeanWithStandardError(kl_sum_, kl_sum_of_squares_, count());
}

std::vector<double> KlDivergenceAccumulator::SortedKlDivergences() const {
  std::vector<double> sorted = kl_values_;
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

Estimate KlDivergenceAccumulator::SameTopTokenFraction() const {
  const int64_t n = count();
  if (n == 0) return {};
  const double fraction = static_cast<double>(same_top_) / n;
  return {fraction, n < 2 ? 0 : std::sqrt(fraction * (1 - fraction) / (n - 1))};
}

}  // namespace kvjit::cli
