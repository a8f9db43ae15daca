#ifndef KVJIT_TESTS_UNIT_FRONTEND_TOKENIZER_TOKENIZERJSONOF_H_
#define KVJIT_TESTS_UNIT_FRONTEND_TOKENIZER_TOKENIZERJSONOF_H_

#include <string>

#include "runtime/tokenizer/Vocabulary.h"
#include "nlohmann/json.hpp"

namespace kvjit::tokenizer {

// A byte-level BPE vocabulary as a tokenizer.json writes it: every token in
// model.vocab, control and user-defined ones also in added_tokens (not
// normalized, so found in the raw text), the merges, and `pre_tokenizer`.
std::string TokenizerJsonOf(const Vocabulary& vocabulary, const nlohmann::json& pre_tokenizer);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_TESTS_UNIT_FRONTEND_TOKENIZER_TOKENIZERJSONOF_H_
