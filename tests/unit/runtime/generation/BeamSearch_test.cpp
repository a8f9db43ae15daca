#include "runtime/generation/BeamSearch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/generation/Generator.h"
#include "runtime/kv/KvBlockManager.h"
#include "tests/unit/runtime/generation/FakeStepRunner.h"

namespace kvjit::runtime {
namespace {

using ::kvjit::testing::FakeLogits;
using ::kvjit::testing::FakeStepRunner;
using sampling::StopReason;
using ::testing::HasSubstr;

constexpr int64_t kVocab = 8;
constexpr int32_t kEos = 3;
constexpr int64_t kBlockSize = 4;
constexpr int64_t kContext = 64;

kv::KvBlockManager MakeManager(const StepRunner& runner) {
  absl::StatusOr<kv::KvBlockManager> manager = kv::KvBlockManager::Create(
      static_cast<int32_t>(runner.num_blocks()), static_cast<int32_t>(runner.block_size()));
  EXPECT_TRUE(manager.ok()) << manager.status();
  return *std::move(manager);
}

void ExpectAllBlocksFree(const kv::KvBlockManager& manager) {
  EXPECT_EQ(manager.num_free_blocks(), manager.num_blocks());
  EXPECT_EQ(manager.num_sequences(), 0);
}

std::vector<double> LogSoftmax(const std::vector<float>& logits) {
  double max_logit = -INFINITY;
  for (float logit : logits) max_logit = std::max<double>(max_logit, logit);
  double exp_sum = 0;
  for (float logit : logits) exp_sum += std::exp(logit - max_logit);
  std::vector<double> logprobs;
  for (float logit : logits) logprobs.push_back((logit - max_logit) - std::log(exp_sum));
  return logprobs;
}

double Score(double sum_logprobs, int64_t length, double length_penalty) {
  return sum_logprobs / std::pow(static_cast<double>(length), length_penalty);
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Hugging Face's beam search, written plainly: no cache, every beam's logits
// recomputed from its whole token list.
std::vector<BeamHypothesis> ReferenceBeamSearch(const std::vector<int32_t>& prompt,
                                                const BeamSearchParams& params,
                                                int64_t max_new_tokens) {
  struct Live {
    std::vector<int32_t> tokens;
    double sum;
  };
  struct Finished {
    BeamHypothesis hypothesis;
    int64_t order;
  };
  const int64_t k = params.num_beams;
  const int64_t candidates_per_step =
      std::max<int64_t>(2, 1 + static_cast<int64_t>(params.eos_token_ids.size())) * k;
  std::vector<Live> live = {{{}, 0}};
  std::vector<Finished> finished;
  int64_t finished_so_far = 0;
  auto add_finished = [&](std::vector<int32_t> tokens, double sum, StopReason reason) {
    const double score = Score(sum, static_cast<int64_t>(tokens.size()), params.length_penalty);
    auto worst = std::min_element(
        finished.begin(), finished.end(), [](const Finished& a, const Finished& b) {
          // Of equal worst ones HF deletes the earliest finished.
          return a.hypothesis.score != b.hypothesis.score ? a.hypothesis.score < b.hypothesis.score
                                                          : a.order < b.order;
        });
    if (static_cast<int64_t>(finished.size()) == k) {
      if (!(score > worst->hypothesis.score)) return;
      finished.erase(worst);
    }
    finished.push_back({{std::move(tokens), sum, score, reason}, finished_so_far++});
  };
  auto worst_finished = [&] {
    double worst = INFINITY;
    for (const Finished& f : finished) worst = std::min(worst, f.hypothesis.score);
    return worst;
  };
  for (int64_t step = 1; step <= max_new_tokens; ++step) {
    struct Candidate {
      double sum;
      int64_t beam;
      int32_t token;
    };
    std::vector<Candidate> candidates;
    for (int64_t b = 0; b < static_cast<int64_t>(live.size()); ++b) {
      const std::vector<double> logprobs =
          LogSoftmax(FakeLogits(Concat(prompt, live[b].tokens), kVocab));
      for (int32_t v = 0; v < kVocab; ++v) candidates.push_back({live[b].sum + logprobs[v], b, v});
    }
    std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      if (a.sum != b.sum) return a.sum > b.sum;
      if (a.beam != b.beam) return a.beam < b.beam;
      return a.token < b.token;
    });
    candidates.resize(std::min<int64_t>(candidates.size(), candidates_per_step));
    std::vector<Live> next;
    for (int64_t rank = 0; rank < static_cast<int64_t>(candidates.size()); ++rank) {
      const Candidate& c = candidates[rank];
      std::vector<int32_t> tokens = live[c.beam].tokens;
      tokens.push_back(c.token);
      if (std::find(params.eos_token_ids.begin(), params.eos_token_ids.end(), c.token) !=
          params.eos_token_ids.end()) {
        if (rank < k) add_finished(std::move(tokens), c.sum, StopReason::kEos);
        continue;
      }
      next.push_back({std::move(tokens), c.sum});
      if (static_cast<int64_t>(next.size()) == k) break;
    }
    live = std::move(next);
    if (live.empty()) break;
    if (static_cast<int64_t>(finished.size()) == k) {
      if (params.early_stopping == EarlyStopping::kWhenBeamsFinished) break;
      const int64_t length =
          params.early_stopping == EarlyStopping::kNever && params.length_penalty > 0
              ? max_new_tokens
              : step;
      if (worst_finished() >= Score(live[0].sum, length, params.length_penalty)) break;
    }
    if (step == max_new_tokens) {
      for (Live& beam : live) add_finished(std::move(beam.tokens), beam.sum, StopReason::kLength);
    }
  }
  std::sort(finished.begin(), finished.end(), [](const Finished& a, const Finished& b) {
    return a.hypothesis.score != b.hypothesis.score ? a.hypothesis.score > b.hypothesis.score
                                                    : a.order < b.order;
  });
  std::vector<BeamHypothesis> best;
  for (int64_t i = 0; i < std::min<int64_t>(finished.size(), params.num_return_sequences); ++i) {
    best.push_back(finished[i].hypothesis);
  }
  return best;
}

void ExpectSameHypotheses(const std::vector<BeamHypothesis>& actual,
                          const std::vector<BeamHypothesis>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("hypothesis ", i));
    EXPECT_EQ(actual[i].tokens, expected[i].tokens);
    EXPECT_NEAR(actual[i].sum_logprobs, expected[i].sum_logprobs, 1e-9);
    EXPECT_NEAR(actual[i].score, expected[i].score, 1e-9);
    EXPECT_EQ(actual[i].finish_reason, expected[i].finish_reason);
  }
}

