#ifndef KVJIT_RUNTIME_GRAMMAR_GRAMMARMATCHER_H_
#define KVJIT_RUNTIME_GRAMMAR_GRAMMARMATCHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kvjit::grammar {

class CompiledGrammar;

// One sequence's place in a compiled grammar: which tokens may come next,
// moved on by each token the sequence takes. Not thread-safe; the scheduler
// prepares the next mask on another thread only while nothing else touches
// the matcher.
class GrammarMatcher {
 public:
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // Computes the tokens allowed next, if not computed since the last Accept:
  // the work AllowedTokens would do, done ahead (while a step runs). Returns
  // whether it computed them.
  bool PrepareAllowedTokens();

  // A bitmask over the logits' vocabulary (bit t % 32 of word t / 32 set
  // when token t may come next, the layout of Sampler::Sample's
  // `allowed_tokens`), or an empty span when no token may: the grammar is
  // complete and none of the stop tokens it was made with is allowed (or it
  // was made with none), or a stop token ended it. Valid until the next
  // Accept. An Internal error where xgrammar failed.
  absl::StatusOr<absl::Span<const uint32_t>> AllowedTokens();

  // Moves past `token`; an Internal error naming it when the grammar does
  // not allow it (a sampler that honoured AllowedTokens never draws one).
  absl::Status Accept(int32_t token);

  // A stop token was accepted at the grammar's end.
  bool Terminated() const;

  // A matcher at the same place, going on alone (a beam's child).
  GrammarMatcher Fork() const;

 private:
  friend class CompiledGrammar;
  struct State;
  explicit GrammarMatcher(std::unique_ptr<State> state);

  std::unique_ptr<State> state_;
};

}  // namespace kvjit::grammar

#endif  // KVJIT_RUNTIME_GRAMMAR_GRAMMARMATCHER_H_
