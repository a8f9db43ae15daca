// Feeds arbitrary bytes to the SentencePiece model reader
// (ParseSentencePieceModel, the ModelProto of a tokenizer.model) and the
// tokenizer built from what it accepts (CreateTokenizer). A tokenizer that
// builds is run over fixed texts and id lists, and carried through an
// executable's Tokenizer table and back (TokenizerFuzzCommon.h).

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontend/tokenizer/SentencePieceModelFile.h"
#include "tests/fuzz/TokenizerFuzzCommon.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<kvjit::tokenizer::Vocabulary> vocabulary =
      kvjit::tokenizer::ParseSentencePieceModel(bytes, "fuzz/tokenizer.model");
  if (!vocabulary.ok()) {
    kvjit::fuzz::Refused(vocabulary.status());
    return 0;
  }
  kvjit::fuzz::ExerciseVocabulary(*std::move(vocabulary));
  return 0;
}
