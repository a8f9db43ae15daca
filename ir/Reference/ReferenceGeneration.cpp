#include "ir/Reference/ReferenceGeneration.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "runtime/core/StatusMacros.h"

namespace kvjit::reference {

absl::StatusOr<RefTensor> EvaluateLogits(ReferenceEvaluator& evaluator, absl::string_view function,
                                         absl::Span<const int32_t> tokens) {
  if (tokens.empty()) return absl::InvalidArgumentError("cannot evaluate an empty sequence");
  const int64_t count = static_cast<int64_t>(tokens.size());
  std::vector<int32_t> positions(tokens.size());
  std::iota(positions.begin(), positions.end(), 0);
  std::vector<RefTensor> arguments;
  arguments.push_back(RefTensor::Int({count}, std::vector<int32_t>(tokens.begin(), tokens.end())));
  arguments.push_back(RefTensor::Int({count}, std::move(positions)));
  KVJIT_ASSIGN_OR_RETURN(std::vector<RefTensor> results,
                         evaluator.Run(function, std::move(arguments)));
  if (results.size() != 1 || results[0].shape.size() != 2 || results[0].shape[0] != count) {
    return absl::InvalidArgumentError(
        absl::StrCat("@", function, " must return one [tokens, vocab] tensor of logits"));
  }
  return std::move(results[0]);
}

absl::StatusOr<std::vector<int32_t>> GenerateGreedy(ReferenceEvaluator& evaluator,
                                                    absl::string_view function,
                                                    absl::Span<const int32_t> prompt,
                                                    const GreedyOptions& options) {
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());
  std::vector<int32_t> generated;
  for (int64_t step = 0; step < options.max_new_tokens; ++step) {
    KVJIT_ASSIGN_OR_RETURN(RefTensor logits, EvaluateLogits(evaluator, function, sequence));
    const int64_t vocab = logits.shape[1];
    auto last_row = logits.values.begin() + (logits.shape[0] - 1) * vocab;
    if (options.on_logits) options.on_logits(absl::MakeConstSpan(&*last_row, vocab));
    const int32_t next =
        static_cast<int32_t>(std::max_element(last_row, last_row + vocab) - last_row);
    sequence.push_back(next);
    generated.push_back(next);
    if (options.on_token) options.on_token(next);
    if (options.is_stop_token && options.is_stop_token(next)) break;
  }
  return generated;
}

}  // namespace kvjit::reference
