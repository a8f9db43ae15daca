#ifndef KVJIT_FRONTEND_SAFETENSORS_HFTOKENIZERJSON_H_
#define KVJIT_FRONTEND_SAFETENSORS_HFTOKENIZERJSON_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/tokenizer/Vocabulary.h"

namespace kvjit::hf {

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  // Absent in a file: true for a token that is not special, as tokenizers
  // reads it.
  bool normalized = false;
};

// SplitDelimiterBehavior of a Split pre-tokenizer.
enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One pre-tokenizer of the file, Sequence steps flattened in order.
struct PreTokenizerStep {
  enum class Kind { kSplit, kDigits, kByteLevel, kMetaspace };
  Kind kind = Kind::kSplit;
  // Where the step is in the file, for messages ("tokenizer.json:
  // pre_tokenizer.pretokenizers[1]").
  std::string where;
  // kSplit: pattern.Regex, or pattern.String taken literally.
  std::string pattern;
  bool pattern_is_literal = false;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kDigits: each digit a piece of its own, else runs of digits.
  bool individual_digits = false;
  // kByteLevel: also splits with GPT-2's own regex first.
  bool use_regex = true;
  // kMetaspace.
  tokenizer::Metaspace metaspace;
};

// The post-processor's TemplateProcessing for a single text: the special
// tokens it puts before and after the text.
struct PostProcessorTemplate {
  std::vector<int64_t> prefix_ids;
  std::vector<int64_t> suffix_ids;
};

// The parts of a Hugging Face `tokenizer.json` with a BPE model that an
// encoder and decoder need. Parsing only: encoding lives in
// frontend/tokenizer. Kinds of normalizer, pre-tokenizer, decoder and
// post-processor not listed here are refused, naming their JSON path.
struct BpeTokenizerJson {
  // model.vocab: token -> id. Ids are unique.
  absl::flat_hash_map<std::string, int64_t> vocab;
  // model.merges in priority order (first merges first). Both pieces and
  // their concatenation are in vocab.
  std::vector<std::pair<std::string, std::string>> merges;
  std::vector<AddedToken> added_tokens;
  // Sequence steps flattened in order.
  std::vector<tokenizer::NormalizerStep> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizer_steps;
  // Sequence steps flattened in order; a ByteLevel decoder is noted in
  // byte_level_decoder instead.
  std::vector<tokenizer::DecoderStep> decoder_steps;
  bool byte_level_decoder = false;
  // Absent where the file has no TemplateProcessing post-processor.
  std::optional<PostProcessorTemplate> post_processor;
  // model.unk_token, or "" for null.
  std::string unk_token;
  // model.byte_fallback: unknown characters become <0xNN> byte tokens.
  bool byte_fallback = false;
  // model.fuse_unk: neighbouring unknown characters become one unk token.
  bool fuse_unk = false;
  // model.ignore_merges: a word that is a token is taken whole.
  bool ignore_merges = false;
};

// Parses tokenizer.json text; `source` names the file in error messages.
absl::StatusOr<BpeTokenizerJson> ParseBpeTokenizerJson(absl::string_view json_text,
                                                       absl::string_view source = "tokenizer.json");

// Reads `directory`/tokenizer.json.
absl::StatusOr<BpeTokenizerJson> LoadBpeTokenizerJson(const std::string& directory);

}  // namespace kvjit::hf

#endif  // KVJIT_FRONTEND_SAFETENSORS_HFTOKENIZERJSON_H_
