#ifndef KVJIT_FRONTEND_TOKENIZER_SENTENCEPIECEMODELFILE_H_
#define KVJIT_FRONTEND_TOKENIZER_SENTENCEPIECEMODELFILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// The vocabulary of a SentencePiece model file (`tokenizer.model`, the
// ModelProto protobuf of sentencepiece_model.proto), read without the
// protobuf library: its pieces with their scores and types, the unknown,
// BOS, EOS and padding ids, byte fallback and add_dummy_prefix. Only what
// kvjit's SentencePiece tokenizer runs as SentencePiece does is taken: a BPE
// model (Llama 2, Mistral, Gemma, Phi-3, TinyLlama) whose normalizer is
// "identity" and keeps whitespace runs; anything else is refused naming the
// field.
absl::StatusOr<Vocabulary> ReadVocabularyFromSentencePieceModel(const std::string& path);
// The same over bytes already read; `name` stands for the path in messages.
absl::StatusOr<Vocabulary> ParseSentencePieceModel(absl::string_view bytes,
                                                   const std::string& name);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_FRONTEND_TOKENIZER_SENTENCEPIECEMODELFILE_H_
