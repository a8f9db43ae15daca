// Profiling the CPU runner times each instruction without changing what it
// computes.

#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/profile/StepProfiler.h"
#include "tests/unit/e2e/CompiledStoriesFixture.h"

namespace kvjit {
namespace {

using ProfiledRunnerTest = CompiledStoriesTest;

// One sequence in blocks 0.., tokens [first, first + count).
runtime::StepInputs Step(int64_t first, int64_t count, int64_t block_size) {
  runtime::StepInputs step;
  const int64_t last = first + count;
  step.max_blocks = (last + block_size - 1) / block_size;
  for (int64_t b = 0; b < step.max_blocks; ++b) step.block_tables().push_back(static_cast<int32_t>(b));
  for (int64_t p = first; p < last; ++p) {
    step.tokens().push_back(static_cast<int32_t>(1 + (7 * p) % 300));
    step.positions().push_back(static_cast<int32_t>(p));
    step.slot_mapping().push_back(static_cast<int32_t>(p));
  }
  step.seq_starts() = {0, static_cast<int32_t>(count)};
  step.context_lens() = {static_cast<int32_t>(last)};
  step.logits_rows() = {static_cast<int32_t>(count - 1)};
  return step;
}

std::vector<std::vector<float>> RunPrefillAndDecode(runtime::StepRunner& runner, int64_t block_size) {
  std::vector<std::vector<float>> logits;
  for (const runtime::StepInputs& step : {Step(0, 20, block_size), Step(20, 1, block_size)}) {
    auto result = runner.Run(step);
    EXPECT_TRUE(result.ok()) << result.status();
    if (!result.ok()) return logits;
    logits.emplace_back(result->begin(), result->end());
  }
  return logits;
}

TEST_F(ProfiledRunnerTest, TheLogitsAreTheUnprofiledRunnersBitForBit) {
  const int64_t block_size = executable_->kv_layout().block_size();
  auto plain = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/8, /*threads=*/2);
  auto profiled = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/8, /*threads=*/2);
  ASSERT_TRUE(plain.ok() && profiled.ok());
  runtime::StepProfiler profiler(executable_->root());
  ASSERT_TRUE((*profiled)->SetObserver(&profiler).ok());

  const auto expected = RunPrefillAndDecode(**plain, block_size);
  const auto observed = RunPrefillAndDecode(**profiled, block_size);
  ASSERT_EQ(observed.size(), 2u);
  EXPECT_EQ(observed, expected);

  const size_t instructions = executable_->program().instructions()->size();
  for (runtime::StepPhase phase : runtime::kStepPhases) {
    const runtime::PhaseProfile& profile = profiler.phase(phase);
    EXPECT_EQ(profile.steps, 1) << runtime::StepPhaseName(phase);
    ASSERT_EQ(profile.last_step.instruction_spans.size(), instructions);
    // Every instruction's span follows the previous one's.
    int64_t previous_end = 0;
    for (const auto& [start, end] : profile.last_step.instruction_spans) {
      EXPECT_GE(start, previous_end);
      EXPECT_GE(end, start);
      previous_end = end;
    }
    EXPECT_GT(profile.nanoseconds, 0);
  }
  EXPECT_EQ(profiler.phase(runtime::StepPhase::kPrefill).tokens, 20);

  // Detached, the runner reports no more steps.
  ASSERT_TRUE((*profiled)->SetObserver(nullptr).ok());
  ASSERT_TRUE((*profiled)->Run(Step(21, 1, block_size)).ok());
  EXPECT_EQ(profiler.phase(runtime::StepPhase::kDecode).steps, 1);
}

}  // namespace
}  // namespace kvjit
