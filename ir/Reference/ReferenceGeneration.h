#ifndef KVJIT_IR_REFERENCE_REFERENCEGENERATION_H_
#define KVJIT_IR_REFERENCE_REFERENCEGENERATION_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ir/Reference/ReferenceEvaluator.h"

namespace kvjit::reference {

struct GreedyOptions {
  int64_t max_new_tokens = 32;
  // Generation stops after a token for which this returns true (it is kept).
  std::function<bool(int32_t)> is_stop_token;
  // Called with each new token as soon as it is chosen.
  std::function<void(int32_t)> on_token;
  // Called with the last row of logits of every step, before the choice.
  std::function<void(absl::Span<const float>)> on_logits;
};

// Greedy decoding by full recomputation: every step evaluates
// `function(tokens, positions) -> logits[T, vocab]` on the whole sequence so
// far and appends the argmax of the last row (the lowest id on ties). No
// cache: the oracle that cached execution must reproduce.
absl::StatusOr<std::vector<int32_t>> GenerateGreedy(ReferenceEvaluator& evaluator,
                                                    absl::string_view function,
                                                    absl::Span<const int32_t> prompt,
                                                    const GreedyOptions& options);

// Logits of every position of `tokens` (positions 0..T-1), as [T, vocab].
absl::StatusOr<RefTensor> EvaluateLogits(ReferenceEvaluator& evaluator, absl::string_view function,
                                         absl::Span<const int32_t> tokens);

}  // namespace kvjit::reference

#endif  // KVJIT_IR_REFERENCE_REFERENCEGENERATION_H_
