#ifndef KVJIT_TESTS_UNIT_RUNTIME_DIST_PREFILLSTEP_H_
#define KVJIT_TESTS_UNIT_RUNTIME_DIST_PREFILLSTEP_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/exec/StepInputs.h"

namespace kvjit::runtime::dist {

// One sequence of `tokens.size()` new tokens from position 0 in block 0,
// the last producing logits: the step the protocol tests send.
inline StepInputs Prefill(std::vector<int32_t> tokens) {
  StepInputs inputs;
  const int32_t count = static_cast<int32_t>(tokens.size());
  inputs.max_blocks = 1;
  inputs.tokens() = std::move(tokens);
  for (int32_t t = 0; t < count; ++t) {
    inputs.positions().push_back(t);
    inputs.slot_mapping().push_back(t);
  }
  inputs.seq_starts() = {0, count};
  inputs.context_lens() = {count};
  inputs.block_tables() = {0};
  inputs.logits_rows() = {count - 1};
  return inputs;
}

}  // namespace kvjit::runtime::dist

#endif  // KVJIT_TESTS_UNIT_RUNTIME_DIST_PREFILLSTEP_H_
