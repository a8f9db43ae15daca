#include "tools/kvjit/Perplexity.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace kvjit::cli {
namespace {

TEST(PerplexityTest, ScoreRowIsTheNegativeLogSoftmaxOfTheTarget) {
  // softmax(0, ln 3) = (1/4, 3/4).
  const std::vector<float> logits = {0.0f, static_cast<float>(std::log(3.0))};
  EXPECT_NEAR(ScoreRow(logits, 0).negative_log_likelihood, std::log(4.0), 1e-7);
  EXPECT_NEAR(ScoreRow(logits, 1).negative_log_likelihood, std::log(4.0 / 3.0), 1e-7);
  EXPECT_EQ(ScoreRow(logits, 0).top_token, 1);
}

TEST(PerplexityTest, TheTopTokenAmongEqualsIsTheLowestId) {
  EXPECT_EQ(ScoreRow(std::vector<float>{1, 5, 5, 2}, 0).top_token, 1);
}

TEST(PerplexityTest, ScoreRowSurvivesLogitsThatWouldOverflowExp) {
  const std::vector<float> logits = {1000.0f, 1000.0f};
  EXPECT_NEAR(ScoreRow(logits, 1).negative_log_likelihood, std::log(2.0), 1e-9);
}

TEST(PerplexityTest, PerplexityIsExpOfTheMeanNllWithItsStandardError) {
  PerplexityAccumulator accumulator;
  for (double nll : {1.0, 2.0, 3.0, 4.0}) accumulator.Add(nll);
  // Mean 2.5; population variance 1.25; standard error sqrt(1.25 / 3).
  const Estimate estimate = accumulator.Perplexity();
  EXPECT_NEAR(estimate.value, std::exp(2.5), 1e-12);
  EXPECT_NEAR(estimate.uncertainty, std::exp(2.5) * std::sqrt(1.25 / 3), 1e-12);
  EXPECT_EQ(accumulator.count(), 4);
}

TEST(PerplexityTest, OneValueHasNoUncertainty) {
  const Estimate estimate = MeanWithStandardError(3, 9, 1);
  EXPECT_EQ(estimate.value, 3);
  EXPECT_EQ(estimate.uncertainty, 0);
}

TEST(PerplexityTest, PercentilesInterpolateBetweenNeighbours) {
  const std::vector<double> sorted = {0, 10, 20, 30, 40};
  EXPECT_EQ(Percentile(sorted, 0), 0);
  EXPECT_EQ(Percentile(sorted, 1), 40);
  EXPECT_EQ(Percentile(sorted, 0.5), 20);
  EXPECT_DOUBLE_EQ(Percentile(sorted, 0.9), 36);
}

std::vector<double> LogProbsOf(const std::vector<double>& probabilities) {
  std::vector<double> log_probs;
  for (double p : probabilities) log_probs.push_back(std::log(p));
  return log_probs;
}

std::vector<float> LogitsOf(const std::vector<double>& probabilities) {
  std::vector<float> logits;
  for (double p : probabilities) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

TEST(KlDivergenceTest, IdenticalDistributionsDivergeByNothing) {
  KlDivergenceAccumulator kl;
  const std::vector<double> probabilities = {0.5, 0.25, 0.125, 0.125};
  kl.Add(LogProbsOf(probabilities), std::log(4.0), 0, LogitsOf(probabilities), 1);
  EXPECT_NEAR(kl.MeanKlDivergence().value, 0, 1e-12);
  EXPECT_EQ(kl.SameTopTokenFraction().value, 1);
  EXPECT_NEAR(kl.Perplexity().value, 4, 1e-6);
  EXPECT_NEAR(kl.SavedPerplexity().value, 4, 1e-12);
  EXPECT_NEAR(kl.LogPerplexityRatio().value, 0, 1e-7);
}

TEST(KlDivergenceTest, AHandComputedDivergence) {
  // KL((1/2, 1/2) || (1/4, 3/4)) = 1/2 ln 2 + 1/2 ln(2/3).
  KlDivergenceAccumulator kl;
  kl.Add(LogProbsOf({0.5, 0.5}), std::log(2.0), 0, LogitsOf({0.25, 0.75}), 0);
  EXPECT_NEAR(kl.MeanKlDivergence().value, 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3.0), 1e-7);
  // The saved top token is 0 (the lowest of equals); this run's is 1.
  EXPECT_EQ(kl.SameTopTokenFraction().value, 0);
  EXPECT_NEAR(kl.Perplexity().value, 4, 1e-6);
  EXPECT_NEAR(kl.SavedPerplexity().value, 2, 1e-12);
  EXPECT_NEAR(kl.LogPerplexityRatio().value, std::log(2.0), 1e-6);
}

TEST(KlDivergenceTest, SavedLogProbsAreNormalizedBeforeComparing) {
  // A constant offset (the rounding of a logits file shifts every value
  // alike at worst) is no divergence.
  KlDivergenceAccumulator kl;
  std::vector<double> shifted = LogProbsOf({0.6, 0.3, 0.1});
  for (double& log_prob : shifted) log_prob += 0.01;
  kl.Add(shifted, -std::log(0.6), 0, LogitsOf({0.6, 0.3, 0.1}), 0);
  EXPECT_NEAR(kl.MeanKlDivergence().value, 0, 1e-7);
}

TEST(KlDivergenceTest, StatisticsOverManyTokens) {
  KlDivergenceAccumulator kl;
  kl.Add(LogProbsOf({0.5, 0.5}), std::log(2.0), 0, LogitsOf({0.5, 0.5}), 0);
  kl.Add(LogProbsOf({0.5, 0.5}), std::log(2.0), 0, LogitsOf({0.25, 0.75}), 0);
  kl.Add(LogProbsOf({0.9, 0.1}), -std::log(0.9), 0, LogitsOf({0.8, 0.2}), 0);
  EXPECT_EQ(kl.count(), 3);
  EXPECT_NEAR(kl.SameTopTokenFraction().value, 2.0 / 3, 1e-12);
  EXPECT_NEAR(kl.SameTopTokenFraction().uncertainty, std::sqrt(2.0 / 9 / 2), 1e-12);
  const std::vector<double> sorted = kl.SortedKlDivergences();
  ASSERT_EQ(sorted.size(), 3u);
  EXPECT_NEAR(sorted[0], 0, 1e-7);
  EXPECT_LT(sorted[1], sorted[2]);
  EXPECT_GT(kl.MeanKlDivergence().uncertainty, 0);
}

}  // namespace
}  // namespace kvjit::cli