BeamSearchParams Params(int32_t beams, int64_t max_new_tokens) {
  BeamSearchParams params;
  params.request_id = "request 7";
  params.num_beams = beams;
  params.num_return_sequences = beams;
  params.max_new_tokens = max_new_tokens;
  params.eos_token_ids = {kEos};
  return params;
}

// Three tokens per step, so that prefills are chunked and beams split over
// several runner calls per decode step.
FakeStepRunner MakeRunner(int64_t num_blocks = 256) {
  return FakeStepRunner(num_blocks, kBlockSize, kVocab, /*max_tokens_per_step=*/3);
}

TEST(BeamSearchTest, EqualsTheReferenceForEveryWidthPenaltyAndStoppingMode) {
  const std::vector<std::vector<int32_t>> prompts = {
      {5}, {1, 2, 4, 7, 0}, {6, 6, 1, 2}, {2, 2}, {3, 4, 5}};
  for (const std::vector<int32_t>& prompt : prompts) {
    for (int32_t beams : {1, 2, 3, 4, 7, 16}) {
      for (double length_penalty : {1.0, 0.0, 2.0, -1.0}) {
        for (EarlyStopping mode : {EarlyStopping::kWhenBeamsFinished, EarlyStopping::kHeuristic,
                                   EarlyStopping::kNever}) {
          SCOPED_TRACE(absl::StrCat("prompt of ", prompt.size(), ", ", beams, " beams, penalty ",
                                    length_penalty, ", mode ", static_cast<int>(mode)));
          FakeStepRunner runner = MakeRunner();
          kv::KvBlockManager blocks = MakeManager(runner);
          BeamSearchParams params = Params(beams, 8);
          params.length_penalty = length_penalty;
          params.early_stopping = mode;
          absl::StatusOr<BeamSearchResult> result =
              BeamSearch(runner, blocks, kContext).Search(prompt, params);
          ASSERT_TRUE(result.ok()) << result.status();
          ExpectSameHypotheses(result->hypotheses, ReferenceBeamSearch(prompt, params, 8));
          ExpectAllBlocksFree(blocks);
        }
      }
    }
  }
}

