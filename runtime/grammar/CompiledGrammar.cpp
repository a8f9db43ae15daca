#include <optional>
#include <utility>
#include <vector>

#include "runtime/grammar/CompiledGrammarState.h"
#include "runtime/grammar/GrammarCompiler.h"

namespace kvjit::grammar {

CompiledGrammar::CompiledGrammar(std::unique_ptr<Compiled> compiled)
    : compiled_(std::move(compiled)) {}
CompiledGrammar::~CompiledGrammar() = default;

int32_t CompiledGrammar::bitmask_words() const {
  return xgrammar::GetBitmaskSize(compiled_->vocab_size);
}

GrammarMatcher CompiledGrammar::NewMatcher(absl::Span<const int32_t> stop_token_ids) const {
  // Rollback is never asked for: only the tokens a sequence keeps are
  // accepted, never its drafts. Without stop tokens xgrammar ends at the
  // grammar's end instead of allowing one there.
  const bool without_stop_tokens = stop_token_ids.empty();
  std::optional<std::vector<int>> stops;
  if (!without_stop_tokens) stops.emplace(stop_token_ids.begin(), stop_token_ids.end());
  xgrammar::GrammarMatcher matcher(compiled_->grammar, std::move(stops), without_stop_tokens,
                                   /*max_rollback_tokens=*/0);
  return GrammarMatcher(std::make_unique<GrammarMatcher::State>(std::move(matcher),
                                                                compiled_->vocab_size));
}

}  // namespace kvjit::grammar
