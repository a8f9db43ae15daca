#ifndef KVJIT_FRONTEND_TOKENIZER_GGUFVOCABULARY_H
#define KVJIT_FRONTEND_TOKENIZER_GGUFVOCABULARY_H

#include <memory>

#include "absl/status/statusor.h"
#include "frontend/gguf/GgufFile.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// Reads the tokenizer.ggml.* metadata of `file`. Where a key is absent the
// defaults are llama.cpp's: SentencePiece adds BOS and a space prefix,
// byte-level BPE neither (but Llama 3's pre-tokenizer adds BOS).
absl::StatusOr<Vocabulary> ReadVocabularyFromGguf(const gguf::GgufFile& file);

// ReadVocabularyFromGguf, then CreateTokenizer.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerFromGguf(
    const gguf::GgufFile& file);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_FRONTEND_TOKENIZER_GGUFVOCABULARY_H
