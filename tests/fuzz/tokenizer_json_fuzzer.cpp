// Feeds arbitrary bytes to the tokenizer.json reader
// (hf::ParseBpeTokenizerJson), the vocabulary built from what it accepts
// (VocabularyFromHfTokenizerJson) and the tokenizer built from that
// (CreateTokenizer). A tokenizer that builds is run over fixed texts and id
// lists, and carried through an executable's Tokenizer table and back
// (TokenizerFuzzCommon.h); run with -dict=tests/fuzz/tokenizer_json.dict.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "frontend/huggingface/HfTokenizerJson.h"
#include "frontend/tokenizer/HfVocabulary.h"
#include "tests/fuzz/TokenizerFuzzCommon.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<kvjit::hf::BpeTokenizerJson> json =
      kvjit::hf::ParseBpeTokenizerJson(text, "fuzz/tokenizer.json");
  if (!json.ok()) {
    kvjit::fuzz::Refused(json.status());
    return 0;
  }
  absl::StatusOr<kvjit::tokenizer::Vocabulary> vocabulary =
      kvjit::tokenizer::VocabularyFromHfTokenizerJson(*json, "fuzz/tokenizer.json");
  if (!vocabulary.ok()) {
    kvjit::fuzz::Refused(vocabulary.status());
    return 0;
  }
  kvjit::fuzz::ExerciseVocabulary(*std::move(vocabulary));
  return 0;
}
