#ifndef KVJIT_RUNTIME_GRAMMAR_GRAMMARCOMPILER_H_
#define KVJIT_RUNTIME_GRAMMAR_GRAMMARCOMPILER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/grammar/GrammarMatcher.h"
#include "runtime/grammar/GrammarSpec.h"
#include "runtime/tokenizer/Tokenizer.h"

namespace kvjit::grammar {

// A grammar compiled against one vocabulary: immutable, shared by every
// sequence of the requests that use it.
class CompiledGrammar {
 public:
  ~CompiledGrammar();

  // A matcher at the grammar's start. Once the grammar is complete only
  // `stop_token_ids` may follow; with none, nothing may (the sequence ends
  // there).
  GrammarMatcher NewMatcher(absl::Span<const int32_t> stop_token_ids) const;

  // Words in AllowedTokens' bitmask.
  int32_t bitmask_words() const;

 private:
  friend class GrammarCompiler;
  struct Compiled;
  explicit CompiledGrammar(std::unique_ptr<Compiled> compiled);

  std::unique_ptr<Compiled> compiled_;
};

// Compiles grammars (GrammarSpec) into token masks with xgrammar, for one
// tokenizer and a model whose logits have `logits_vocab_size` entries (ids
// past the tokenizer's are never allowed). Keeps what it compiled, so a
// schema sent again compiles once. Thread-safe.
class GrammarCompiler {
 public:
  static absl::StatusOr<std::unique_ptr<GrammarCompiler>> Create(
      const tokenizer::Tokenizer& tokenizer, int64_t logits_vocab_size);
  ~GrammarCompiler();

  // An InvalidArgument error naming the grammar's kind and what is wrong
  // with it: a schema that is not JSON or not a schema xgrammar supports,
  // a regex or EBNF that does not parse, an empty choice list.
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(const GrammarSpec& spec);

 private:
  struct Compiler;
  explicit GrammarCompiler(std::unique_ptr<Compiler> compiler);

  std::unique_ptr<Compiler> compiler_;
};

}  // namespace kvjit::grammar

#endif  // KVJIT_RUNTIME_GRAMMAR_GRAMMARCOMPILER_H_
