// A sequence that releases the blocks behind its sliding window after every
// step, as the Generator does, never holds more blocks than
// kv::BlocksForWindowedSequence says (what `kvjit run --kv_pool_mib` sizes
// such a run by), and holds that many for some alignment of its steps.

#include <algorithm>
#include <cstdint>

#include "gtest/gtest.h"
#include "runtime/generation/StepBuilder.h"
#include "runtime/kv/KvBlockManager.h"

namespace kvjit::runtime {
namespace {

constexpr kv::SequenceId kSequence = 0;

// The most blocks held while `prompt_tokens` go in steps of
// `tokens_per_step` and then `new_tokens` one by one.
int32_t PeakBlocks(int64_t prompt_tokens, int64_t new_tokens, int64_t tokens_per_step,
                   int64_t window, int32_t block_size) {
  auto blocks = kv::KvBlockManager::Create(4096, block_size);
  EXPECT_TRUE(blocks.ok()) << blocks.status();
  auto step = [&](int64_t count) {
    EXPECT_TRUE(blocks->Reserve(kSequence, count).ok());
    EXPECT_TRUE(ReleaseBehindWindow(*blocks, kSequence, window).ok());
  };
  for (int64_t done = 0; done < prompt_tokens; done += tokens_per_step) {
    step(std::min(tokens_per_step, prompt_tokens - done));
  }
  for (int64_t token = 0; token < new_tokens; ++token) step(1);
  return blocks->counters().peak_blocks_in_use;
}

TEST(ReleaseBehindWindowTest, PeakBlocksStayWithinTheWindowedBound) {
  for (int32_t block_size : {1, 4, 16}) {
    for (int64_t window : {1, 5, 8, 16, 33}) {
      for (int64_t tokens_per_step : {1, 3, 16, 40}) {
        for (int64_t prompt_tokens : {1, 7, 40}) {
          const int64_t bound =
              kv::BlocksForWindowedSequence(prompt_tokens, tokens_per_step, window, block_size);
          int32_t worst = 0;
          for (int64_t new_tokens : {1, 2, 17, 100}) {
            const int32_t peak =
                PeakBlocks(prompt_tokens, new_tokens, tokens_per_step, window, block_size);
            EXPECT_LE(peak, bound) << "block size " << block_size << ", window " << window
                                   << ", steps of " << tokens_per_step << ", prompt "
                                   << prompt_tokens << ", new tokens " << new_tokens;
            worst = std::max(worst, peak);
          }
          // The bound is reached, within a block of alignment, by the
          // longest run.
          EXPECT_GE(worst + 1, bound) << "block size " << block_size << ", window " << window
                                      << ", steps of " << tokens_per_step << ", prompt "
                                      << prompt_tokens;
        }
      }
    }
  }
}

// The lit case's run (tests/lit/Tools/kvjit-sliding-window.test): 6 prompt
// tokens and 59 new ones over a window of 8 in blocks of 16 hold 2 blocks
// at most, the 4 a run without the window fills.
TEST(ReleaseBehindWindowTest, TheSlidingWindowRunNeedsTwoBlocksOfFour) {
  EXPECT_EQ(PeakBlocks(6, 59, 256, 8, 16), 2);
  EXPECT_EQ(kv::BlocksForWindowedSequence(6, 256, 8, 16), 2);
  EXPECT_EQ(kv::BlocksForForkedSequences(6, 59, 1, 16), 4);
}

}  // namespace
}  // namespace kvjit::runtime
