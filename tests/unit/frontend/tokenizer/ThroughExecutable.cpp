#include "tests/unit/frontend/tokenizer/ThroughExecutable.h"

#include <utility>

#include "flatbuffers/flatbuffers.h"
#include "runtime/tokenizer/ExecutableTokenizer.h"

namespace kvjit::tokenizer {

absl::StatusOr<std::unique_ptr<Tokenizer>> TokenizerThroughExecutable(
    const Vocabulary& vocabulary) {
  flatbuffers::FlatBufferBuilder builder;
  builder.Finish(WriteTokenizerTable(builder, vocabulary, ""));
  const auto* table = flatbuffers::GetRoot<kvx::Tokenizer>(builder.GetBufferPointer());
  absl::StatusOr<Vocabulary> read = VocabularyFromTable(*table);
  if (!read.ok()) return read.status();
  return CreateTokenizer(*std::move(read));
}

}  // namespace kvjit::tokenizer