// The reference comparison above covers the three modes; here, that they
// differ: on this prompt each mode stops later than the one before and finds
// a better hypothesis.
TEST(BeamSearchTest, EarlyStoppingModesStopAtTheirOwnPoints) {
  std::vector<BeamSearchResult> results;
  for (EarlyStopping mode :
       {EarlyStopping::kWhenBeamsFinished, EarlyStopping::kHeuristic, EarlyStopping::kNever}) {
    FakeStepRunner runner = MakeRunner();
    BeamSearchParams params = Params(2, 12);
    params.num_return_sequences = 1;
    params.early_stopping = mode;
    absl::StatusOr<BeamSearchResult> result = BeamSearch(runner, kContext).Search({2, 2}, params);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->hypotheses.size(), 1u);
    results.push_back(*std::move(result));
  }
  for (int i = 1; i < 3; ++i) {
    SCOPED_TRACE(absl::StrCat("mode ", i));
    EXPECT_LT(results[i - 1].stats.decode_steps, results[i].stats.decode_steps);
    EXPECT_LE(results[i - 1].hypotheses[0].score, results[i].hypotheses[0].score);
  }
  EXPECT_LT(results[0].hypotheses[0].score, results[2].hypotheses[0].score);
}

TEST(BeamSearchTest, SeveralEndTokensWidenTheCandidatesAsInHuggingFace) {
  const std::vector<int32_t> prompt = {2, 0, 5, 1, 1, 4};
  for (int32_t beams : {1, 2, 5}) {
    SCOPED_TRACE(absl::StrCat(beams, " beams"));
    FakeStepRunner runner = MakeRunner();
    kv::KvBlockManager blocks = MakeManager(runner);
    BeamSearchParams params = Params(beams, 5);
    params.eos_token_ids = {kEos, 6};
    absl::StatusOr<BeamSearchResult> result =
        BeamSearch(runner, blocks, kContext).Search(prompt, params);
    ASSERT_TRUE(result.ok()) << result.status();
    ExpectSameHypotheses(result->hypotheses, ReferenceBeamSearch(prompt, params, 5));
    ExpectAllBlocksFree(blocks);
  }
}

TEST(BeamSearchTest, EnoughBeamsFindTheBestOfAllContinuations) {
  const std::vector<int32_t> prompt = {4, 1, 7};
  constexpr int64_t kSteps = 4;
  for (double length_penalty : {1.0, 0.5}) {
    SCOPED_TRACE(absl::StrCat("penalty ", length_penalty));
    // Every continuation: those that end at the end token and those that
    // reach kSteps tokens.
    double best_score = -INFINITY;
    std::vector<int32_t> best_tokens;
    std::vector<std::vector<int32_t>> open = {{}};
    std::vector<double> open_sums = {0};
    for (int64_t step = 1; step <= kSteps; ++step) {
      std::vector<std::vector<int32_t>> next;
      std::vector<double> next_sums;
      for (size_t i = 0; i < open.size(); ++i) {
        const std::vector<double> logprobs =
            LogSoftmax(FakeLogits(Concat(prompt, open[i]), kVocab));
        for (int32_t v = 0; v < kVocab; ++v) {
          std::vector<int32_t> tokens = Concat(open[i], {v});
          const double sum = open_sums[i] + logprobs[v];
          if (v == kEos || step == kSteps) {
            const double score = Score(sum, step, length_penalty);
            if (score > best_score) {
              best_score = score;
              best_tokens = tokens;
            }
          } else {
            next.push_back(std::move(tokens));
            next_sums.push_back(sum);
          }
        }
      }
      open = std::move(next);
      open_sums = std::move(next_sums);
    }
    FakeStepRunner runner = FakeStepRunner(/*num_blocks=*/9000, kBlockSize, kVocab,
                                           /*max_tokens_per_step=*/512);
    kv::KvBlockManager blocks = MakeManager(runner);
    BeamSearchParams params = Params(/*beams=*/8 * 8 * 8 * 8, kSteps);
    params.num_return_sequences = 1;
    params.length_penalty = length_penalty;
    absl::StatusOr<BeamSearchResult> result =
        BeamSearch(runner, blocks, kContext).Search(prompt, params);
    ASSERT_TRUE(result.ok()) << result.status();
    ASSERT_EQ(result->hypotheses.size(), 1u);
    EXPECT_EQ(result->hypotheses[0].tokens, best_tokens);
    EXPECT_NEAR(result->hypotheses[0].score, best_score, 1e-9);
    ExpectAllBlocksFree(blocks);
  }
}

