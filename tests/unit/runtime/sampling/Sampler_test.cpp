#include "runtime/sampling/Sampler.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kvjit::sampling {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;
using ::testing::FloatNear;

Sampler MakeSampler(const SamplingParams& params) {
  absl::StatusOr<Sampler> sampler = Sampler::Create(params);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  return *std::move(sampler);
}

SamplingParams Greedy() {
  SamplingParams params;
  params.temperature = 0;
  return params;
}

// Logits whose softmax at temperature 1 is exactly `probabilities`.
std::vector<float> LogitsOf(const std::vector<double>& probabilities) {
  std::vector<float> logits;
  for (double p : probabilities) logits.push_back(p > 0 ? static_cast<float>(std::log(p)) : -INFINITY);
  return logits;
}

// The tokens drawn over many samples, so that tests can compare supports.
std::set<int32_t> Support(const SamplingParams& params, const std::vector<float>& logits, int draws = 2000) {
  Sampler sampler = MakeSampler(params);
  std::set<int32_t> seen;
  for (int i = 0; i < draws; ++i) seen.insert(sampler.Sample(logits, {}));
  return seen;
}

std::vector<int32_t> Draws(uint64_t seed, const std::vector<float>& logits, int count) {
  SamplingParams params;
  params.seed = seed;
  Sampler sampler = MakeSampler(params);
  std::vector<int32_t> tokens;
  for (int i = 0; i < count; ++i) tokens.push_back(sampler.Sample(logits, {}));
  return tokens;
}

