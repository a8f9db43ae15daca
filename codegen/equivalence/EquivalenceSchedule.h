#ifndef KVJIT_CODEGEN_VERIFIER_VERIFIERSCHEDULE_H_
#define KVJIT_CODEGEN_VERIFIER_VERIFIERSCHEDULE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ir/Reference/ReferenceEvaluator.h"
#include "runtime/exec/StepRunner.h"

namespace kvjit::codegen {

// Where a logits row of a step comes from: sequence `sequence`, token
// `position` of it.
struct RowOrigin {
  int sequence;
  int64_t position;
};

struct ScheduledStep {
  std::string description;  // "chunked prefill of A (4 tokens) + prefill of B (5)"
  runtime::StepInputs inputs;
  // One per logits row: every new token of the step gives one.
  std::vector<RowOrigin> rows;
};

// The steps --verify runs: seeded token sequences through a prefill, a
// chunked prefill beside a second sequence's prefill, and decode steps of
// both in either order, in KV blocks handed out in a scrambled order so that
// no block table is the identity and a sequence crosses a block boundary.
struct EquivalenceSchedule {
  std::vector<std::vector<int32_t>> sequences;
  std::vector<ScheduledStep> steps;
  int64_t num_blocks = 0;  // the KV pool the steps need
};

EquivalenceSchedule MakeEquivalenceSchedule(int64_t vocab_size, int64_t block_size);

// The logits of every token of every sequence, [length, vocab] each, from
// `function(tokens, positions)` (a whole-sequence function) evaluated once
// per sequence: causal attention makes row p depend on tokens 0..p alone, so
// one evaluation of the whole sequence gives every step's expected rows.
absl::StatusOr<std::vector<reference::RefTensor>> EvaluateSequences(
    reference::ReferenceEvaluator& evaluator, const std::string& function,
    const EquivalenceSchedule& schedule);

// The rows of `step` taken from per-sequence logits (EvaluateSequences'),
// row after row as the step's logits are laid out.
std::vector<float> RowsOfStep(const std::vector<reference::RefTensor>& sequence_logits,
                              const ScheduledStep& step);

// Runs `step` through the reference evaluator's `function`, a step function
// (insert-kv-cache's signature) over the evaluator's cache.
absl::StatusOr<reference::RefTensor> EvaluateStep(reference::ReferenceEvaluator& evaluator,
                                                  const std::string& function,
                                                  const ScheduledStep& step);

}  // namespace kvjit::codegen

#endif  // KVJIT_CODEGEN_VERIFIER_VERIFIERSCHEDULE_H_
