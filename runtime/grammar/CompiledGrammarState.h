#ifndef KVJIT_RUNTIME_GRAMMAR_COMPILEDGRAMMARSTATE_H_
#define KVJIT_RUNTIME_GRAMMAR_COMPILEDGRAMMARSTATE_H_

// xgrammar's objects behind CompiledGrammar and GrammarMatcher: private to
// runtime/grammar, so that nothing else includes xgrammar.

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/grammar/GrammarCompiler.h"
#include "runtime/grammar/GrammarMatcher.h"
#include "xgrammar/xgrammar.h"

namespace kvjit::grammar {

struct CompiledGrammar::Compiled {
  Compiled(xgrammar::CompiledGrammar grammar, int32_t vocab_size)
      : grammar(std::move(grammar)), vocab_size(vocab_size) {}
  xgrammar::CompiledGrammar grammar;
  int32_t vocab_size;
};

struct GrammarMatcher::State {
  State(xgrammar::GrammarMatcher matcher, int32_t vocab_size)
      : matcher(std::move(matcher)),
        vocab_size(vocab_size),
        bitmask(xgrammar::GetBitmaskSize(vocab_size)) {}
  xgrammar::GrammarMatcher matcher;
  int32_t vocab_size;
  std::vector<int32_t> bitmask;
  // `bitmask` holds the tokens allowed after the tokens accepted so far.
  bool prepared = false;
  bool any_allowed = false;
  // What xgrammar threw while preparing, if it did.
  std::string error;
};

}  // namespace kvjit::grammar

#endif  // KVJIT_RUNTIME_GRAMMAR_COMPILEDGRAMMARSTATE_H_
