#ifndef KVJIT_FRONTEND_TOKENIZER_HFVOCABULARY_H
#define KVJIT_FRONTEND_TOKENIZER_HFVOCABULARY_H

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "frontend/huggingface/HfTokenizerJson.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// The vocabulary of a tokenizer.json with a BPE model; `source` names the
// file in error messages. Token ids must run from 0 without gaps over
// model.vocab and added_tokens together. A pre-tokenizer with a ByteLevel
// step (last) makes byte-level BPE, whose regexes become a PreTokenizer where
// they are one's, else split_rules; one without makes character BPE, with
// the file's split rules, Metaspace (last), decoder, byte_fallback and
// fuse_unk. The normalizer and the added tokens' options apply to both. BOS
// and EOS are those the post-processor's TemplateProcessing puts around a
// text, if any.
absl::StatusOr<Vocabulary> VocabularyFromHfTokenizerJson(
    const hf::BpeTokenizerJson& json, const std::string& source);

// The tokenizer of a Hugging Face model directory: `directory`/tokenizer.json
// (or, without one, `directory`/tokenizer.model) and, where present,
// `directory`/tokenizer_config.json, whose bos_token, eos_token,
// add_bos_token and add_eos_token override what tokenizer.json says. Without
// add_bos_token, BOS is added where the post-processor adds it, and for
// files without a post-processor for SentencePiece models and Llama 3's
// pre-tokenizer, as transformers does.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromHfDirectory(
    const std::string& directory);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_FRONTEND_TOKENIZER_HFVOCABULARY_H
