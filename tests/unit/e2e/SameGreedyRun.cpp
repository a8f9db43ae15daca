#include "tests/unit/e2e/SameGreedyRun.h"

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "runtime/generation/Generator.h"
#include "tests/unit/common/NumericCompare.h"

namespace kvjit::testing {
namespace {

struct GreedyRun {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // every step's row, one after the other
};

GreedyRun RunGreedy(const runtime::Executable& executable, const std::vector<int32_t>& prompt,
                    int64_t new_tokens) {
  GreedyRun run;
  auto runner = runtime::CpuStepRunner::Create(executable, /*num_blocks=*/32, /*threads=*/2);
  EXPECT_TRUE(runner.ok()) << runner.status();
  if (!runner.ok()) return run;
  runtime::Generator generator(**runner, 8192);
  sampling::SamplingParams greedy;
  greedy.temperature = 0;
  auto result = generator.Generate(
      prompt, greedy, new_tokens, [](int32_t) { return true; },
      [&](absl::Span<const float> logits) { run.logits.insert(run.logits.end(), logits.begin(), logits.end()); });
  EXPECT_TRUE(result.ok()) << result.status();
  if (result.ok()) run.tokens = result->tokens;
  return run;
}

}  // namespace

void ExpectSameGreedyRun(const runtime::Executable& one, const runtime::Executable& other,
                         const std::vector<int32_t>& prompt, int64_t new_tokens) {
  const GreedyRun first = RunGreedy(one, prompt, new_tokens);
  const GreedyRun second = RunGreedy(other, prompt, new_tokens);
  EXPECT_EQ(first.tokens.size(), static_cast<size_t>(new_tokens));
  EXPECT_EQ(first.tokens, second.tokens);
  EXPECT_TRUE(AllEqual(first.logits, second.logits));
}

}  // namespace kvjit::testing
