#ifndef KVJIT_FRONTEND_SAFETENSORS_HFTOKENIZERJSON_H_
#define KVJIT_FRONTEND_SAFETENSORS_HFTOKENIZERJSON_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kvjit::hf {

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool special = false;
};

// The parts of a Hugging Face `tokenizer.json` with a BPE model that an
// encoder needs. Parsing only: encoding lives in frontend/tokenizer.
// The normalizer, post-processor and decoder sections are not read.
struct BpeTokenizerJson {
  // model.vocab: token -> id. Ids are unique.
  absl::flat_hash_map<std::string, int64_t> vocab;
  // model.merges in priority order (first merges first). Both pieces and
  // their concatenation are in vocab.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedToken> added_tokens;
  // Regexes of the pre-tokenizer's Split steps, in order. Each splits with
  // behavior "Isolated": matches and the text between them become pieces.
  std::vector<std::string> split_patterns;
  // A ByteLevel pre-tokenizer is present: pieces are mapped to GPT-2's
  // byte-to-unicode alphabet before BPE.
  bool byte_level = false;
  // That ByteLevel step also splits with GPT-2's own regex first.
  bool byte_level_uses_regex = false;
  // model.byte_fallback: unknown characters become <0xNN> byte tokens.
  bool byte_fallback = false;
};

// Parses tokenizer.json text; `source` names the file in error messages.
absl::StatusOr<BpeTokenizerJson> ParseBpeTokenizerJson(absl::string_view json_text,
                                                       absl::string_view source = "tokenizer.json");

// Reads `directory`/tokenizer.json.
absl::StatusOr<BpeTokenizerJson> LoadBpeTokenizerJson(const std::string& directory);

}  // namespace kvjit::hf

#endif  // KVJIT_FRONTEND_SAFETENSORS_HFTOKENIZERJSON_H_
