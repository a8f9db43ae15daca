#include "tools/kvjit/PerplexityChunks.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/runtime/generation/FakeStepRunner.h"

namespace kvjit::cli {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kContextLength = 2048;

TEST(PlanChunksTest, ATextOfExactlyTwoChunksRuns) {
  absl::StatusOr<ChunkPlan> plan = PlanChunks("text", 1024, 512, -1, kContextLength);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->ctx, 512);
  EXPECT_EQ(plan->first, 256);
  EXPECT_EQ(plan->chunks, 2);
  EXPECT_EQ(plan->scored_per_chunk(), 255);
}

TEST(PlanChunksTest, ATextOneTokenShortOfTwoChunksIsRefused) {
  absl::StatusOr<ChunkPlan> plan = PlanChunks("GPL-3", 1023, 512, 1, kContextLength);
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(plan.status().message(),
              HasSubstr("GPL-3: 1023 tokens, where --ctx 512 needs at least 1024 (two chunks)"));
}

TEST(PlanChunksTest, WholeChunksOnlyAndAtMostThoseRequested) {
  EXPECT_EQ(PlanChunks("text", 5 * 100 + 99, 100, -1, kContextLength)->chunks, 5);
  EXPECT_EQ(PlanChunks("text", 5 * 100 + 99, 100, 3, kContextLength)->chunks, 3);
  EXPECT_EQ(PlanChunks("text", 5 * 100 + 99, 100, 9, kContextLength)->chunks, 5);
  // An odd context scores from its floor half.
  EXPECT_EQ(PlanChunks("text", 100, 7, -1, kContextLength)->first, 3);
}

TEST(PlanChunksTest, FlagsOutsideTheirRangeAreRefusedByName) {
  EXPECT_THAT(PlanChunks("text", 9999, 0, -1, kContextLength).status().message(),
              HasSubstr("--ctx 0: a chunk needs at least 3 tokens"));
  EXPECT_THAT(PlanChunks("text", 9999, 2, -1, kContextLength).status().message(),
              HasSubstr("--ctx 2"));
  EXPECT_TRUE(PlanChunks("text", 9999, 3, -1, kContextLength).ok());
  EXPECT_THAT(PlanChunks("text", 9999, 4096, -1, kContextLength).status().message(),
              HasSubstr("--ctx 4096 exceeds the model's context of 2048 tokens"));
  EXPECT_THAT(PlanChunks("text", 9999, 64, 0, kContextLength).status().message(),
              HasSubstr("--chunks 0: give a positive count"));
  EXPECT_THAT(PlanChunks("text", 9999, 64, -2, kContextLength).status().message(),
              HasSubstr("--chunks -2"));
}

TEST(ChunkInputTest, BosReplacesEachChunksFirstTokenWhereTheModelAddsIt) {
  const std::vector<int32_t> tokens = {1, 10, 11, 12, 13, 14, 15, 16};
  const ChunkPlan plan = *PlanChunks("text", 8, 4, -1, kContextLength);
  EXPECT_EQ(ChunkInput(tokens, plan, 0, 1), (std::vector<int32_t>{1, 10, 11, 12}));
  EXPECT_EQ(ChunkInput(tokens, plan, 1, 1), (std::vector<int32_t>{1, 14, 15, 16}));
  EXPECT_EQ(ChunkInput(tokens, plan, 1, std::nullopt), (std::vector<int32_t>{13, 14, 15, 16}));
}

// Each scored row is the model's distribution after the chunk's tokens up to
// its position, however many steps the chunk takes.
void ExpectRowsAreThePrefixesDistributions(int64_t max_tokens_per_step) {
  constexpr int64_t kVocab = 11, kBlockSize = 4, kCtx = 20;
  std::vector<int32_t> chunk;
  for (int32_t i = 0; i < kCtx; ++i) chunk.push_back((i * 7 + 3) % kVocab);
  testing::FakeStepRunner runner((kCtx - 1 + kBlockSize - 1) / kBlockSize, kBlockSize, kVocab,
                                 max_tokens_per_step);
  std::vector<int64_t> positions;
  for (int repeat = 0; repeat < 2; ++repeat) {  // a second chunk starts from an empty cache
    positions.clear();
    const absl::Status status = EvaluateChunk(
        runner, chunk, kCtx / 2, [&](int64_t position, absl::Span<const float> logits) {
          positions.push_back(position);
          const std::vector<float> expected = testing::FakeLogits(
              absl::MakeConstSpan(chunk).subspan(0, position + 1), kVocab);
          EXPECT_EQ(std::vector<float>(logits.begin(), logits.end()), expected) << position;
          return absl::OkStatus();
        });
    ASSERT_TRUE(status.ok()) << status;
  }
  std::vector<int64_t> expected_positions;
  for (int64_t p = kCtx / 2; p <= kCtx - 2; ++p) expected_positions.push_back(p);
  EXPECT_EQ(positions, expected_positions);
}

TEST(EvaluateChunkTest, OneStepPerHalf) { ExpectRowsAreThePrefixesDistributions(64); }

TEST(EvaluateChunkTest, ChunksLongerThanAStepArePrefilledInSeveral) {
  ExpectRowsAreThePrefixesDistributions(3);
}

TEST(EvaluateChunkTest, TheUnscoredHalfAsksForNoRowsAndTheLastTokenIsNotFed) {
  constexpr int64_t kVocab = 5, kBlockSize = 4, kCtx = 12;
  const std::vector<int32_t> chunk(kCtx, 2);
  testing::FakeStepRunner runner(3, kBlockSize, kVocab, 512);
  runner.RecordSteps();
  int64_t rows = 0;
  ASSERT_TRUE(EvaluateChunk(runner, chunk, kCtx / 2, [&](int64_t, absl::Span<const float>) {
                ++rows;
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(rows, kCtx - kCtx / 2 - 1);
  ASSERT_EQ(runner.recorded_steps().size(), 2u);
  EXPECT_EQ(runner.recorded_steps()[0].tokens(), kCtx / 2);
  EXPECT_EQ(runner.recorded_steps()[1].tokens(), kCtx - 1 - kCtx / 2);
}

TEST(EvaluateChunkTest, AnErrorFromTheRowCallbackStopsTheChunk) {
  testing::FakeStepRunner runner(3, 4, 5, 512);
  const absl::Status status =
      EvaluateChunk(runner, std::vector<int32_t>(12, 1), 6, [](int64_t, absl::Span<const float>) {
        return absl::DataLossError("disk full");
      });
  EXPECT_EQ(status.message(), "disk full");
}

}  // namespace
}  // namespace kvjit::cli
