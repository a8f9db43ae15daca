#ifndef KVJIT_RUNTIME_TOKENIZER_EXECUTABLETOKENIZER_H_
#define KVJIT_RUNTIME_TOKENIZER_EXECUTABLETOKENIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "flatbuffers/flatbuffers.h"
#include "runtime/schema/kvx_generated.h"
#include "runtime/tokenizer/Tokenizer.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::tokenizer {

// Writes `vocabulary` as an executable's Tokenizer table (the compiler's
// half of the contract TokenizerFromExecutable reads back).
flatbuffers::Offset<kvx::Tokenizer> WriteTokenizerTable(
    flatbuffers::FlatBufferBuilder& builder, const Vocabulary& vocabulary,
    const std::string& chat_template);

// The Vocabulary a Tokenizer table holds.
absl::StatusOr<Vocabulary> VocabularyFromTable(const kvx::Tokenizer& table);

// The tokenizer an executable carries.
absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerFromExecutable(
    const kvx::Executable& executable);

}  // namespace kvjit::tokenizer

#endif  // KVJIT_RUNTIME_TOKENIZER_EXECUTABLETOKENIZER_H_
