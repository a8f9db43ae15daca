#ifndef KVJIT_RUNTIME_CUDA_STEPVALIDATION_H_
#define KVJIT_RUNTIME_CUDA_STEPVALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "runtime/exec/StepInputs.h"

namespace kvjit::cuda {

// What a runner's device buffers and pool hold.
struct StepLimits {
  int64_t max_tokens = 0;   // tokens per step (the program's)
  int64_t max_columns = 0;  // block-table columns the input buffer holds
  int64_t vocab_size = 0;
  int64_t num_blocks = 0;
  int64_t block_size = 0;
};

// Checks a step on the host before it reaches kernels that trust it (a GPU
// kernel does not bounds-check an index): sizes that agree with each other
// and fit the device buffers; token ids within the vocabulary; sequence
// starts from 0 to T, never decreasing; every slot, and every block a
// sequence's context covers, inside the pool; each position inside its
// sequence's context; logits rows among the step's tokens. The CPU kernels
// make the same checks as they run.
absl::Status ValidateStep(const runtime::StepInputs& inputs, const StepLimits& limits);

}  // namespace kvjit::cuda

#endif  // KVJIT_RUNTIME_CUDA_STEPVALIDATION_H_
