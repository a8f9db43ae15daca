#ifndef KVJIT_FRONTEND_TOKENIZER_HFVOCABULARY_H
#define KVJIT_FRONTEND_TOKENIZER_HFVOCABULARY_H

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "frontend/huggingface/HfTokenizerJson.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// The vocabulary of a byte-level BPE tokenizer.json; `source` names the file
// in error messages. Token ids must run from 0 without gaps over model.vocab
// and added_tokens together. The pre-tokenizer must end in a ByteLevel step;
// one whose regexes are those of a PreTokenizer gets that PreTokenizer, any
// other its own split_rules. No BOS or EOS is set: tokenizer.json does not
// name them (tokenizer_config.json does).
absl::StatusOr<Vocabulary> VocabularyFromHfTokenizerJson(
    const hf::BpeTokenizerJson& json, const std::string& source);

// The tokenizer of a Hugging Face model directory: `directory`/tokenizer.json
// and, where present, `directory`/tokenizer_config.json, whose bos_token,
// eos_token, add_bos_token and add_eos_token are read. Without add_bos_token,
// BOS is added for Llama 3's pre-tokenizer only, as Llama 3's tokenizer.json
// adds it in a post-processor that is not read.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromHfDirectory(
    const std::string& directory);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_FRONTEND_TOKENIZER_HFVOCABULARY_H
