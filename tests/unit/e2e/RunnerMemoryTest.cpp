// The CPU runner's memory is paid for as it is used: a KV pool or an arena
// sized for the largest run is resident only where a step wrote.

#include <memory>

#include "gtest/gtest.h"
#include "runtime/cpu/CpuStepRunner.h"
#include "tests/unit/e2e/CompiledStoriesFixture.h"

namespace kvjit {
namespace {

using RunnerMemoryTest = CompiledStoriesTest;

// One sequence's step of `tokens` tokens from position `first`, its cache in
// block `block` (and the next ones).
runtime::StepInputs StepInBlock(int64_t block, int64_t first, int64_t tokens, int64_t block_size) {
  runtime::StepInputs step;
  const int64_t last = first + tokens;
  step.max_blocks = (last + block_size - 1) / block_size;
  for (int64_t b = 0; b < step.max_blocks; ++b) step.block_tables().push_back(static_cast<int32_t>(block + b));
  for (int64_t p = first; p < last; ++p) {
    step.tokens().push_back(static_cast<int32_t>(1 + p % 100));
    step.positions().push_back(static_cast<int32_t>(p));
    step.slot_mapping().push_back(static_cast<int32_t>((block + p / block_size) * block_size + p % block_size));
  }
  step.seq_starts() = {0, static_cast<int32_t>(tokens)};
  step.context_lens() = {static_cast<int32_t>(last)};
  step.logits_rows() = {static_cast<int32_t>(tokens - 1)};
  return step;
}

TEST_F(RunnerMemoryTest, TheKvPoolIsResidentForTheBlocksWrittenNotForItsSize) {
  const int64_t block_bytes = executable_->kv_layout().bytes_per_block();
  const int64_t block_size = executable_->kv_layout().block_size();
  auto created = runtime::CpuStepRunner::Create(*executable_, /*num_blocks=*/4096, /*threads=*/1);
  ASSERT_TRUE(created.ok()) << created.status();
  runtime::CpuStepRunner& runner = **created;
  const runtime::RunnerMemory fresh = runner.Memory();
  EXPECT_EQ(fresh.kv_pool_bytes, static_cast<uint64_t>(4096 * block_bytes));
  EXPECT_EQ(fresh.kv_pool_resident, 0u);
  EXPECT_EQ(fresh.arena_resident, 0u);

  // Three blocks' worth of tokens, written into blocks 2000..2002.
  ASSERT_TRUE(runner.Run(StepInBlock(2000, 0, 3 * block_size, block_size)).ok());
  const runtime::RunnerMemory after = runner.Memory();
  constexpr uint64_t kPage = 4096;
  EXPECT_GE(after.kv_pool_resident, static_cast<uint64_t>(3 * block_bytes));
  EXPECT_LE(after.kv_pool_resident, static_cast<uint64_t>(3 * block_bytes) + 2 * kPage);
  // The arena: what a 48-token step touches, below the arena planned for
  // 64 tokens with 64 logits rows.
  EXPECT_GT(after.arena_resident, 0u);
  EXPECT_LT(after.arena_resident, after.arena_bytes);

  // Decoding on in the same blocks adds nothing; a block further on adds one.
  ASSERT_TRUE(runner.Run(StepInBlock(2000, 3 * block_size, 1, block_size)).ok());
  const uint64_t one_more_block = runner.Memory().kv_pool_resident - after.kv_pool_resident;
  EXPECT_GE(one_more_block, static_cast<uint64_t>(block_bytes) - kPage);
  EXPECT_LE(one_more_block, static_cast<uint64_t>(block_bytes) + 2 * kPage);
}

}  // namespace
}  // namespace kvjit