TEST(BeamSearchTest, OneBeamIsGreedyDecoding) {
  for (const std::vector<int32_t>& prompt :
       std::vector<std::vector<int32_t>>{{1}, {0, 5, 2, 7, 7}}) {
    FakeStepRunner greedy_runner = MakeRunner();
    sampling::SamplingParams greedy;
    greedy.temperature = 0;
    absl::StatusOr<GenerationResult> expected =
        Generator(greedy_runner, kContext).Generate(prompt, greedy, 12, [](int32_t token) {
          return token != kEos;
        });
    ASSERT_TRUE(expected.ok()) << expected.status();
    for (EarlyStopping mode : {EarlyStopping::kWhenBeamsFinished, EarlyStopping::kHeuristic}) {
      for (double length_penalty : {1.0, -2.0, 3.0}) {
        SCOPED_TRACE(absl::StrCat("mode ", static_cast<int>(mode), ", penalty ", length_penalty));
        FakeStepRunner runner = MakeRunner();
        BeamSearchParams params = Params(1, 12);
        params.early_stopping = mode;
        params.length_penalty = length_penalty;
        absl::StatusOr<BeamSearchResult> result =
            BeamSearch(runner, kContext).Search(prompt, params);
        ASSERT_TRUE(result.ok()) << result.status();
        ASSERT_EQ(result->hypotheses.size(), 1u);
        EXPECT_EQ(result->hypotheses[0].tokens, expected->tokens);
      }
    }
  }
}

// A prompt whose most likely next token is the end token.
std::vector<int32_t> PromptEndingAtOnce() {
  for (int32_t first = 0; first < kVocab; ++first) {
    for (int32_t last = 0; last < kVocab; ++last) {
      const std::vector<int32_t> prompt = {first, 5, last};
      const std::vector<float> logits = FakeLogits(prompt, kVocab);
      if (std::max_element(logits.begin(), logits.end()) - logits.begin() == kEos) return prompt;
    }
  }
  ADD_FAILURE() << "no prompt of the fake model ends at once";
  return {1};
}

TEST(BeamSearchTest, AnEndTokenOnTheFirstStepFinishesOneBeam) {
  const std::vector<int32_t> prompt = PromptEndingAtOnce();
  FakeStepRunner runner = MakeRunner();
  kv::KvBlockManager blocks = MakeManager(runner);
  absl::StatusOr<BeamSearchResult> one =
      BeamSearch(runner, blocks, kContext).Search(prompt, Params(1, 8));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->hypotheses.size(), 1u);
  EXPECT_EQ(one->hypotheses[0].tokens, std::vector<int32_t>{kEos});
  EXPECT_EQ(one->hypotheses[0].finish_reason, StopReason::kEos);
  EXPECT_EQ(one->stats.decode_steps, 0);
  EXPECT_EQ(runner.steps(), 1);  // the prefill alone

  BeamSearchParams wider = Params(3, 8);
  absl::StatusOr<BeamSearchResult> three =
      BeamSearch(runner, blocks, kContext).Search(prompt, wider);
  ASSERT_TRUE(three.ok()) << three.status();
  ExpectSameHypotheses(three->hypotheses, ReferenceBeamSearch(prompt, wider, 8));
  ExpectAllBlocksFree(blocks);
}

TEST(BeamSearchTest, MoreBeamsThanTheVocabularyStartWithFewerLiveBeams) {
  const std::vector<int32_t> prompt = {3, 3, 1};
  for (int32_t beams : {9, 20, 100}) {
    SCOPED_TRACE(absl::StrCat(beams, " beams"));
    FakeStepRunner runner = MakeRunner(/*num_blocks=*/512);
    kv::KvBlockManager blocks = MakeManager(runner);
    BeamSearchParams params = Params(beams, 3);
    absl::StatusOr<BeamSearchResult> result =
        BeamSearch(runner, blocks, kContext).Search(prompt, params);
    ASSERT_TRUE(result.ok()) << result.status();
    const std::vector<BeamHypothesis> expected = ReferenceBeamSearch(prompt, params, 3);
    ExpectSameHypotheses(result->hypotheses, expected);
    // Fewer hypotheses than asked for exist: 7 × 7 × 8 of length 3 and the
    // ones that ended earlier.
    EXPECT_LE(result->hypotheses.size(), static_cast<size_t>(beams));
    ExpectAllBlocksFree(blocks);
  }
}

