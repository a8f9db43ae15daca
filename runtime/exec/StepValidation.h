#ifndef KVJIT_RUNTIME_EXEC_STEPVALIDATION_H_
#define KVJIT_RUNTIME_EXEC_STEPVALIDATION_H_

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "runtime/exec/StepInputs.h"

namespace kvjit::runtime {

// What a runner's buffers and pool hold.
struct StepLimits {
  int64_t max_tokens = 0;  // tokens per step (the program's)
  // Block-table columns a step may have: what the CUDA runner's input
  // buffer holds; the CPU runner reads the tables where they are.
  int64_t max_columns = std::numeric_limits<int64_t>::max();
  int64_t vocab_size = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
};

// Checks a step before any kernel runs it, the same on every runner (a GPU
// kernel does not bounds-check an index, and a CPU kernel that checks finds
// a bad step halfway through it): T, S and the block-table columns within
// `limits`, every input's size as the step contract's table gives it
// (CheckStepInputSizes); token ids within the vocabulary; sequence starts
// from 0 to T, never decreasing; every slot, and every block a sequence's
// context covers, inside the pool; each position inside its sequence's
// context; logits rows among the step's tokens.
absl::Status ValidateStep(const StepInputs& inputs, const StepLimits& limits);

}  // namespace kvjit::runtime

#endif  // KVJIT_RUNTIME_EXEC_STEPVALIDATION_H_
