#ifndef KVJIT_TOOLS_KVJIT_PERPLEXITY_H_
#define KVJIT_TOOLS_KVJIT_PERPLEXITY_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace kvjit::cli {

// A value estimated from a sample's mean, with the standard error of that
// mean (0 where the sample is too small to have one).
struct Estimate {
  double value = 0;
  double uncertainty = 0;
};

// What one row of logits says about the token that followed.
struct RowScore {
  double negative_log_likelihood = 0;  // -log softmax(logits)[target]
  int32_t top_token = 0;               // the most likely token, the lowest id among equals
};

// Scores `target` under the softmax of `logits`, in double precision.
RowScore ScoreRow(absl::Span<const float> logits, int32_t target);

// log softmax(logits), in double precision.
std::vector<double> LogSoftmax(absl::Span<const float> logits);

// Sums of the per-token negative log-likelihoods of a perplexity run.
class PerplexityAccumulator {
 public:
  void Add(double negative_log_likelihood);

  int64_t count() const { return count_; }
  // exp(mean NLL); its uncertainty is exp(mean) times the standard error of
  // the mean NLL (the first-order propagation through exp), the figure
  // llama.cpp's perplexity tool prints.
  Estimate Perplexity() const;
  Estimate MeanNegativeLogLikelihood() const;

 private:
  int64_t count_ = 0;
  double sum_ = 0;
  double sum_of_squares_ = 0;
};

// The mean of `sum` over `count` values whose squares sum to
// `sum_of_squares`, with the standard error of that mean: sqrt(sample
// variance / (count - 1)), 0 for fewer than two values or a variance that
// rounding made negative.
Estimate MeanWithStandardError(double sum, double sum_of_squares, int64_t count);

// The value at `fraction` (0 to 1) of `sorted` (ascending, not empty),
// interpolated linearly between neighbours.
double Percentile(absl::Span<const double> sorted, double fraction);

// The comparison of a run's distributions with a saved run's over the same
// tokens (`kvjit perplexity --kl_divergence`).
class KlDivergenceAccumulator {
 public:
  // One scored token: the saved run's log-probabilities (any constant offset
  // is normalized away), its NLL of the token and top token, and this run's
  // logits and the token that followed.
  void Add(absl::Span<const double> saved_log_probs, double saved_negative_log_likelihood,
           int32_t saved_top_token, absl::Span<const float> logits, int32_t target);

  int64_t count() const { return static_cast<int64_t>(kl_values_.size()); }
  Estimate Perplexity() const;
  Estimate SavedPerplexity() const;
  // ln(PPL / PPL saved), whose uncertainty counts the two runs' NLLs'
  // covariance (they score the same tokens, so they move together).
  Estimate LogPerplexityRatio() const;
  // KL(saved || this run), in nats, per token.
  Estimate MeanKlDivergence() const;
  // The per-token KL divergences, ascending.
  std::vector<double> SortedKlDivergences() const;
  // The fraction of tokens whose most likely next token both runs agree on.
  Estimate SameTopTokenFraction() const;

 private:
  PerplexityAccumulator current_;
  PerplexityAccumulator saved_;
  double sum_of_products_ = 0;  // NLL times saved NLL, for their covariance
  std::vector<double> kl_values_;
  double kl_sum_ = 0;
  double kl_sum_of_squares_ = 0;
  int64_t same_top_ = 0;
};

}  // namespace kvjit::cli

#endif  // KVJIT_TOOLS_KVJIT_PERPLEXITY_H_