TEST(BeamSearchTest, APromptThatFillsTheContextLeavesOneToken) {
  FakeStepRunner runner = MakeRunner();
  kv::KvBlockManager blocks = MakeManager(runner);
  const std::vector<int32_t> full = {1, 2, 3, 4, 5, 6, 7, 0};
  absl::StatusOr<BeamSearchResult> too_long =
      BeamSearch(runner, blocks, /*context_length=*/8).Search(full, Params(2, 4));
  EXPECT_EQ(too_long.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(too_long.status().message(), HasSubstr("request 7"));
  EXPECT_THAT(too_long.status().message(), HasSubstr("context of 8"));

  const std::vector<int32_t> almost_full(full.begin(), full.end() - 1);
  BeamSearchParams params = Params(2, 4);
  absl::StatusOr<BeamSearchResult> result =
      BeamSearch(runner, blocks, /*context_length=*/8).Search(almost_full, params);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectSameHypotheses(result->hypotheses, ReferenceBeamSearch(almost_full, params, 1));
  for (const BeamHypothesis& hypothesis : result->hypotheses)
    EXPECT_EQ(hypothesis.tokens.size(), 1u);
  ExpectAllBlocksFree(blocks);
}

TEST(BeamSearchTest, CancellingFreesEveryBlock) {
  FakeStepRunner runner = MakeRunner();
  kv::KvBlockManager blocks = MakeManager(runner);
  std::vector<int64_t> seen;
  absl::StatusOr<BeamSearchResult> result =
      BeamSearch(runner, blocks, kContext)
          .Search({1, 2, 3, 4, 5, 6}, Params(4, 10), [&](int64_t generated) {
            seen.push_back(generated);
            return generated < 3;
          });
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(result.status().message(), HasSubstr("request 7"));
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 3}));
  ExpectAllBlocksFree(blocks);
}

TEST(BeamSearchTest, BeamsShareThePromptAndCopyOnlyTheBlocksTheyWriteInto) {
  FakeStepRunner runner = MakeRunner();
  kv::KvBlockManager blocks = MakeManager(runner);
  // 10 prompt tokens: two full blocks every beam shares, and a partly filled
  // one each beam copies when it first writes.
  const std::vector<int32_t> prompt = {1, 2, 4, 7, 0, 5, 5, 6, 1, 2};
  BeamSearchParams params = Params(4, 6);
  params.eos_token_ids = {};
  absl::StatusOr<BeamSearchResult> result =
      BeamSearch(runner, blocks, kContext).Search(prompt, params);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectSameHypotheses(result->hypotheses, ReferenceBeamSearch(prompt, params, 6));
  const BeamSearchStats& stats = result->stats;
  EXPECT_EQ(stats.prompt_tokens, 10);
  EXPECT_EQ(stats.decode_steps, 5);
  EXPECT_GT(stats.blocks_copied, 0);
  EXPECT_EQ(stats.blocks_copied, runner.copies());
  EXPECT_GE(stats.peak_blocks_shared, 2);
  // At most: 2 shared blocks + 4 beams × blocks 3 and 4 (15 tokens cached).
  EXPECT_LE(stats.peak_kv_blocks, 2 + 4 * 2);
  EXPECT_LT(stats.peak_kv_blocks, stats.peak_kv_blocks_unshared);
  ExpectAllBlocksFree(blocks);
}

TEST(BeamSearchTest, ARuntimeThatSkipsCopyOnWriteIsCaught) {
  FakeStepRunner runner = MakeRunner();
  runner.SkipCopies();
  kv::KvBlockManager blocks = MakeManager(runner);
  const std::vector<int32_t> prompt = {1, 2, 4, 7, 0, 5};
  BeamSearchParams params = Params(4, 6);
  absl::StatusOr<BeamSearchResult> result =
      BeamSearch(runner, blocks, kContext).Search(prompt, params);
  ASSERT_GT(runner.copies(), 0);
  if (result.ok()) {
    EXPECT_NE(result->hypotheses[0].tokens, ReferenceBeamSearch(prompt, params, 6)[0].tokens);
  } else {
    EXPECT_THAT(result.status().message(), HasSubstr("never written"));
  }
  ExpectAllBlocksFree(blocks);
}

