#ifndef KVJIT_TESTS_UNIT_E2E_SAMEGREEDYRUN_H_
#define KVJIT_TESTS_UNIT_E2E_SAMEGREEDYRUN_H_

#include <cstdint>
#include <vector>

#include "runtime/exec/Executable.h"

namespace kvjit::testing {

// Greedy runs of `new_tokens` after `prompt` on the CPU, one per executable,
// give all `new_tokens` ids, the same ids, and every step's logits equal bit
// for bit: what a pass that only rearranges work (fusing projections,
// laying weights out) must keep. The prompt is one prefill step of several
// tokens, the rest decode steps of one.
void ExpectSameGreedyRun(const runtime::Executable& one, const runtime::Executable& other,
                         const std::vector<int32_t>& prompt, int64_t new_tokens);

}  // namespace kvjit::testing

#endif  // KVJIT_TESTS_UNIT_E2E_SAMEGREEDYRUN_H_