TEST(SamplingParamsTest, RejectsOutOfRangeValues) {
  const auto error_for = [](auto change) {
    SamplingParams params;
    change(params);
    return ValidateSamplingParams(params);
  };
  EXPECT_TRUE(error_for([](SamplingParams&) {}).ok());
  EXPECT_THAT(error_for([](SamplingParams& p) { p.temperature = -0.5f; }).message(), HasSubstr("temperature"));
  EXPECT_THAT(error_for([](SamplingParams& p) { p.temperature = NAN; }).message(), HasSubstr("temperature"));
  EXPECT_THAT(error_for([](SamplingParams& p) { p.top_k = -1; }).message(), HasSubstr("top_k"));
  EXPECT_THAT(error_for([](SamplingParams& p) { p.top_p = 0; }).message(), HasSubstr("top_p"));
  EXPECT_THAT(error_for([](SamplingParams& p) { p.top_p = 1.5f; }).message(), HasSubstr("top_p"));
  EXPECT_THAT(error_for([](SamplingParams& p) { p.min_p = -0.1f; }).message(), HasSubstr("min_p"));
  EXPECT_THAT(error_for([](SamplingParams& p) { p.repetition_penalty = 0; }).message(),
              HasSubstr("repetition_penalty"));
  EXPECT_THAT(error_for([](SamplingParams& p) { p.presence_penalty = INFINITY; }).message(),
              HasSubstr("presence_penalty"));
  EXPECT_EQ(Sampler::Create([] {
              SamplingParams p;
              p.frequency_penalty = NAN;
              return p;
            }())
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LogSoftmaxTest, MatchesTheDefinition) {
  const std::vector<float> log_probs = LogSoftmax({1.0f, 2.0f, 3.0f});
  const double normalizer = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_THAT(log_probs, Pointwise(FloatNear(1e-6), std::vector<float>{static_cast<float>(1 - normalizer),
                                                                       static_cast<float>(2 - normalizer),
                                                                       static_cast<float>(3 - normalizer)}));
}

TEST(LogSoftmaxTest, StaysFiniteForHugeLogitsAndKeepsMaskedTokensMasked) {
  const std::vector<float> log_probs = LogSoftmax({1000.0f, 1000.0f, -INFINITY});
  EXPECT_THAT(log_probs, ElementsAre(FloatNear(-std::log(2.0f), 1e-6), FloatNear(-std::log(2.0f), 1e-6),
                                     -std::numeric_limits<float>::infinity()));
}

TEST(SamplerTest, GreedyPicksTheLowestIdAmongTies) {
  Sampler sampler = MakeSampler(Greedy());
  EXPECT_EQ(sampler.Sample({0.5f, 2.0f, -1.0f, 2.0f}, {}), 1);
  EXPECT_EQ(sampler.Sample({3.0f, 3.0f}, {}), 0);
  EXPECT_EQ(sampler.Sample({-INFINITY, -1.0f, NAN}, {}), 1);
}

TEST(SamplerTest, TopKOfOneIsGreedy) {
  SamplingParams params;
  params.top_k = 1;
  params.seed = 7;
  Sampler sampler = MakeSampler(params);
  Sampler greedy = MakeSampler(Greedy());
  const std::vector<std::vector<float>> cases = {
      {0.1f, 0.3f, 0.2f}, {5.0f, 5.0f, 1.0f}, {-2.0f, 0.0f, 0.0f, -1.0f}, {1.0f}};
  for (const std::vector<float>& logits : cases) {
    for (int i = 0; i < 50; ++i) EXPECT_EQ(sampler.Sample(logits, {}), greedy.Sample(logits, {}));
  }
}

TEST(SamplerTest, TopKKeepsTheKMostLikelyLowestIdFirstOnTies) {
  SamplingParams params;
  params.top_k = 3;
  EXPECT_THAT(Support(params, {1.0f, 4.0f, 2.0f, 4.0f, 2.0f, 0.0f}), ElementsAre(1, 2, 3));
}

TEST(SamplerTest, TopPKeepsTheSmallestSetHoldingP) {
  // Sorted: 0.4 (t2), 0.3 (t0), 0.2 (t3), 0.1 (t1). Cumulative before each
  // token: 0, 0.4, 0.7, 0.9.
  const std::vector<float> logits = LogitsOf({0.3, 0.1, 0.4, 0.2});
  SamplingParams params;
  params.top_p = 0.35f;  // t2 alone holds 0.4
  EXPECT_THAT(Support(params, logits), ElementsAre(2));
  params.top_p = 0.5f;  // t2 + t0 hold 0.7
  EXPECT_THAT(Support(params, logits), ElementsAre(0, 2));
  params.top_p = 0.75f;  // 0.7 is short of 0.75: t3 joins
  EXPECT_THAT(Support(params, logits), ElementsAre(0, 2, 3));
  params.top_p = 0.95f;
  EXPECT_THAT(Support(params, logits), ElementsAre(0, 1, 2, 3));
}

TEST(SamplerTest, TopPAppliesAfterTemperature) {
  // At temperature 0.5 the probabilities are proportional to p²: 0.09, 0.01,
  // 0.16, 0.04 over 0.30, i.e. t2 0.533, t0 0.3, t3 0.133, t1 0.033.
  SamplingParams params;
  params.temperature = 0.5f;
  params.top_p = 0.8f;  // 0.533 + 0.3 = 0.833 suffices; at temperature 1 it would not
  EXPECT_THAT(Support(params, LogitsOf({0.3, 0.1, 0.4, 0.2})), ElementsAre(0, 2));
}

TEST(SamplerTest, MinPDropsTokensBelowAFractionOfTheMostLikely) {
  // Relative to the most likely (0.4): 0.75, 0.25, 1, 0.5.
  const std::vector<float> logits = LogitsOf({0.3, 0.1, 0.4, 0.2});
  SamplingParams params;
  params.min_p = 0.3f;
  EXPECT_THAT(Support(params, logits), ElementsAre(0, 2, 3));
  params.min_p = 0.6f;
  EXPECT_THAT(Support(params, logits), ElementsAre(0, 2));
  params.min_p = 1.0f;
  EXPECT_THAT(Support(params, logits), ElementsAre(2));
}

TEST(SamplerTest, TruncationsCompose) {
  // top_k 3 keeps t2, t0, t3; top_p 0.5 then keeps t2 and t0 (0.4/0.9 short
  // of 0.5, 0.7/0.9 enough); min_p 0.8 keeps only t2 (t0 is 0.75 of it).
  SamplingParams params;
  params.top_k = 3;
  params.top_p = 0.5f;
  const std::vector<float> logits = LogitsOf({0.3, 0.1, 0.4, 0.2});
  EXPECT_THAT(Support(params, logits), ElementsAre(0, 2));
  params.min_p = 0.8f;
  EXPECT_THAT(Support(params, logits), ElementsAre(2));
}

TEST(SamplerTest, MaskedTokensAreNeverDrawn) {
  EXPECT_THAT(Support(SamplingParams{}, {-INFINITY, 0.0f, NAN, 0.0f, -INFINITY}), ElementsAre(1, 3));
}

TEST(SamplerTest, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams params = Greedy();
  params.repetition_penalty = 2.0f;
  Sampler sampler = MakeSampler(params);
  // Token 0 seen: 3 -> 1.5, below token 1's 2.
  EXPECT_EQ(sampler.Sample({3.0f, 2.0f}, {0}), 1);
  // Token 0 seen: -1 -> -2, below token 1's -1.5.
  EXPECT_EQ(sampler.Sample({-1.0f, -1.5f}, {0}), 1);
  // Seen three times, penalized once: 3.9 -> 1.95, still above 1.9.
  EXPECT_EQ(sampler.Sample({3.9f, 1.9f}, {0, 0, 0}), 0);
  // Ids outside the vocabulary are ignored.
  EXPECT_EQ(sampler.Sample({3.0f, 2.0f}, {-1, 7}), 0);
}

TEST(SamplerTest, PresenceAndFrequencyPenaltiesSubtractFromSeenLogits) {
  SamplingParams params = Greedy();
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.25f;
  Sampler sampler = MakeSampler(params);
  // Token 0 seen twice: 2 - 0.5 - 2 × 0.25 = 1.0; token 1 seen once:
  // 1.6 - 0.5 - 0.25 = 0.85; token 2 unseen: 0.9.
  EXPECT_EQ(sampler.Sample({2.0f, 1.6f, 0.9f}, {0, 1, 0}), 0);
  // Same, with token 0 at 1.8: 0.8 < 0.9.
  EXPECT_EQ(sampler.Sample({1.8f, 1.6f, 0.9f}, {0, 1, 0}), 2);
}

TEST(SamplerTest, PenaltiesComposeInLlamaCppOrder) {
  // Repetition first, then presence and frequency: (4 / 2) - 0.5 - 2 × 0.25
  // = 1.0 against token 1's 1.1. The other order, (4 - 1) / 2 = 1.5, would
  // keep token 0.
  SamplingParams params = Greedy();
  params.repetition_penalty = 2.0f;
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.25f;
  EXPECT_EQ(MakeSampler(params).Sample({4.0f, 1.1f}, {0, 0}), 1);
}

TEST(SamplerTest, SameSeedGivesTheSameDraws) {
  const std::vector<float> logits(1000, 0.0f);
  EXPECT_EQ(Draws(42, logits, 64), Draws(42, logits, 64));
  EXPECT_NE(Draws(42, logits, 64), Draws(43, logits, 64));
}

// Pins the conversion from mt19937_64 outputs (a sequence the C++ standard
// fixes) to draws, so that changing it, and with it every seeded output, is
// deliberate: uniform over 1024 tokens, each draw is the top 10 bits of one
// output.
TEST(SamplerTest, DrawsArePinnedToTheStandardEngine) {
  const std::vector<float> uniform(1024, 0.0f);
  std::mt19937_64 engine(5489);
  std::vector<int32_t> expected;
  for (int i = 0; i < 8; ++i) expected.push_back(static_cast<int32_t>(engine() >> 54));
  EXPECT_EQ(Draws(5489, uniform, 8), expected);
}

TEST(SamplerTest, DrawFrequenciesFollowTheDistribution) {
  const std::vector<double> probabilities = {0.5, 0.25, 0.15, 0.1};
  const std::vector<float> logits = LogitsOf(probabilities);
  constexpr int kDraws = 40000;
  std::vector<int> counts(probabilities.size(), 0);
  SamplingParams params;
  params.seed = 1234;
  Sampler sampler = MakeSampler(params);
  for (int i = 0; i < kDraws; ++i) ++counts[sampler.Sample(logits, {})];
  double chi_square = 0;
  for (size_t token = 0; token < probabilities.size(); ++token) {
    const double expected = kDraws * probabilities[token];
    chi_square += (counts[token] - expected) * (counts[token] - expected) / expected;
  }
  // The 99.9th percentile of chi-square with 3 degrees of freedom.
  EXPECT_LT(chi_square, 16.27) << counts[0] << " " << counts[1] << " " << counts[2] << " " << counts[3];
}

TEST(SamplerTest, TemperatureSharpensTheDistribution) {
  // At temperature 0.5, probabilities 0.75 / 0.25 become 0.9 / 0.1.
  const std::vector<float> logits = LogitsOf({0.75, 0.25});
  SamplingParams params;
  params.temperature = 0.5f;
  params.seed = 99;
  Sampler sampler = MakeSampler(params);
  constexpr int kDraws = 20000;
  int first = 0;
  for (int i = 0; i < kDraws; ++i) first += sampler.Sample(logits, {}) == 0 ? 1 : 0;
  // Five standard deviations (sqrt(20000 × 0.9 × 0.1) ≈ 42).
  EXPECT_NEAR(first, 0.9 * kDraws, 5 * 42);
}

// Speculative decoding's rejection sampling against a one-hot draft: over
// many seeds the tokens fall as Sample's distribution says, whether the
// draft is the likeliest token, an unlikely one, or one top-k has dropped.
// Pearson's chi-square with 3 degrees of freedom stays under 16.27 (p =
// 0.001); the seeds are fixed, so the test cannot flicker.
double ChiSquare(const std::vector<int>& counts, const std::vector<double>& probabilities, int draws) {
  double statistic = 0;
  for (size_t token = 0; token < counts.size(); ++token) {
    const double expected = probabilities[token] * draws;
    if (expected == 0) {
      EXPECT_EQ(counts[token], 0) << "token " << token << " has probability 0";
      continue;
    }
    statistic += (counts[token] - expected) * (counts[token] - expected) / expected;
  }
  return statistic;
}

TEST(SamplerTest, RejectionSamplingAgainstADraftKeepsTheDistribution) {
  const std::vector<float> logits = {1.0f, 0.5f, 0.0f, -1.0f};
  double total = 0;
  std::vector<double> p;
  for (float logit : logits) total += std::exp(static_cast<double>(logit));
  for (float logit : logits) p.push_back(std::exp(static_cast<double>(logit)) / total);
  constexpr int kDraws = 20000;
  for (int32_t draft : {0, 3}) {
    std::vector<int> counts(4, 0);
    int kept = 0;
    for (int seed = 0; seed < kDraws; ++seed) {
      SamplingParams params;
      params.seed = static_cast<uint64_t>(seed);
      absl::StatusOr<Sampler> sampler = Sampler::Create(params);
      ASSERT_TRUE(sampler.ok());
      const int32_t token = sampler->SampleAgainstDraft(logits, {}, draft);
      ++counts[token];
      kept += token == draft;
    }
    EXPECT_LT(ChiSquare(counts, p, kDraws), 16.27) << "draft " << draft;
    // The draft comes out as often as the model picks it, no more.
    EXPECT_NEAR(static_cast<double>(kept) / kDraws, p[draft], 0.01) << "draft " << draft;
  }
  // With top-k 2 the draft 3 is never kept, and the two kept tokens share
  // everything.
  std::vector<int> counts(4, 0);
  for (int seed = 0; seed < kDraws; ++seed) {
    SamplingParams params;
    params.seed = static_cast<uint64_t>(seed);
    params.top_k = 2;
    absl::StatusOr<Sampler> sampler = Sampler::Create(params);
    ASSERT_TRUE(sampler.ok());
    ++counts[sampler->SampleAgainstDraft(logits, {}, 3)];
  }
  const double top_two = p[0] + p[1];
  // Two tokens can come out: one degree of freedom, 10.83 at p = 0.001.
  EXPECT_LT(ChiSquare(counts, {p[0] / top_two, p[1] / top_two, 0, 0}, kDraws), 10.83);
}

TEST(SamplerTest, GreedyVerificationPicksWhatSamplePicks) {
  SamplingParams params;
  params.temperature = 0;
  params.repetition_penalty = 1.3f;
  absl::StatusOr<Sampler> sampler = Sampler::Create(params);
  ASSERT_TRUE(sampler.ok());
  const std::vector<float> logits = {2.0f, 2.5f, 1.0f};
  const std::vector<int32_t> seen = {1};
  for (int32_t draft : {0, 1, 2}) {
    EXPECT_EQ(sampler->SampleAgainstDraft(logits, seen, draft), sampler->Sample(logits, seen));
  }
}

// Allowed-token bitmasks as a grammar gives them: 40 tokens, two words.
TEST(SamplerTest, AllowedTokensLeaveOnlyThoseTokens) {
  std::vector<float> logits(40, 0.0f);
  logits[0] = 5.0f;  // the most likely token, not allowed
  logits[33] = 1.0f;
  const std::vector<uint32_t> allowed = {(1u << 2) | (1u << 31), 1u << 1};  // tokens 2, 31, 33
  Sampler greedy = MakeSampler(Greedy());
  EXPECT_EQ(greedy.Sample(logits, {}, allowed), 33);
  SamplingParams params;
  params.seed = 7;
  Sampler sampler = MakeSampler(params);
  std::set<int32_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(sampler.Sample(logits, {}, allowed));
  EXPECT_THAT(seen, ElementsAre(2, 31, 33));
  // Tokens past the mask's words are not allowed.
  const std::vector<uint32_t> first_word = {1u << 5};
  EXPECT_EQ(greedy.Sample(logits, {}, first_word), 5);
}

TEST(SamplerTest, WithoutAFiniteAllowedLogitTheLowestAllowedIdIsTaken) {
  const std::vector<float> logits = {1.0f, -INFINITY, NAN, -INFINITY};
  const std::vector<uint32_t> allowed = {(1u << 2) | (1u << 3)};
  EXPECT_EQ(MakeSampler(Greedy()).Sample(logits, {}, allowed), 2);
  EXPECT_EQ(MakeSampler(SamplingParams{}).Sample(logits, {}, allowed), 2);
}

TEST(SamplerTest, ADraftTheGrammarDoesNotAllowIsNeverKept) {
  const std::vector<float> logits = {3.0f, 0.0f, 0.0f};
  const std::vector<uint32_t> allowed = {(1u << 1) | (1u << 2)};
  SamplingParams params;
  params.seed = 11;
  Sampler sampler = MakeSampler(params);
  for (int i = 0; i < 500; ++i) EXPECT_NE(sampler.SampleAgainstDraft(logits, {}, 0, allowed), 0);
  EXPECT_EQ(MakeSampler(Greedy()).SampleAgainstDraft(logits, {}, 0, allowed), 1);
}

}  // namespace
}  // namespace kvjit::sampling