TEST(BeamSearchTest, LeavesOtherSequencesOfASharedManagerAlone) {
  FakeStepRunner runner = MakeRunner();
  kv::KvBlockManager blocks = MakeManager(runner);
  ASSERT_TRUE(blocks.Reserve(/*sequence=*/0, 9).ok());
  ASSERT_TRUE(blocks.Reserve(/*sequence=*/1, 2).ok());
  const std::vector<kv::BlockId> before = blocks.FindSequence(0)->blocks;
  const std::vector<int32_t> prompt = {7, 1, 4};
  BeamSearchParams params = Params(3, 4);
  absl::StatusOr<BeamSearchResult> result =
      BeamSearch(runner, blocks, kContext).Search(prompt, params);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectSameHypotheses(result->hypotheses, ReferenceBeamSearch(prompt, params, 4));
  EXPECT_EQ(blocks.num_sequences(), 2);
  EXPECT_EQ(blocks.FindSequence(0)->blocks, before);
  EXPECT_EQ(blocks.num_free_blocks(), blocks.num_blocks() - 4);
}

TEST(BeamSearchTest, RejectsInvalidRequestsNamingThem) {
  FakeStepRunner runner = MakeRunner(/*num_blocks=*/8);
  kv::KvBlockManager blocks = MakeManager(runner);
  BeamSearch search(runner, blocks, kContext);
  auto error_of = [&](const std::vector<int32_t>& prompt, const BeamSearchParams& params) {
    return search.Search(prompt, params).status();
  };
  const std::vector<int32_t> prompt = {1, 2};
  struct Case {
    std::string name;
    BeamSearchParams params;
    std::vector<int32_t> prompt;
    absl::StatusCode code;
    std::string message;
  };
  std::vector<Case> cases;
  {
    BeamSearchParams p = Params(0, 4);
    p.num_return_sequences = 1;
    cases.push_back({"no beams", p, prompt, absl::StatusCode::kInvalidArgument, "num_beams is 0"});
  }
  {
    BeamSearchParams p = Params(2, 4);
    p.num_return_sequences = 3;
    cases.push_back({"too many returned", p, prompt, absl::StatusCode::kInvalidArgument,
                     "num_return_sequences is 3"});
    p.num_return_sequences = 0;
    cases.push_back({"none returned", p, prompt, absl::StatusCode::kInvalidArgument,
                     "num_return_sequences is 0"});
  }
  {
    BeamSearchParams p = Params(2, 0);
    cases.push_back(
        {"no new tokens", p, prompt, absl::StatusCode::kInvalidArgument, "max_new_tokens is 0"});
  }
  {
    BeamSearchParams p = Params(2, 4);
    p.length_penalty = NAN;
    cases.push_back(
        {"nan penalty", p, prompt, absl::StatusCode::kInvalidArgument, "length_penalty"});
    p.length_penalty = 1;
    p.eos_token_ids = {8};
    cases.push_back(
        {"eos outside", p, prompt, absl::StatusCode::kInvalidArgument, "end-of-sequence token 8"});
  }
  cases.push_back(
      {"empty prompt", Params(2, 4), {}, absl::StatusCode::kInvalidArgument, "no tokens"});
  cases.push_back({"prompt outside",
                   Params(2, 4),
                   {1, 9},
                   absl::StatusCode::kInvalidArgument,
                   "prompt token 1 is 9"});
  // 8 blocks of 4 tokens: 16 beams of up to 2 + 9 tokens do not fit.
  cases.push_back({"pool too small", Params(16, 10), prompt, absl::StatusCode::kResourceExhausted,
                   "16 beams of up to 11 cached tokens may need 48 KV blocks"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const absl::Status status = error_of(c.prompt, c.params);
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_THAT(status.message(), HasSubstr("request 7: "));
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
  ExpectAllBlocksFree(blocks);
}

TEST(BeamSearchTest, ParsesHuggingFaceEarlyStoppingValues) {
  EXPECT_EQ(*ParseEarlyStopping("true"), EarlyStopping::kWhenBeamsFinished);
  EXPECT_EQ(*ParseEarlyStopping("false"), EarlyStopping::kHeuristic);
  EXPECT_EQ(*ParseEarlyStopping("never"), EarlyStopping::kNever);
  EXPECT_EQ(ParseEarlyStopping("sometimes").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvjit::runtime
